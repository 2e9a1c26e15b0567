// SocketState: what the shim knows about one TCP socket (or one group of
// closed sockets): identity, the options the application set, and the
// statistics the wrapped calls feed on the hot path.
#ifndef TCPADVISE_SOCKET_STATE_H_
#define TCPADVISE_SOCKET_STATE_H_

#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>

#include <atomic>

#include "address.h"
#include "clock.h"
#include "counter.h"
#include "histogram.h"
#include "sparse_counters.h"
#include "tcp_info.h"

namespace tcpadvise {

// Role says how the socket came to be connected.
enum class Role : uint8_t { kUnknown, kClient, kServer, kListener };

// WriteApi names the call family a write went through.
enum class WriteApi : uint8_t { kWrite, kWritev, kSend, kSendto, kSendmsg, kSendmmsg, kSendfile, kCount };

// ReadApi names the call family a read went through (fortified variants count
// as their plain twin).
enum class ReadApi : uint8_t { kRead, kReadv, kRecv, kRecvfrom, kRecvmsg, kRecvmmsg, kCount };

// AppOption lists the socket options whose application settings the trace keeps.
enum class AppOption : uint8_t { kNodelay, kCork, kQuickack, kSndbuf, kRcvbuf, kCount };

const char* WriteApiName(WriteApi api);
const char* ReadApiName(ReadApi api);
const char* AppOptionName(AppOption option);

// kScalarWrite marks a write call that takes one buffer (write, send, sendto,
// sendfile), as opposed to an iovec count.
constexpr uint64_t kScalarWrite = ~uint64_t{0};

// kErrnoSlots covers every Linux errno; larger values share slot 0.
constexpr int kErrnoSlots = 134;

// ErrnoSlot is the slot errno_value counts in.
inline int ErrnoSlot(int errno_value) { return errno_value > 0 && errno_value < kErrnoSlots ? errno_value : 0; }

// ErrnoCounts count failed calls by errno slot: the two errnos a socket
// usually meets (EAGAIN, then EPIPE or ECONNRESET) inline, a 64 B table for
// the next ones.
using ErrnoCounts = SparseCounters<2, kErrnoSlots>;

// WriteApiCounts and ReadApiCounts count calls by API: the one family a
// socket usually uses inline (8 B), a 64 B table once it uses another.
// SocketStats keeps the first family's count implied (ApiCounted).
using WriteApiCounts = SparseCounters<1, static_cast<int>(WriteApi::kCount)>;
using ReadApiCounts = SparseCounters<1, static_cast<int>(ReadApi::kCount)>;

// CountOtherApi counts a call through api, which is not the one whose
// count counts implies (its inline key): the socket's first call claims the
// key, a call through another family is counted.
template <typename Counts>
[[gnu::cold, gnu::noinline]] void CountOtherApi(Counts* counts, int api) {
  if (counts->InlineKey() < 0) counts->ClaimInline(api);
  if (counts->InlineKey() != api) counts->Add(api, 1);
}

// ApiCounted counts a call through api in counts, whose inline key's count
// is implied (ApiCalls): the socket's usual family costs a compare, not an
// add (its calls are counted in write_calls or read_calls anyway).
template <typename Counts>
[[gnu::always_inline]] inline void ApiCounted(Counts* counts, int api) {
  if (__builtin_expect(counts->InlineKey() != api, 0)) CountOtherApi(counts, api);
}

// ApiCalls is the calls through api, of calls in all: those counts holds,
// and for its inline key the calls it does not hold (a snapshot that reads
// a call counted in one and not yet in the other gets 0, not a wrap).
template <typename Counts>
uint64_t ApiCalls(const Counts& counts, uint64_t calls, int api) {
  uint64_t n = counts.Get(api);
  if (api == counts.InlineKey()) {
    const uint64_t held = counts.Total();
    n += calls > held ? calls - held : 0;
  }
  return n;
}

// MergeApiCounts adds other's counts (other_calls in all) to counts (calls
// in all, before the merge): other's implied count too, explicitly, unless
// both imply the same key's.
template <typename Counts>
void MergeApiCounts(Counts* counts, uint64_t calls, const Counts& other, uint64_t other_calls) {
  const int other_key = other.InlineKey();
  if (calls == 0 && other_key >= 0) counts->ClaimInline(other_key);
  const uint64_t held = other.Total();
  const uint64_t implied = other_key >= 0 && other_calls > held ? other_calls - held : 0;
  counts->MergeFrom(other);
  if (implied != 0 && counts->InlineKey() != other_key) counts->AddOutOfLine(other_key, implied);
}

// FlushCause says why a policy sent held bytes (coalesce) or uncorked (cork).
enum class FlushCause : uint8_t {
  kRead, kWait, kLimit, kDeadline, kClose, kShutdown, kDup2, kFork, kExec, kExit, kPassthrough, kCount
};
const char* FlushCauseName(FlushCause cause);

// Conflict bits: the application set an option a policy also sets.
constexpr uint64_t kConflictNodelay = 1u << 0;
constexpr uint64_t kConflictCork = 1u << 1;
constexpr uint64_t kConflictSndbuf = 1u << 2;
constexpr uint64_t kConflictRcvbuf = 1u << 3;

// PolicyCounters are what a policy did on a socket or a group.
struct PolicyCounters {
  Counter flushes[static_cast<int>(FlushCause::kCount)];
  Counter bytes_held;
  Counter max_bytes_held;
  Counter longest_hold_ticks;
  Counter corks;
  // The adaptive rule (adapt.h), per burst: passed, its first write went
  // straight through (passive socket); held, acted on from its first write
  // (active socket); pieces, a passive socket's burst acted on from its
  // second write. switches: times the socket turned active or passive.
  Counter bursts_passed;
  Counter bursts_held;
  Counter bursts_pieces;
  Counter adapt_switches;
  Counter conflicts;  // kConflict* bits
  ErrnoCounts deferred_errors;

