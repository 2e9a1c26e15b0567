// SocketState: what the shim knows about one TCP socket (or one group of
// closed sockets): identity, the options the application set, and the
// statistics the wrapped calls feed on the hot path.
#ifndef TCPADVISE_SOCKET_STATE_H_
#define TCPADVISE_SOCKET_STATE_H_

#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>

#include <atomic>

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
// usually meets (EAGAIN, then EPIPE or ECONNRESET) inline, the whole table
// allocated only when a third appears.
using ErrnoCounts = SparseCounters<2, kErrnoSlots>;

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
  Counter conflicts;  // kConflict* bits
  ErrnoCounts deferred_errors;

  void MergeFrom(const PolicyCounters& other);
  void Reset();
};

struct PolicyState;

// SocketStats are the statistics of a socket or a group, laid out so that a
// call touches few cache lines: the counters every call bumps share the first
// line, a histogram record touches one histogram, and the per-API counts sit
// together. Histograms and errno counts are sparse: an open connection costs
// what it uses (1.5 KB for its whole SocketState while each histogram sees
// at most four distinct buckets, 1 KB more per power of two a histogram
// spreads over beyond that). The burst and turn state of a live socket rides in the hot line
// too; merging and resetting leave it to SocketState.
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
  // When the last write started (ticks): a gap's and a turn's reference
  // point; 0 once the reply has come, so that it also says a turn is open.
  Counter last_write_start;

  alignas(64) Counter write_by_api[static_cast<int>(WriteApi::kCount)];
  Counter read_by_api[static_cast<int>(ReadApi::kCount)];
  Counter read_eof;
  BytesHistogram write_size;
  // Only vector calls (writev, sendmsg, sendmmsg) are recorded here; a scalar
  // write's single buffer is added when the trace is written.
  CountHistogram write_iovcnt;
  TicksHistogram write_ticks;
  TicksHistogram gap_ticks;
  CountHistogram burst_writes;
  BytesHistogram burst_bytes;
  TicksHistogram turn_ticks;
  BytesHistogram read_size;
  ErrnoCounts errors;
  PolicyCounters policy_counters;

  // SocketStats::MergeFrom adds another socket's statistics to these.
  void MergeFrom(const SocketStats& other);
  // SocketStats::Reset zeroes every statistic and the burst state.
  void Reset();
  // SocketStats::Active tells whether any call was recorded.
  bool Active() const { return write_calls.Get() != 0 || read_calls.Get() != 0; }
};

// SocketIdentity is what the group key and the trace need to name a socket.
struct SocketIdentity {
  Role role = Role::kUnknown;
  // The policy rule that matched (index into the config), -1 for none:
  // sockets under different rules never share a group.
  int16_t rule = -1;
  // The kernel's SO_COOKIE: one socket's identity for its whole life, the
  // same in every process that shares it (fork, SCM_RIGHTS), never reused
  // while the system runs; 0 when the kernel could not say.
  uint64_t cookie = 0;
  sockaddr_storage local{};
  sockaddr_storage peer{};

  // SocketIdentity::ServicePort is the local port of an accepted socket and
  // the peer port of a connected one: the port that names the service.
  uint16_t ServicePort() const;
  // SocketIdentity::SameGroup tells whether two sockets fold into one group:
  // same role, family, service port and peer address.
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
  // Next entry on the table's free list.
  SocketState* next_free = nullptr;
  // When the socket was tracked (ticks): an experiment connection's duration.
  uint64_t opened_ticks = 0;
  // Connections folded into a group; 1 for a live socket.
  uint64_t connections = 0;
  // The policy's run-time state (buffer, lock), allocated the first time the
  // entry carries a cork or coalesce policy and kept with the entry after.
  PolicyState* policy_state = nullptr;
  // Set in a fork child for the sockets it inherited: those appear in the
  // child's trace only once the child uses them.
  bool inherited = false;
  // O_NONBLOCK as last set through socket, accept4, fcntl or ioctl(FIONBIO);
  // atomic because a policy reads it while another thread may be in fcntl.
  std::atomic<bool> nonblocking{false};
  uint8_t options_set_mask = 0;
  int32_t options_set[static_cast<int>(AppOption::kCount)] = {};
  KernelOptions kernel_options;
  TcpInfoSummary tcp_info;
  SocketStats stats;

  // kSyscallTimeSampleMask: one write in 16 also reads the clock after the
  // call to time the syscall; the others read it once, before the call.
  static constexpr uint64_t kSyscallTimeSampleMask = 15;

