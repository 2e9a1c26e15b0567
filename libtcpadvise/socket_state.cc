#include "socket_state.h"

#include <errno.h>
#include <string.h>

#include "address.h"
#include "errno_saver.h"
#include "private_alloc.h"
#include "process_page.h"

namespace tcpadvise {

const char* WriteApiName(WriteApi api) {
  static const char* const kNames[] = {"write", "writev", "send", "sendto", "sendmsg", "sendmmsg", "sendfile"};
  return kNames[static_cast<int>(api)];
}

const char* ReadApiName(ReadApi api) {
  static const char* const kNames[] = {"read", "readv", "recv", "recvfrom", "recvmsg", "recvmmsg"};
  return kNames[static_cast<int>(api)];
}

const char* FlushCauseName(FlushCause cause) {
  static const char* const kNames[] = {"read", "wait",  "limit", "deadline", "close",      "shutdown",
                                       "dup2", "fork",  "exec",  "exit",     "passthrough"};
  return kNames[static_cast<int>(cause)];
}

const char* AppOptionName(AppOption option) {
  static const char* const kNames[] = {"TCP_NODELAY", "TCP_CORK", "TCP_QUICKACK", "SO_SNDBUF", "SO_RCVBUF"};
  return kNames[static_cast<int>(option)];
}

static void AddCounters(Counter* to, const Counter* from, int n) {
  for (int i = 0; i < n; ++i) to[i].Add(from[i].Get());
}

static void ZeroCounters(Counter* c, int n);

static void KeepMax(Counter& to, const Counter& from) {
  if (from.Get() > to.Get()) to.Set(from.Get());
}

void PolicyCounters::MergeFrom(const PolicyCounters& o) {
  AddCounters(flushes, o.flushes, static_cast<int>(FlushCause::kCount));
  bytes_held.Add(o.bytes_held.Get());
  KeepMax(max_bytes_held, o.max_bytes_held);
  KeepMax(longest_hold_ticks, o.longest_hold_ticks);
  corks.Add(o.corks.Get());
  bursts_passed.Add(o.bursts_passed.Get());
  bursts_held.Add(o.bursts_held.Get());
  bursts_pieces.Add(o.bursts_pieces.Get());
  adapt_switches.Add(o.adapt_switches.Get());
  conflicts.Set(conflicts.Get() | o.conflicts.Get());
  deferred_errors.MergeFrom(o.deferred_errors);
}

bool PolicyCounters::Empty() const {
  uint64_t any = bytes_held.Get() | max_bytes_held.Get() | longest_hold_ticks.Get() | corks.Get() |
                 bursts_passed.Get() | bursts_held.Get() | bursts_pieces.Get() | adapt_switches.Get() |
                 conflicts.Get() | deferred_errors.Total();
  for (const Counter& c : flushes) any |= c.Get();
  return any == 0;
}

void PolicyCounters::Reset() {
  // Counters that hold nothing are left unwritten: a fork parent reuses the
  // entry of the connection it handed to its child (a PostgreSQL postmaster,
  // at its next accept), and a write here copies a page the child shares.
  if (Empty()) return;
  ZeroCounters(flushes, static_cast<int>(FlushCause::kCount));
  bytes_held.Set(0);
  max_bytes_held.Set(0);
  longest_hold_ticks.Set(0);
  corks.Set(0);
  bursts_passed.Set(0);
  bursts_held.Set(0);
  bursts_pieces.Set(0);
  adapt_switches.Set(0);
  conflicts.Set(0);
  deferred_errors.Reset();
}

void SocketStats::SetSentToReplyApart() {
  sent_to_reply_ticks.MergeBucketsFrom(turn_ticks);
  buckets_apart.fetch_or(kSentToReplyApart, std::memory_order_release);
}

void SocketStats::SetBurstBytesApart() {
  uint64_t open_n;
  const int open = OpenBurstExcept(&open_n);
  burst_bytes.MergeBucketsFrom(write_size, open, open_n);
  if (const uint64_t implied = ImpliedOneWriteBursts(); implied != 0) burst_writes.RecordRepeated(1, implied);
  buckets_apart.fetch_or(kBurstBytesApart, std::memory_order_release);
}

void SocketStats::MergeBorrowing(uint8_t bit, Histogram* h, const Histogram& other_h, const Histogram& other_buckets,
                                 int other_except, uint64_t n) {
  const bool other_apart = &other_buckets == &other_h;
  h->MergeBoundsFrom(other_h);
  if (!(Apart() & bit)) {
    if (!other_apart && other_except < 0) return;  // both borrow: the lenders' merge brings the buckets
    bit == kSentToReplyApart ? SetSentToReplyApart() : SetBurstBytesApart();
  }
  h->MergeBucketsFrom(other_buckets, other_apart ? -1 : other_except, n);
}

void SocketStats::MergeFrom(const SocketStats& o) {
  // The borrowing histograms first, while their lenders hold this side's values only.
  MergeBorrowing(kSentToReplyApart, &sent_to_reply_ticks, o.sent_to_reply_ticks, o.SentToReplyBuckets(), -1, 0);
  uint64_t open_n;
  const int open = o.OpenBurstExcept(&open_n);
  MergeBorrowing(kBurstBytesApart, &burst_bytes, o.burst_bytes, o.BurstBytesBuckets(), open, open_n);
  AddTurns(o.Turns());
  MergeApiCounts(&write_by_api, write_calls.Get(), o.write_by_api, o.write_calls.Get());
  MergeApiCounts(&read_by_api, read_calls.Get(), o.read_by_api, o.read_calls.Get());
  write_calls.Add(o.write_calls.Get());
  write_bytes.Add(o.write_bytes.Get());
  read_calls.Add(o.read_calls.Get());
  read_bytes.Add(o.read_bytes.Get());
  write_size.MergeFrom(o.write_size);
  write_iovcnt.MergeFrom(o.write_iovcnt);
  write_ticks.MergeFrom(o.write_ticks);
  gap_ticks.MergeFrom(o.gap_ticks);
  // Both still implying their one-write bursts: write_size's merge brings
  // the other's. Else this side holds its own (MergeBorrowing set it apart):
  // the other's implied ones too.
  if (Apart() & kBurstBytesApart) {
    if (const uint64_t implied = o.ImpliedOneWriteBursts(); implied != 0) burst_writes.RecordRepeated(1, implied);
  }
  burst_writes.MergeFrom(o.burst_writes);
  turn_ticks.MergeFrom(o.turn_ticks);
  read_eof.Add(o.read_eof.Get());
  partial_writes.Add(o.partial_writes.Get());
  write_eagain.Add(o.write_eagain.Get());
  read_size.MergeFrom(o.read_size);
  errors.MergeFrom(o.errors);
  // A group that cannot get its policy counters (memory ran out) leaves
  // this socket's out; PolicyFailOpen's warning says why.
  // Empty counters add nothing (a fork parent's unused copy of its child's
  // connection): the group's are not written, nor allocated.
  if (const PolicyCounters* other = o.policy_counters(); other != nullptr && !other->Empty()) {
    if (PolicyCounters* mine = MakePolicyCounters()) mine->MergeFrom(*other);
  }
}

bool SocketStats::Recorded() const {
  return Active() || read_eof.Get() != 0 || errors.Total() != 0 ||
         (policy_counters() != nullptr && !policy_counters()->Empty());
}

PolicyCounters* SocketStats::MakePolicyCounters() {
  PolicyCounters* current = policy_counters_.load(std::memory_order_acquire);
  if (current != nullptr || t_in_private_heap) return current;
  // From the table's arena, as the entry's other parts: a rule that only
  // observes or sets options (no policy state) never starts the private heap.
  PolicyCounters* fresh = TableNew<PolicyCounters>();
  if (fresh == nullptr) return nullptr;
  if (!policy_counters_.compare_exchange_strong(current, fresh, std::memory_order_acq_rel,
                                                std::memory_order_acquire)) {
    TableFree(fresh);  // never published: nobody else can see it
    return current;
  }
  return fresh;
}

static void ZeroCounters(Counter* c, int n) {
  for (int i = 0; i < n; ++i) c[i].Set(0);
}

void SocketStats::Reset() {
  write_calls.Set(0);
  write_bytes.Set(0);
  read_calls.Set(0);
  read_bytes.Set(0);
  burst_open_writes.Set(0);
  burst_open_bytes.Set(0);
  last_write_start.Set(0);
  turn_start.Set(0);
  write_by_api.Reset();
  write_size.Reset();
  write_iovcnt.Reset();
  write_ticks.Reset();
  gap_ticks.Reset();
  burst_writes.Reset();
  burst_bytes.Reset();
  turn_ticks.Reset();
  sent_to_reply_ticks.Reset();
  buckets_apart.store(0, std::memory_order_release);
  period_code.store(kFullWeightCode, std::memory_order_relaxed);
  turns_low.store(0, std::memory_order_relaxed);
  turns_high.store(0, std::memory_order_relaxed);
  read_by_api.Reset();
  read_eof.Set(0);
  partial_writes.Set(0);
  write_eagain.Set(0);
  read_size.Reset();
  errors.Reset();
  if (PolicyCounters* c = policy_counters()) c->Reset();
}

// AddressBytes points at the address part of an IPv4 or IPv6 sockaddr.
static const unsigned char* AddressBytes(const SocketAddress& a, size_t* len) {
  if (a.ss_family == AF_INET) {
    *len = 4;
    return reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in&>(a).sin_addr);
  }
  if (a.ss_family == AF_INET6) {
    *len = 16;
    return reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in6&>(a).sin6_addr);
  }
  *len = 0;
  return nullptr;
}