  void MergeFrom(const PolicyCounters& other);
  // PolicyCounters::Reset zeroes the counts, writing nothing when they are 0.
  void Reset();
  // PolicyCounters::Empty tells whether every count is 0 (read only: a
  // fork child resets only counters that hold something).
  bool Empty() const;
};

struct PolicyState;

// TurnSampling says which turns a socket records in full (runtime.h reads
// it from TCPADVISE_TURNS_FIRST and TCPADVISE_TURNS_EVERY): its first `first`
// turns, then one in 2^every_shift, each recorded value standing for that
// many. A turn's period runs from its first write to the next turn's: its
// writes, bursts, reads and turn time are recorded together or not at all.
// Calls, bytes and turns are counted exactly either way. The defaults, 64
// then one in 64: a recorded turn costs some 430 instructions against some
// 160 for a write and read only counted, and 256 then one in 16 spent about
// a fifth of the shim's time on a redis connection of 5,000 requests
// (bench/results/hot-path-session12.md); 64 recorded turns a connection, and
// one more a 64th of the way, still give a percentile per group.
// TCPADVISE_TURNS_FIRST_DEFAULT and TCPADVISE_TURNS_EVERY_DEFAULT are those
// defaults, macros so that the warning of a bad setting spells them
// (runtime.cc).
#define TCPADVISE_TURNS_FIRST_DEFAULT 64
#define TCPADVISE_TURNS_EVERY_DEFAULT 64
static_assert((TCPADVISE_TURNS_EVERY_DEFAULT & (TCPADVISE_TURNS_EVERY_DEFAULT - 1)) == 0, "a power of two");
struct TurnSampling {
  uint64_t first = TCPADVISE_TURNS_FIRST_DEFAULT;
  uint32_t every_shift = __builtin_ctz(TCPADVISE_TURNS_EVERY_DEFAULT);
};

// kUnrecordedCode is the weight code of a period not recorded; code k + 1
// records with weight 2^k (code 1: weight 1).
constexpr uint32_t kUnrecordedCode = 0;
constexpr uint32_t kFullWeightCode = 1;

// WeightOfCode is the weight a code stands for: 0, 1, 2, 4...
inline uint64_t WeightOfCode(uint32_t code) { return (uint64_t{1} << code) >> 1; }

// TurnWeightCode is the weight code of turn number `turn` (from 0): the first
// ones in full, then one turn in each block of 2^every_shift, at a position
// the block's number hashes to (a Fibonacci hash: a Weyl sequence, spread
// evenly), so that a program whose turns repeat a pattern is not always
// caught at the same point of it, and the weighted counts stay within a
// block of the true ones.
inline uint32_t TurnWeightCode(uint64_t turn, const TurnSampling& sampling) {
  if (turn < sampling.first) return kFullWeightCode;
  const uint64_t k = turn - sampling.first;
  const uint32_t shift = sampling.every_shift;
  const uint64_t offset = ((k >> shift) * 0x9e3779b97f4a7c15ull) >> 32;
  return ((k + offset) & ((uint64_t{1} << shift) - 1)) == 0 ? shift + 1 : kUnrecordedCode;
}

// NextRecordedTurn is the first turn after `turn` whose TurnWeightCode is
// not kUnrecordedCode, given that turn's is (so turn >= sampling.first): in
// turn's block of 2^every_shift turns or the next one.
uint64_t NextRecordedTurn(uint64_t turn, const TurnSampling& sampling);

// SocketStats are the statistics of a socket or a group, laid out so that a
// call touches few cache lines: the counters every call bumps share the first
// line, a histogram record touches one histogram's line, and a write's or a
// read's per-API count shares a line with the turn's start or the errno
// counts. Histograms, per-API and errno counts are sparse
// (sparse_counters.h): an open connection costs what it uses (1 KiB for its
// whole SocketState while each histogram sees at most three distinct
// buckets, then 64 B for the next 4 to 8 buckets of a histogram, about 6 B a
// bucket up to some 240). The policy's counters are allocated only for an
// entry a policy rule matched. The burst and turn state of a live socket
// rides in the hot line too; merging and resetting leave it to SocketState.
struct alignas(64) SocketStats {
  // The hot line. policy is not a statistic: it rides here so that the write
  // path learns whether a policy takes the call without touching another line;
  // it is set while a cork or coalesce policy runs on the socket.
  PolicyState* policy = nullptr;
  Counter write_calls;
  Counter write_bytes;
  Counter read_calls;
  Counter read_bytes;
  Counter burst_open_writes;  // writes since the last read
  Counter burst_open_bytes;
  // When the last write started (ticks), or when a policy released the
  // burst's bytes: a gap's and the sent-to-reply time's reference point; 0
  // once the reply has come, so that it also says a turn is open;
  // kUnrecordedTurn while a turn not recorded (TurnSampling) is open.
  Counter last_write_start;
  static constexpr uint64_t kUnrecordedTurn = 1;