  // SocketState::SampleSyscallTime tells whether the next write is timed.
  bool SampleSyscallTime() const { return (stats.write_calls.Get() & kSyscallTimeSampleMask) == 0; }

  // SocketState::OnWrite records one write-family call that started at
  // start (ticks; 0 when the clock was not read, which records no gap and
  // leaves the turn's start alone) and returned result (errno_value when
  // negative); syscall_ticks is the call's duration when it was sampled,
  // else 0. iovcnt is kScalarWrite for calls that take one buffer. Inlined
  // into every wrapper: a call costs its instructions, not a call frame.
  [[gnu::always_inline]] void OnWrite(WriteApi api, int64_t result, int errno_value, uint64_t iovcnt, uint64_t start,
                                      uint64_t syscall_ticks) {
    stats.write_calls.Increment();
    stats.write_by_api[static_cast<int>(api)].Increment();
    if (syscall_ticks != 0) stats.write_ticks.Record(syscall_ticks);
    if (__builtin_expect(result < 0, 0)) {
      CountError(errno_value);
      return;
    }
    stats.write_bytes.Add(static_cast<uint64_t>(result));
    stats.write_size.Record(static_cast<uint64_t>(result));
    if (iovcnt != kScalarWrite) stats.write_iovcnt.Record(iovcnt);
    const uint64_t burst_writes = stats.burst_open_writes.Get() + 1;
    stats.burst_open_writes.Set(burst_writes);
    stats.burst_open_bytes.Add(static_cast<uint64_t>(result));
    if (start == 0) return;
    if (burst_writes != 1) stats.gap_ticks.Record(start - stats.last_write_start.Get());
    stats.last_write_start.Set(start);
  }

  // SocketState::StartTurnAt moves a pending turn's start to now: a policy
  // released the burst's bytes then.
  void StartTurnAt(uint64_t now) {
    if (stats.last_write_start.Get() != 0) stats.last_write_start.Set(now);
  }

  // SocketState::OnRead records one read-family call. Any read attempt closes
  // the current burst; the first read that returns data after a burst closes
  // the turn, and only then is the clock read.
  [[gnu::always_inline]] void OnRead(ReadApi api, int64_t result, int errno_value, bool peek) {
    stats.read_calls.Increment();
    stats.read_by_api[static_cast<int>(api)].Increment();
    if (stats.burst_open_writes.Get() != 0) CloseBurst();
    if (__builtin_expect(result <= 0, 0)) {
      OnReadNothing(result, errno_value);
      return;
    }
    if (peek) return;
    stats.read_bytes.Add(static_cast<uint64_t>(result));
    stats.read_size.Record(static_cast<uint64_t>(result));
    if (const uint64_t turn_start = stats.last_write_start.Get(); turn_start != 0) {
      stats.last_write_start.Set(0);
      stats.turn_ticks.Record(ReadTicks() - turn_start);
    }
  }

  // SocketState::CloseBurst records the open burst, if any, and starts anew.
  // Forced inline: with exact histograms the compiler called it out of line
  // from every read hook: about 7 ns more a write and read (bench/hooks_compare.py).
  [[gnu::always_inline]] void CloseBurst() {
    stats.burst_writes.Record(stats.burst_open_writes.Get());
    stats.burst_bytes.Record(stats.burst_open_bytes.Get());
    stats.burst_open_writes.Set(0);
    stats.burst_open_bytes.Set(0);
  }
  // SocketState::OnReadNothing records a read that failed or met end of file.
  [[gnu::cold]] void OnReadNothing(int64_t result, int errno_value);
  // SocketState::CountError counts a failed call by errno.
  [[gnu::cold]] void CountError(int errno_value);
  // SocketState::SetAppOption records an option the application set.
  void SetAppOption(AppOption option, int32_t value) {
    options_set[static_cast<int>(option)] = value;
    options_set_mask |= static_cast<uint8_t>(1u << static_cast<int>(option));
  }
  // SocketState::WorthReporting tells whether a trace lists this socket: it
  // was used, or it is a connection this process made or accepted (not one a
  // fork child only inherited).
  bool WorthReporting() const;
  // SocketState::ReadKernelState reads tcp_info and the effective options through fd.
  void ReadKernelState(int fd);
  // SocketState::ResetForReuse makes a recycled entry look new.
  void ResetForReuse();
  // SocketState::MergeFrom folds a closed socket into this group.
  void MergeFrom(const SocketState& closed);
};

}  // namespace tcpadvise

#endif  // TCPADVISE_SOCKET_STATE_H_