static void SetPort(SocketAddress* a, uint16_t port) {
  if (a->ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(a)->sin_port = htons(port);
  if (a->ss_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(a)->sin6_port = htons(port);
}

void SocketIdentity::ClearEphemeralPort() { SetPort(role == Role::kServer ? &peer : &local, 0); }

uint16_t SocketIdentity::ServicePort() const { return role == Role::kServer ? PortOf(local) : PortOf(peer); }

const char* ShapeKindName(ShapeKind kind) {
  static const char* const kNames[] = {"unused", "write-only", "read-only", "request-response"};
  return kNames[static_cast<int>(kind)];
}

uint8_t ShapeOf(const SocketStats& stats) {
  ShapeKind kind;
  const bool wrote = stats.write_bytes.Get() != 0, read = stats.read_bytes.Get() != 0;
  if (wrote && read) {
    kind = ShapeKind::kRequestResponse;
  } else if (wrote) {
    kind = ShapeKind::kWriteOnly;
  } else if (read) {
    kind = ShapeKind::kReadOnly;
  } else {
    // Calls that moved no byte (EAGAIN, end of file) are still a use.
    kind = stats.Active() ? ShapeKind::kReadOnly : ShapeKind::kUnused;
  }
  const double median = wrote ? stats.write_size.Percentile(0.5) : 0;
  int size_class = 0;
  if (median >= 1) size_class = 1 + (63 - __builtin_clzll(static_cast<uint64_t>(median))) / 2;
  return static_cast<uint8_t>(static_cast<int>(kind) | (size_class << 2));
}

bool SocketIdentity::SameGroup(const SocketIdentity& other) const {
  if (role != other.role || shape != other.shape || rule != other.rule || local.ss_family != other.local.ss_family || ServicePort() != other.ServicePort()) {
    return false;
  }
  size_t len_a, len_b;
  const unsigned char* a = AddressBytes(peer, &len_a);
  const unsigned char* b = AddressBytes(other.peer, &len_b);
  return len_a == len_b && (len_a == 0 || memcmp(a, b, len_a) == 0);
}

uint64_t SocketIdentity::GroupHash() const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  auto mix = [&h](uint64_t byte) { h = (h ^ byte) * 1099511628211ull; };
  mix(static_cast<uint64_t>(role));
  mix(shape);
  mix(static_cast<uint64_t>(rule + 1));
  mix(local.ss_family);
  mix(ServicePort());
  size_t len;
  const unsigned char* addr = AddressBytes(peer, &len);
  for (size_t i = 0; i < len; ++i) mix(addr[i]);
  return h;
}

uint64_t NextRecordedTurn(uint64_t turn, const TurnSampling& sampling) {
  const uint32_t shift = sampling.every_shift;
  const uint64_t k = turn - sampling.first, mask = (uint64_t{1} << shift) - 1;
  // Block b records its turn at offset -hash(b) (TurnWeightCode).
  for (uint64_t block = k >> shift;; ++block) {
    const uint64_t offset = (block * 0x9e3779b97f4a7c15ull) >> 32;
    const uint64_t at = (block << shift) + ((0 - offset) & mask);
    if (at > k) return sampling.first + at;
  }
}

uint32_t SocketState::OpeningCode(uint64_t turn, const TurnSampling& sampling) {
  const uint32_t code = TurnWeightCode(turn, sampling);
  if (code == kUnrecordedCode) stats.turn_start.Set(NextRecordedTurn(turn, sampling) | SocketStats::kNextRecordedTag);
  return code;
}

void SocketState::CountError(int errno_value) {
  stats.errors.Add(ErrnoSlot(errno_value), 1);
}

void SocketState::CountWriteError(int errno_value) {
  if (errno_value == EAGAIN) stats.write_eagain.Increment();
  CountError(errno_value);
}

void SocketState::OnReadNothing(int64_t result, int errno_value) {
  if (result == 0) {
    stats.read_eof.Increment();
  } else {
    CountError(errno_value);
  }
}

bool SocketState::WorthReporting() const {
  const bool connected = id.role == Role::kClient || id.role == Role::kServer;
  return stats.Active() || (connected && !Inherited());
}

bool SocketState::Inherited() const { return owner != ProcessToken(); }

void SocketState::ReadKernelState(int fd) {
  // The fd may have been closed behind the shim's back (syscall(SYS_close),
  // as libuv does) and perhaps reused: only this socket's own figures count.
  if (id.cookie != 0) {
    ErrnoSaver errno_saver;
    if (SocketCookie(fd) != id.cookie) return;
  }
  ReadTcpInfo(fd, &tcp_info);
  ReadKernelOptions(fd, &kernel_options);
}

void SocketState::ResetForReuse() {
  id = SocketIdentity();
  stats.policy = nullptr;
  refs = 0;
  opened_ticks = 0;
  connections = 0;
  turns_recorded.Set(0);
  lifetime_ticks = 0;
  owner = 0;
  experiment_draw_pending = false;
  nonblocking.store(false, std::memory_order_relaxed);
  options_set_mask = 0;
  for (int32_t& v : options_set) v = 0;
  kernel_options = KernelOptions();
  tcp_info = TcpInfoSummary();
  stats.Reset();
}

void SocketState::MergeFrom(const SocketState& closed) {
  if (connections == 0) {
    id = closed.id;
    id.ClearEphemeralPort();
  } else {
    id.cookie = 0;  // a group of several connections keeps no one cookie
  }
  connections += closed.connections;
  turns_recorded.Add(closed.turns_recorded.Get());
  lifetime_ticks += closed.lifetime_ticks;
  owner = closed.owner;  // the group key keeps inherited sockets apart
  nonblocking.store(closed.nonblocking.load(std::memory_order_relaxed), std::memory_order_relaxed);
  options_set_mask |= closed.options_set_mask;
  for (int i = 0; i < static_cast<int>(AppOption::kCount); ++i) {
    if (closed.options_set_mask & (1u << i)) options_set[i] = closed.options_set[i];
  }
  if (closed.kernel_options.valid) kernel_options = closed.kernel_options;
  tcp_info.MergeFrom(closed.tcp_info);
  // A socket that recorded nothing (a fork parent's copy of the connection
  // its child serves) adds nothing to them: its histograms, cold after the
  // fork, are not walked on the server's accept loop.
  if (closed.stats.Recorded()) stats.MergeFrom(closed.stats);
}

}  // namespace tcpadvise