  // The histograms, one cache line each (histogram.h). Two of them borrow
  // another's buckets for as long as they would hold the same ones:
  // burst_bytes write_size's while every burst is one write, and
  // sent_to_reply_ticks turn_ticks' while every turn's bytes left with its
  // only write (no policy held them). Their own sum, min and max are always
  // kept; a connection that talks in single-write turns, most do, pays for
  // the buckets once. The first burst or turn that differs copies the
  // lender's buckets (Apart). Read them through BurstBytesBuckets
  // and SentToReplyBuckets. burst_writes goes further: while every burst is
  // one write it holds nothing, its values implied (a 1 for each write in
  // write_size but the open burst's: ImpliedOneWriteBursts), and the first
  // burst of two writes gives it those values. Once a socket samples its
  // turns (TurnSampling) the histograms hold the recorded periods' values,
  // each with the period's weight; the borrowing holds between what is
  // recorded: a period is recorded whole (its bursts, writes, reads, turn)
  // and lender and borrower get the same weight.
  BytesHistogram write_size;
  // Only vector calls (writev, sendmsg, sendmmsg) are recorded here; a scalar
  // write's single buffer is added when the trace is written.
  CountHistogram write_iovcnt;
  TicksHistogram write_ticks;
  TicksHistogram gap_ticks;
  CountHistogram burst_writes;  // see ImpliedOneWriteBursts
  BytesHistogram burst_bytes;
  // Turns as the application sees them: from the start of the first write
  // after a reply to the first byte of the next reply, whatever the policy.
  TicksHistogram turn_ticks;
  // The kernel's share of a turn: from when the burst's last bytes were
  // handed to the kernel (the last write, or a policy's release) to the reply.
  TicksHistogram sent_to_reply_ticks;
  BytesHistogram read_size;

  // When the turn's first write started (ticks): the turn's start, valid
  // while last_write_start says a recorded turn is open. It shares
  // write_by_api's line, which every write touches anyway. While no turn
  // is open it may hold, tagged with kNextRecordedTag, the number of the next
  // turn to record (SocketState::WriteCode): a turn that opens before it is
  // only counted without hashing its number. Ticks never carry the tag and 0
  // holds nothing: either sends WriteCode to TurnWeightCode.
  Counter turn_start;
  static constexpr uint64_t kNextRecordedTag = uint64_t{1} << 63;
  // Writes that returned less than they were asked to send, and writes the
  // kernel refused with EAGAIN: with the sampled write times, the shim's own
  // evidence of a full send buffer (on loopback the kernel's sndbuf-limited
  // time stays 0).
  Counter partial_writes;
  Counter write_eagain;
  // In the line of the per-API counts that every call touches, 8 bytes:
  // buckets_apart has a k*Apart bit set for each borrowing histogram that
  // holds its own buckets (set by an atomic or, never lost to another
  // thread's store), and kCallSiteSampled while the socket's last write
  // with bytes was sampled for its call site (hooks.cc: the next write that
  // opens a burst tells call_sites.h that one ended a burst); period_code is the current period's weight code
  // (TurnSampling; kFullWeightCode until the first turn); the closed turns,
  // exact, are turns_high << 32 | turns_low (48 bits: 2.8e14 turns).
  static constexpr uint8_t kSentToReplyApart = 1;
  static constexpr uint8_t kBurstBytesApart = 2;
  static constexpr uint8_t kCallSiteSampled = 4;
  std::atomic<uint8_t> buckets_apart{0};
  std::atomic<uint8_t> period_code{kFullWeightCode};
  std::atomic<uint16_t> turns_high{0};
  std::atomic<uint32_t> turns_low{0};
  // Calls by API, but for the family the socket's first call went through
  // (the inline key), whose count write_calls and read_calls imply: read
  // them through WriteApiCalls and ReadApiCalls.
  ReadApiCounts read_by_api;
  WriteApiCounts write_by_api;
  Counter read_eof;
  ErrnoCounts errors;

  // SocketStats::WriteApiCalls and ReadApiCalls are the calls through api.
  uint64_t WriteApiCalls(int api) const { return ApiCalls(write_by_api, write_calls.Get(), api); }
  uint64_t ReadApiCalls(int api) const { return ApiCalls(read_by_api, read_calls.Get(), api); }
  // SocketStats::Apart is the k*Apart bits.
  uint8_t Apart() const { return buckets_apart.load(std::memory_order_acquire); }
  // SocketStats::Turns is the number of closed turns, exact.
  uint64_t Turns() const {
    return uint64_t{turns_high.load(std::memory_order_relaxed)} << 32 | turns_low.load(std::memory_order_relaxed);
  }
  // SocketStats::PeriodCode is the current period's weight code.
  uint32_t PeriodCode() const { return period_code.load(std::memory_order_relaxed); }
  // SocketStats::PeriodWeight is what each value recorded now stands for:
  // 0 in a period not recorded.
  uint64_t PeriodWeight() const { return WeightOfCode(PeriodCode()); }
  // SocketStats::OpenPeriod starts a turn's period recorded with code.
  void OpenPeriod(uint32_t code) { period_code.store(static_cast<uint8_t>(code), std::memory_order_relaxed); }
  // SocketStats::AddTurn counts a closed turn.
  void AddTurn() {
    const uint32_t low = turns_low.load(std::memory_order_relaxed) + 1;
    turns_low.store(low, std::memory_order_relaxed);
    if (__builtin_expect(low == 0, 0)) {
      turns_high.store(static_cast<uint16_t>(turns_high.load(std::memory_order_relaxed) + 1), std::memory_order_relaxed);
    }
  }
  // SocketStats::AddTurns counts n closed turns (a merge).
  void AddTurns(uint64_t n) {
    const uint64_t turns = Turns() + n;
    turns_low.store(static_cast<uint32_t>(turns), std::memory_order_relaxed);
    turns_high.store(static_cast<uint16_t>(turns >> 32), std::memory_order_relaxed);
  }

  // SocketStats::SentToReplyBuckets is the histogram that holds
  // sent_to_reply_ticks' buckets: its own, or turn_ticks.
  const Histogram& SentToReplyBuckets() const { return Apart() & kSentToReplyApart ? sent_to_reply_ticks : turn_ticks; }
  // SocketStats::BurstBytesBuckets is the histogram that holds burst_bytes'
  // buckets: its own, or write_size, which also holds the open burst's
  // (single) write.
  const Histogram& BurstBytesBuckets() const { return Apart() & kBurstBytesApart ? burst_bytes : write_size; }
  // SocketStats::ImpliedOneWriteBursts is how many closed bursts of one
  // write burst_writes holds implicitly: while burst_bytes borrows (every
  // recorded burst one write) each write recorded in write_size but the open
  // burst's (weighted, none if the open burst is not recorded), else none
  // (burst_writes holds them all).
  uint64_t ImpliedOneWriteBursts() const {
    if (Apart() & kBurstBytesApart) return 0;
    const uint64_t writes = write_size.count(), open = burst_open_writes.Get() * PeriodWeight();
    return writes > open ? writes - open : 0;
  }
  // SocketStats::OpenBurstExcept is the bucket write_size holds the open
  // burst's first write in, -1 when there is none (no burst open, or one not
  // recorded), and how many (its weight) in *n.
  int OpenBurstExcept(uint64_t* n) const {
    *n = PeriodWeight();
    return burst_open_writes.Get() != 0 && *n != 0 ? HistogramBucketOf(burst_open_bytes.Get()) : -1;
  }
  // SocketStats::BurstCount is the number of closed bursts: exact until
  // sampling starts, then an estimate (the recorded bursts, weighted).
  uint64_t BurstCount() const { return burst_writes.count() + ImpliedOneWriteBursts(); }
  // SocketStats::SetSentToReplyApart gives sent_to_reply_ticks its own
  // buckets, a copy of turn_ticks'; before a turn that differs is recorded.
  [[gnu::cold, gnu::noinline]] void SetSentToReplyApart();
  // SocketStats::SetBurstBytesApart gives burst_bytes its own buckets, a copy
  // of write_size's but the open burst's first write, and burst_writes the
  // one-write bursts it implied; before the burst's second write is recorded.
  [[gnu::cold, gnu::noinline]] void SetBurstBytesApart();

  // SocketStats::policy_counters are what policies did, nullptr until a
  // policy rule matched the entry (or a group took in a socket's): most
  // sockets run under none. Published once and never freed, like the
  // sparse tiers, so that a racing snapshot reads them safely.
  PolicyCounters* policy_counters() const { return policy_counters_.load(std::memory_order_acquire); }
  // SocketStats::MakePolicyCounters returns the policy counters, allocating
  // them (zeroed) the first time; nullptr when memory ran out or may not be
  // allocated now (t_in_private_heap).
  PolicyCounters* MakePolicyCounters();

  // SocketStats::MergeFrom adds another socket's statistics to these.
  void MergeFrom(const SocketStats& other);
  // SocketStats::Reset zeroes every statistic and the burst state.
  void Reset();
  // SocketStats::Active tells whether any call was recorded.
  bool Active() const { return write_calls.Get() != 0 || read_calls.Get() != 0; }
  // SocketStats::Recorded tells whether any statistic holds something: the
  // calls, what a call records without counting one (an end of file, an
  // error), or a policy's counts.
  bool Recorded() const;

 private:
  // MergeBorrowing merges other_h (whose buckets are other_buckets, n less
  // in bucket other_except) into h, the histogram that bit says apart: it
  // keeps borrowing when both borrow alike, else it takes its own buckets
  // first. Called before the lenders merge.
  void MergeBorrowing(uint8_t bit, Histogram* h, const Histogram& other_h, const Histogram& other_buckets,
                      int other_except, uint64_t n);

  std::atomic<PolicyCounters*> policy_counters_{nullptr};
};

// Shape is a connection's coarse pattern, the part of the group key that
// keeps connections that talk differently apart (iperf3's control and data
// connections share role, port and peer): the low 2 bits are a ShapeKind,
// the others the class of the median write size (ShapeOf).
enum class ShapeKind : uint8_t { kUnused, kWriteOnly, kReadOnly, kRequestResponse };
const char* ShapeKindName(ShapeKind kind);

// ShapeOf classifies statistics: unused (no read or write call), write-only
// (bytes written, none read), read-only, or request-response; the median
// write size's class is its power of four (1-3 B, 4-15 B, ..., 64-255 KiB),
// 0 without writes. Coarse on purpose: two connections of one kind whose
// median writes are within a factor of 4 usually share a group.
uint8_t ShapeOf(const SocketStats& stats);
inline ShapeKind KindOfShape(uint8_t shape) { return static_cast<ShapeKind>(shape & 3); }

// SocketIdentity is what the group key and the trace need to name a socket.
// Its fields are ordered so that it takes 72 bytes, not 80: SocketState
// has no byte to spare in its 1 KiB.
struct SocketIdentity {
  // The kernel's SO_COOKIE: one socket's identity for its whole life, the
  // same in every process that shares it (fork, SCM_RIGHTS), never reused
  // while the system runs; 0 when the kernel could not say.
  uint64_t cookie = 0;
  SocketAddress local{};
  SocketAddress peer{};
  // The policy rule that matched (index into the config), -1 for none:
  // sockets under different rules never share a group.
  int16_t rule = -1;
  Role role = Role::kUnknown;
  // The connection's pattern (Shape), set when a closed socket is folded:
  // part of the group key.
  uint8_t shape = 0;

  // SocketIdentity::ServicePort is the local port of an accepted socket and
  // the peer port of a connected one: the port that names the service.
  uint16_t ServicePort() const;
  // SocketIdentity::ServiceKey is the role and service port in one number.
  uint32_t ServiceKey() const { return static_cast<uint32_t>(role) << 16 | ServicePort(); }
  // SocketIdentity::SameGroup tells whether two sockets fold into one group:
  // same role, policy rule, family, service port, peer address and shape.
  bool SameGroup(const SocketIdentity& other) const;
  // SocketIdentity::GroupHash hashes the fields SameGroup compares.
  uint64_t GroupHash() const;
  // SocketIdentity::ClearEphemeralPort zeroes the port that differs between
  // the connections of one group (the client's local port, the server's peer's).
  void ClearEphemeralPort();
};

// SocketState is one table entry: a live socket, or a group of closed ones.
struct SocketState {
  SocketIdentity id;
  // Open fds referring to this socket (dup), guarded by the table mutex.
  int refs = 0;
  // Set between a client's connect and its return when an experiment
  // matched: its arm is drawn once the kernel picked the local port.
  bool experiment_draw_pending = false;
  // O_NONBLOCK as last set through socket, accept4, fcntl or ioctl(FIONBIO);
  // atomic because a policy reads it while another thread may be in fcntl.
  std::atomic<bool> nonblocking{false};
  uint8_t options_set_mask = 0;
  union {
    // A live socket's or a group's: the token of the process that tracked
    // the socket (ProcessToken; a group: its sockets'). Another process's
    // means a fork child inherited it, which the child tells without
    // writing its copy of the entry.
    uint64_t owner = 0;
    // A free entry's: the next one on the table's free list.
    SocketState* next_free;
  };
  // When the socket was tracked (ticks): an experiment connection's duration.
  uint64_t opened_ticks = 0;
  // Connections folded into a group; 1 for a live socket.
  uint64_t connections = 0;
  // Turns recorded in the histograms (TurnSampling), summed over a group's
  // connections: stats.Turns() while every turn was.
  Counter turns_recorded;
  // How long the group's connections were tracked, summed (ticks); set when
  // a socket is retired.
  uint64_t lifetime_ticks = 0;
  // The policy's run-time state (buffer, lock), allocated the first time the
  // entry carries a cork or coalesce policy and kept with the entry after.
  PolicyState* policy_state = nullptr;
  int32_t options_set[static_cast<int>(AppOption::kCount)] = {};
  KernelOptions kernel_options;
  TcpInfoSummary tcp_info;
  SocketStats stats;

  // kSyscallTimeSampleMask: one recorded write in 16 also reads the clock
  // after the call to time the syscall; the others read it once, before the
  // call (writes not recorded not at all).
  static constexpr uint64_t kSyscallTimeSampleMask = 15;

  // SocketState::SampleSyscallTime tells whether the next write is timed.
  bool SampleSyscallTime() const { return (stats.write_calls.Get() & kSyscallTimeSampleMask) == 0; }

  // SocketState::WriteCode is the weight code the next write is recorded
  // with: its open turn's, or, when it opens a turn, that turn's
  // (TurnWeightCode). kUnrecordedCode: only counted, no clock read. A turn
  // before the next recorded one (turn_start's kNextRecordedTag) costs a
  // compare, not the hash: once per request on a one-write-per-request server.
  [[gnu::always_inline]] uint32_t WriteCode(const TurnSampling& sampling) {
    const uint32_t code = QuickWriteCode();
    return code == kOpeningCode ? OpeningCode(stats.Turns(), sampling) : code;
  }
  // SocketState::QuickWriteCode is WriteCode without the call out of line:
  // kOpeningCode where WriteCode would ask OpeningCode, which the caller then
  // does on its own out-of-line path (hooks.cc: the counted write makes no
  // call before libc's, and keeps the call's arguments in registers).
  static constexpr uint32_t kOpeningCode = 0xff;
  [[gnu::always_inline]] uint32_t QuickWriteCode() const {
    if (stats.last_write_start.Get() != 0) return stats.PeriodCode();
    if ((stats.Turns() | SocketStats::kNextRecordedTag) < stats.turn_start.Get()) return kUnrecordedCode;
    return kOpeningCode;
  }
  // SocketState::OpeningCode is TurnWeightCode(turn), out of line; for a
  // turn not recorded it notes the next recorded turn in turn_start.
  [[gnu::noinline]] uint32_t OpeningCode(uint64_t turn, const TurnSampling& sampling);

  // SocketState::OnWrite records one write-family call that started at
  // start (ticks; 0 when the clock was not read, which records no gap and
  // leaves the turn's start alone) and returned result (errno_value when
  // negative); syscall_ticks is the call's duration when it was sampled,
  // else 0. iovcnt is kScalarWrite for calls that take one buffer. code is
  // the write's weight code (WriteCode); a write not recorded counts its
  // call and bytes and keeps the burst's and turn's state, which the
  // policies read, and nothing else. Inlined into every wrapper: a call
  // costs its instructions, not a call frame. Returns the socket's write
  // count, this call's included.
  [[gnu::always_inline]] uint64_t OnWrite(WriteApi api, int64_t result, int errno_value, uint64_t iovcnt,
                                          uint64_t start, uint64_t syscall_ticks, uint32_t code = kFullWeightCode) {
    const uint64_t writes = stats.write_calls.AddFetch(1);
    ApiCounted(&stats.write_by_api, static_cast<int>(api));
    const uint64_t weight = WeightOfCode(code);
    if (syscall_ticks != 0) stats.write_ticks.Record(syscall_ticks, weight);
    if (__builtin_expect(result < 0, 0)) {
      CountWriteError(errno_value);
      return writes;
    }
    stats.write_bytes.Add(static_cast<uint64_t>(result));
    const uint64_t burst_writes = stats.burst_open_writes.Get() + 1;
    const uint64_t last_start = stats.last_write_start.Get();
    // A turn another thread (or a signal handler) opened unrecorded since
    // WriteCode looked: this write is not recorded either.
    if (code == kUnrecordedCode || last_start == SocketStats::kUnrecordedTurn) {
      stats.burst_open_writes.Set(burst_writes);
      // Expected: a one-write-per-request server's every write opens a turn.
      if (__builtin_expect(last_start == 0, 1)) {
        stats.OpenPeriod(kUnrecordedCode);
        stats.last_write_start.Set(SocketStats::kUnrecordedTurn);
      }
      return writes;
    }
    // A burst's second write: burst sizes no longer match write sizes.
    if (__builtin_expect(burst_writes == 2, 0) && !(stats.Apart() & SocketStats::kBurstBytesApart)) {
      stats.SetBurstBytesApart();
    }
    stats.write_size.Record(static_cast<uint64_t>(result), weight);
    if (iovcnt != kScalarWrite) stats.write_iovcnt.Record(iovcnt, weight);
    stats.burst_open_writes.Set(burst_writes);
    stats.burst_open_bytes.Add(static_cast<uint64_t>(result));
    if (start == 0) return writes;
    if (last_start == 0) {
      stats.OpenPeriod(code);
      stats.turn_start.Set(start);
    }
    if (burst_writes != 1) stats.gap_ticks.Record(start - last_start, weight);
    stats.last_write_start.Set(start);
    return writes;
  }

  // SocketState::MarkSent notes that a policy handed a pending turn's bytes
  // to the kernel now: the sent-to-reply time starts here; the turn keeps
  // its start, the application's first write. A turn not recorded keeps
  // no time.
  void MarkSent(uint64_t now) {
    if (stats.last_write_start.Get() > SocketStats::kUnrecordedTurn) stats.last_write_start.Set(now);
  }

  // SocketState::OnRead records one read-family call. Any read attempt closes
  // the current burst; the first read that returns data after a burst closes
  // the turn, and only then is the clock read (in a recorded turn). A turn
  // is timed from its first write whatever the policy, so that arms compare
  // alike. In a period not recorded (TurnSampling) the read is only counted.
  [[gnu::always_inline]] void OnRead(ReadApi api, int64_t result, int errno_value, bool peek) {
    stats.read_calls.Increment();
    ApiCounted(&stats.read_by_api, static_cast<int>(api));
    if (const uint32_t code = stats.PeriodCode(); __builtin_expect(code != kUnrecordedCode, 0)) {
      return OnRecordedRead(result, errno_value, peek, WeightOfCode(code));
    }
    stats.burst_open_writes.Set(0);
    if (__builtin_expect(result <= 0, 0)) {
      OnReadNothing(result, errno_value);
      return;
    }
    if (peek) return;
    stats.read_bytes.Add(static_cast<uint64_t>(result));
    if (__builtin_expect(stats.last_write_start.Get() != 0, 1)) {  // a request-response socket's read closes a turn
      stats.last_write_start.Set(0);
      stats.AddTurn();
    }
  }

  // SocketState::OnRecordedRead is OnRead's path in a recorded period: the
  // read's size, the burst and the turn it closes, with the period's weight.
  [[gnu::noinline]] void OnRecordedRead(int64_t result, int errno_value, bool peek, uint64_t weight) {
    if (stats.burst_open_writes.Get() != 0) CloseBurst();
    if (__builtin_expect(result <= 0, 0)) {
      OnReadNothing(result, errno_value);
      return;
    }
    if (peek) return;
    stats.read_bytes.Add(static_cast<uint64_t>(result));
    stats.read_size.Record(static_cast<uint64_t>(result), weight);
    if (const uint64_t sent = stats.last_write_start.Get(); sent != 0) {
      stats.last_write_start.Set(0);
      stats.AddTurn();
      CloseTurn(sent, weight);
    }
  }

  // SocketState::CloseTurn records the turn of a recorded period (weight)
  // that the reply that came now closed (OnRead counted it); sent is its
  // last_write_start.
  void CloseTurn(uint64_t sent, uint64_t weight) {
    const uint64_t now = ReadTicks();
    const uint64_t start = stats.turn_start.Get();
    stats.turn_start.Set(0);  // no next recorded turn noted (WriteCode)
    turns_recorded.Increment();
    bool apart = stats.Apart() & SocketStats::kSentToReplyApart;
    if (__builtin_expect(sent != start && !apart, 0)) {
      stats.SetSentToReplyApart();
      apart = true;
    }
    stats.turn_ticks.Record(now - start, weight);
    if (apart) {
      stats.sent_to_reply_ticks.Record(now - sent, weight);
    } else {
      stats.sent_to_reply_ticks.RecordBounds(now - sent, weight);  // the same value: turn_ticks holds its bucket
    }
  }

  // SocketState::CloseBurst records the open burst, if its period is
  // recorded, and starts anew. Forced inline: with exact histograms the
  // compiler called it out of line from every read hook: about 7 ns more a
  // write and read (bench/compare_builds.py). While every burst is one
  // write, its count is implied (write_size holds the write:
  // SocketStats::ImpliedOneWriteBursts), and its bytes' bucket.
  [[gnu::always_inline]] void CloseBurst() {
    if (const uint64_t weight = stats.PeriodWeight(); weight != 0) {
      if (stats.Apart() & SocketStats::kBurstBytesApart) {
        stats.burst_writes.Record(stats.burst_open_writes.Get(), weight);
        stats.burst_bytes.Record(stats.burst_open_bytes.Get(), weight);
      } else {
        // one write: write_size holds its bucket
        stats.burst_bytes.RecordBounds(stats.burst_open_bytes.Get(), weight);
      }
      stats.burst_open_bytes.Set(0);
    }
    stats.burst_open_writes.Set(0);
  }
  // SocketState::OnReadNothing records a read that failed or met end of file.
  [[gnu::cold]] void OnReadNothing(int64_t result, int errno_value);
  // SocketState::CountError counts a failed call by errno.
  [[gnu::cold]] void CountError(int errno_value);
  // SocketState::CountWriteError counts a failed write, EAGAIN apart too.
  [[gnu::cold]] void CountWriteError(int errno_value);
  // SocketState::SetAppOption records an option the application set.
  void SetAppOption(AppOption option, int32_t value) {
    options_set[static_cast<int>(option)] = value;
    options_set_mask |= static_cast<uint8_t>(1u << static_cast<int>(option));
  }
  // SocketState::WorthReporting tells whether a trace lists this socket: it
  // was used, or it is a connection this process made or accepted (not one a
  // fork child only inherited).
  bool WorthReporting() const;
  // SocketState::Inherited tells whether this process got the socket (or
  // a group's sockets) from its fork parent: those appear in its trace only
  // once it uses them, and group apart from those it made or accepted.
  bool Inherited() const;
  // SocketState::ReadKernelState reads tcp_info and the effective options
  // through fd, unless fd no longer refers to this socket (its cookie
  // differs, or it is closed): then the last figures stand.
  void ReadKernelState(int fd);
  // SocketState::ResetForReuse makes a recycled entry look new.
  void ResetForReuse();
  // SocketState::MergeFrom folds a closed socket into this group.
  void MergeFrom(const SocketState& closed);
};

// A SocketState fits jemalloc's 1 KiB size class: the next is 1.25 KiB.
static_assert(sizeof(SocketState) <= 1024, "SocketState outgrew its 1 KiB size class");

}  // namespace tcpadvise

#endif  // TCPADVISE_SOCKET_STATE_H_
