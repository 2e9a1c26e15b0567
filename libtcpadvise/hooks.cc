#include "hooks.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <linux/close_range.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/syscall.h>

#include <type_traits>

#include "address.h"
#include "call_sites.h"
#include "clock.h"
#include "coalesce.h"
#include "errno_saver.h"
#include "policy.h"
#include "real_libc.h"
#include "runtime.h"
#include "socket_table.h"
#include "user_memory.h"

namespace tcpadvise {
namespace hooks {
namespace {

// AfterSampledWrite runs at the write after one sampled for its call site
// (SocketStats::kCallSiteSampled): the sampled write ended its burst if this
// one, the socket's write-th, opened one. The flag stands for CallSiteDue(write
// - 1) on the hot path: a call site records a burst's end only for a write it
// sampled.
[[gnu::noinline]] void AfterSampledWrite(SocketState* s, uint64_t write) {
  s->stats.buckets_apart.fetch_and(static_cast<uint8_t>(~SocketStats::kCallSiteSampled), std::memory_order_relaxed);
  if (s->stats.burst_open_writes.Get() == 1 && write > 1) CallSiteBurstEnded(s->id.cookie, write - 1);
}

// SampleWrite samples the socket's write-th write for its call site: out
// of the hook, which then saves fewer registers, and a tail call, so that
// the unwinder steps no frame more (one is some 5% of an unwind).
[[gnu::noinline]] void SampleWrite(SocketState* s, uint64_t write, ssize_t result) {
  const bool opened = s->stats.burst_open_writes.Get() == 1;
  s->stats.buckets_apart.fetch_or(SocketStats::kCallSiteSampled, std::memory_order_relaxed);
  SampleCallSite(s->id.cookie, s->id.ServiceKey(), g_runtime.pid, write, static_cast<uint64_t>(result), opened);
}

// NoteWrite does what follows every write, the socket's write-th: the call
// sites' sampling and, in a write that did not read the clock, the snapshot
// check once in 256 writes, as reads do.
[[gnu::always_inline]] inline void NoteWrite(SocketState* s, ssize_t result, uint64_t start, uint64_t write) {
  if (result > 0) {
    if (__builtin_expect(s->stats.buckets_apart.load(std::memory_order_relaxed) & SocketStats::kCallSiteSampled, 0)) {
      AfterSampledWrite(s, write);
    }
    if (CallSiteDue(write)) SampleWrite(s, write, result);
  }
  if (start != 0) {
    MaybeSnapshot(start);
  } else if (__builtin_expect((s->stats.write_calls.Get() & 255) == 0, 0)) {  // a load: no register kept for it
    MaybeSnapshot(ReadTicks());
  }
}

// RecordWrite is TrackedWrite's path for a write recorded with weight
// code `code` (TurnSampling): one clock read before the call, a second one
// on sampled calls only; none when clock is false (a write a policy holds,
// see WrittenUnderPolicy).
template <typename Count, typename Call>
[[gnu::always_inline]] inline ssize_t RecordWrite(SocketState* s, WriteApi api, Count iovcnt, const Call& call,
                                                  uint32_t code, bool clock) {
  const bool timed = clock && s->SampleSyscallTime();
  const uint64_t start = clock ? ReadTicks() : 0;
  const ssize_t result = call();
  const uint64_t syscall_ticks = timed ? ReadTicks() - start + 1 : 0;  // +1: a sample is never 0
  uint64_t count;
  if constexpr (std::is_invocable_v<Count>) {
    count = result >= 0 ? iovcnt() : 0;
  } else {
    count = iovcnt;
  }
  const uint64_t write = s->OnWrite(api, result, result < 0 ? errno : 0, count, start, syscall_ticks, code);
  NoteWrite(s, result, start, write);
  return result;
}

// CountedWrite is TrackedWrite's path for a write whose turn is not
// recorded (TurnSampling): no clock read, only counts (SocketState::OnWrite).
template <typename Call>
[[gnu::always_inline]] inline ssize_t CountedWrite(SocketState* s, WriteApi api, const Call& call) {
  const ssize_t result = call();
  const uint64_t write = s->OnWrite(api, result, result < 0 ? errno : 0, 0, 0, 0, kUnrecordedCode);
  NoteWrite(s, result, 0, write);
  return result;
}

// ResolvedWrite is TrackedWrite's path for a write that QuickWriteCode did
// not find counted: a turn's opening asks OpeningCode, then the write is
// recorded with its code or counted.
template <typename Count, typename Call>
[[gnu::always_inline]] inline ssize_t ResolvedWrite(SocketState* s, WriteApi api, Count iovcnt, const Call& call,
                                                    uint32_t code, bool clock) {
  if (code == SocketState::kOpeningCode) {
    code = s->OpeningCode(s->stats.Turns(), g_runtime.settings.turns);
    if (code == kUnrecordedCode) return CountedWrite(s, api, call);
  }
  return RecordWrite(s, api, iovcnt, call, code, clock);
}

// RecordedWrite is ResolvedWrite out of line, so that the writes only
// counted keep few registers and make no call before libc's. The call by
// value (a hook's lambda, its arguments copied): by reference, the hook
// stored it on its stack before every call, counted or not.
template <typename Count, typename Call>
[[gnu::noinline]] ssize_t RecordedWrite(SocketState* s, WriteApi api, Count iovcnt, const Call call, uint32_t code,
                                        bool clock) {
  return ResolvedWrite(s, api, iovcnt, call, code, clock);
}

// TrackedWrite runs one write-family call on a tracked socket and records
// it. A write whose turn is not recorded (TurnSampling) reads no clock and
// only counts (CountedWrite). iovcnt is a count, or a function that
// reads it once the call succeeded (sendmsg: the msghdr is the
// application's, which only the kernel checks). kInlineRecorded: a caller
// already out of line (WrittenUnderPolicy) records inline; a second call
// frame and the copy of its lambda cost a policy's write some 150
// instructions (hooks_bench's coalesced burst: 412 -> 561 ns).
template <bool kInlineRecorded = false, typename Count, typename Call>
[[gnu::always_inline]] inline ssize_t TrackedWrite(SocketState* s, WriteApi api, Count iovcnt, const Call& call,
                                                   bool clock = true) {
  const uint32_t code = s->QuickWriteCode();
  if (__builtin_expect(code != kUnrecordedCode, 0)) {
    if constexpr (kInlineRecorded) {
      return ResolvedWrite(s, api, iovcnt, call, code, clock);
    } else {
      return RecordedWrite(s, api, iovcnt, call, code, clock);
    }
  }
  return CountedWrite(s, api, call);
}

// Thunk lets policy.cc run a hook's original call without templates.
template <typename Call>
ssize_t Thunk(void* call) {
  return (*static_cast<Call*>(call))();
}

// WrittenUnderPolicy is Written's path for a socket whose policy takes its
// writes. Under cork or coalesce only a burst's first write reads the clock
// (it may start the turn): the bytes leave together at the release, where
// the sent-to-reply time starts (MarkSent), so the others' times would say
// nothing. Out of line so that the observe path keeps the call's arguments
// in registers.
template <typename Call>
[[gnu::noinline]] ssize_t WrittenUnderPolicy(SocketState* s, int fd, WriteApi api, uint64_t iovcnt, const iovec* data,
                                             int data_count, int flags, bool special, Call call) {
  return TrackedWrite</*kInlineRecorded=*/true>(
      s, api, iovcnt, [&] {
        // writev's and sendmsg's iovecs are the application's; the others' are the hook's own.
        const bool app_iov = api == WriteApi::kWritev || api == WriteApi::kSendmsg;
        return PolicyWrite(s, fd, data, data_count, app_iov, flags, special, Thunk<Call>, &call);
      },
      s->stats.burst_open_writes.Get() == 0);
}

// VectorPartial tells whether a successful vector write sent less than its
// buffers hold (read only after the kernel did: no bad pointer is touched).
[[gnu::noinline]] bool VectorPartial(size_t sent, const iovec* data, int data_count) {
  size_t asked = 0;
  for (int i = 0; i < data_count && asked <= sent; ++i) asked += data[i].iov_len;
  return sent < asked;
}

// CountPartialWrite counts a write that returned less than it was asked to
// send: one comparison for a scalar write, an add more for the two buffers
// of a header and its body (nginx's writev), which cannot overflow: the
// kernel refuses a length above SSIZE_MAX.
[[gnu::always_inline]] inline void CountPartialWrite(SocketState* s, size_t sent, const iovec* data, int data_count) {
  const bool partial = data_count == 1   ? sent < data[0].iov_len
                       : data_count == 2 ? sent < data[0].iov_len + data[1].iov_len
                                         : data_count > 2 && VectorPartial(sent, data, data_count);
  if (__builtin_expect(partial, 0)) s->stats.partial_writes.Increment();
}

// Written runs a write-family call on a tracked socket: through the policy
// when one takes the socket's writes, else straight to libc (an adaptive
// policy's steady passive socket too: PassesUnheld); recorded either way as
// the application saw it.
template <typename Call>
[[gnu::always_inline]] inline ssize_t Written(SocketState* s, int fd, WriteApi api, uint64_t iovcnt,
                                              const iovec* data, int data_count, int flags, bool special, Call call) {
  PolicyState* p = s->stats.policy;
  const ssize_t result = __builtin_expect(p == nullptr, 1) || PassesUnheld(s, p)
                             ? TrackedWrite(s, api, iovcnt, call)
                             : WrittenUnderPolicy(s, fd, api, iovcnt, data, data_count, flags, special, call);
  if (result >= 0 && data != nullptr) CountPartialWrite(s, static_cast<size_t>(result), data, data_count);
  return result;
}

// kOrdinaryFlags are the send flags a policy can hold bytes under; any other
// flag (MSG_MORE, MSG_OOB, MSG_ZEROCOPY...) changes how these very bytes are
// sent, so the call passes through after what is held.
constexpr int kOrdinaryFlags = MSG_DONTWAIT | MSG_NOSIGNAL;

// RecordRead records a read-family call's outcome. A program that only
// reads still gets its snapshots: every 256th read looks at the clock.
[[gnu::always_inline]] inline void RecordRead(SocketState* s, ReadApi api, int flags, ssize_t result) {
  s->OnRead(api, result, result < 0 ? errno : 0, (flags & MSG_PEEK) != 0);
  if (__builtin_expect((s->stats.read_calls.Get() & 255) == 0, 0)) MaybeSnapshot(ReadTicks());
}

// ReadUnderPolicy is TrackedRead's path while a policy may act on a read: held
// bytes leave before the read waits for their answer; quickack is re-armed
// after a read that got data (not after every EAGAIN of an event loop).
template <typename Call>
[[gnu::noinline]] ssize_t ReadUnderPolicy(SocketState* s, int fd, ReadApi api, int flags, const Call& call) {
  ReleaseAll(FlushCause::kRead);
  const ssize_t result = call();
  if (result > 0) AfterReadPolicy(s, fd);
  RecordRead(s, api, flags, result);
  return result;
}

// TrackedRead runs one read-family call on a tracked socket and records it.
// Without a config, or while nothing is held and no rule re-arms quickack,
// a read is only recorded: one load on the observe path.
template <typename Call>
[[gnu::always_inline]] inline ssize_t TrackedRead(SocketState* s, int fd, ReadApi api, int flags, const Call& call) {
  if (__builtin_expect(PolicyTakesRead(), 0)) {
    const Call copy = call;  // only this copy is stored: the counted read keeps the call in registers
    return ReadUnderPolicy(s, fd, api, flags, copy);
  }
  const ssize_t result = call();
  RecordRead(s, api, flags, result);
  return result;
}

bool IsTcpFamily(int domain) { return domain == AF_INET || domain == AF_INET6; }

// IsTcpSocket asks the kernel about a fd the shim did not see created.
bool IsTcpSocket(int fd) {
  int domain = 0, protocol = 0;
  socklen_t len = sizeof(domain);
  if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 || !IsTcpFamily(domain)) return false;
  len = sizeof(protocol);
  return getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &protocol, &len) == 0 && protocol == IPPROTO_TCP;
}

// AcceptedPeer is the peer's address as accept wrote it into the shim's
// own buffer, for a caller that passed none.
struct AcceptedPeer {
  SocketAddress address;
  socklen_t length = sizeof(address);
};

// Identify reads both ends of a socket from the kernel; the peer from
// `peer` when accept gave it whole (no getpeername).
SocketIdentity Identify(int fd, Role role, const AcceptedPeer* peer = nullptr) {
  SocketIdentity id;
  id.role = role;
  socklen_t len = sizeof(id.local);
  getsockname(fd, reinterpret_cast<sockaddr*>(&id.local), &len);
  if (peer != nullptr && peer->length <= sizeof(id.peer)) {
    memcpy(&id.peer, &peer->address, peer->length);
  } else {
    len = sizeof(id.peer);
    getpeername(fd, reinterpret_cast<sockaddr*>(&id.peer), &len);
  }
  id.cookie = SocketCookie(fd);
  return id;
}

void TrackNew(int fd, const SocketIdentity& id, bool nonblocking) {
  SocketState* s = g_table.Track(fd, id);
  if (s == nullptr) {
    NoteTrackFailure(fd);
    return;
  }
  s->nonblocking.store(nonblocking, std::memory_order_relaxed);
  OnSocketTracked();
}

// UpdateTracked applies fn to fd's entry under the table mutex, so the
// snapshot thread never reads a half-written identity. An untracked fd costs
// one table read, no lock.
template <typename Fn>
void UpdateTracked(int fd, Fn fn) {
  if (g_table.Lookup(fd) == nullptr || Reentered()) return;
  ErrnoSaver errno_saver;
  g_table.Lock();
  SocketState* s = g_table.Lookup(fd);
  if (s != nullptr) fn(s);
  g_table.Unlock();
}

int AfterAccept(int listen_fd, int fd, int flags, const AcceptedPeer* peer) {
  if (fd < 0) return fd;
  ErrnoSaver errno_saver;
  SocketState* listener = g_table.Lookup(listen_fd);
  if (listener != nullptr && listener->id.role != Role::kListener && !IsTcpSocket(fd)) return NewFile(fd);
  if (listener == nullptr) {
    // A listener inherited through exec or created before the shim loaded.
    if (!IsTcpSocket(fd)) return NewFile(fd);
    TrackNew(listen_fd, Identify(listen_fd, Role::kListener), false);
    OnListening();
  }
  TrackNew(fd, Identify(fd, Role::kServer, peer), (flags & SOCK_NONBLOCK) != 0);
  OnConnectionTracked(/*accepted=*/true);
  if (g_policy_config != nullptr) {
    UpdateTracked(fd, [fd](SocketState* s) { AttachPolicy(fd, s, reinterpret_cast<const sockaddr*>(&s->id.peer)); });
  }
  return fd;
}

bool AppOptionOf(int level, int name, AppOption* option) {
  if (level == IPPROTO_TCP && name == TCP_NODELAY) *option = AppOption::kNodelay;
  else if (level == IPPROTO_TCP && name == TCP_CORK) *option = AppOption::kCork;
  else if (level == IPPROTO_TCP && name == TCP_QUICKACK) *option = AppOption::kQuickack;
  else if (level == SOL_SOCKET && name == SO_SNDBUF) *option = AppOption::kSndbuf;
  else if (level == SOL_SOCKET && name == SO_RCVBUF) *option = AppOption::kRcvbuf;
  else return false;
  return true;
}

uint64_t MessageBytes(const struct mmsghdr* msgs, int count) {
  uint64_t bytes = 0;
  for (int i = 0; i < count; ++i) bytes += msgs[i].msg_len;
  return bytes;
}

// AfterDup records a successful dup of a tracked fd.
int AfterDup(int old_fd, int new_fd) {
  if (new_fd < 0) return new_fd;
  SocketState* s = g_table.Lookup(old_fd);
  if (s != nullptr) {
    ErrnoSaver errno_saver;
    g_table.Alias(new_fd, s);
  }
  return new_fd;
}

// DupOnto wraps dup2 and dup3, which silently close what new_fd held.
template <typename Call>
int DupOnto(int old_fd, int new_fd, Call call) {
  SocketState* replaced = old_fd != new_fd ? g_table.Lookup(new_fd) : nullptr;
  const bool replaces_tracked = replaced != nullptr;
  if (replaces_tracked) {
    ErrnoSaver errno_saver;
    ReleaseSocket(replaced, new_fd, FlushCause::kDup2);
    g_table.CaptureKernelState(new_fd);
  }
  const int result = call();
  if (result < 0) return result;
  // A tracked old_fd's alias takes new_fd's slot; else the slot is freed.
  if (replaces_tracked && g_table.Lookup(old_fd) == nullptr) {
    ErrnoSaver errno_saver;
    g_table.ReleaseReplaced(new_fd);
  }
  return AfterDup(old_fd, result);
}

int FcntlCommon(int fd, int cmd, int result, unsigned long arg) {
  if (result < 0) return result;
  if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) return AfterDup(fd, result);
  if (cmd == F_SETFL) {
    UpdateTracked(fd, [arg](SocketState* s) { s->nonblocking.store((arg & O_NONBLOCK) != 0, std::memory_order_relaxed); });
  }
  return result;
}

// CloseSocket wraps a close of fd, tracked as s, made by call.
template <typename Call>
int CloseSocket(int fd, SocketState* s, Call call) {
  {
    ErrnoSaver errno_saver;
    OnSocketClosing(*s);
    ReleaseSocket(s, fd, FlushCause::kClose);
    g_table.Release(fd);
  }
  const int result = static_cast<int>(call());
  ErrnoSaver errno_saver;
  MaybeSnapshot(ReadTicks());
  return result;
}

// CloseWith wraps a close of fd made by call (syscall(SYS_close), fclose).
template <typename Call>
int CloseWith(int fd, Call call) {
  SocketState* s = g_table.Lookup(fd);
  if (s == nullptr) return static_cast<int>(call());
  return CloseSocket(fd, s, call);
}

// CloseRangeWith wraps close_range (or closefrom) made by call.
template <typename Call>
int CloseRangeWith(unsigned int first, unsigned int last, int flags, Call call) {
  if ((flags & CLOSE_RANGE_CLOEXEC) == 0 && first <= last) {
    ErrnoSaver errno_saver;
    const unsigned end = last < g_table.MaxTrackedFd() ? last : g_table.MaxTrackedFd();
    for (unsigned fd = first; fd <= end; ++fd) {
      SocketState* s = g_table.Lookup(static_cast<int>(fd));
      if (s != nullptr) ReleaseSocket(s, static_cast<int>(fd), FlushCause::kClose);
    }
    g_table.ReleaseRange(first, last);
  }
  return static_cast<int>(call());
}

}  // namespace

ssize_t Write(int fd, const void* buf, size_t n) {
  SocketState* s = g_table.Lookup(fd);
  if (__builtin_expect(s == nullptr, 1)) return LibcWrite(fd, buf, n);
  const iovec data = {const_cast<void*>(buf), n};
  return Written(s, fd, WriteApi::kWrite, kScalarWrite, &data, 1, 0, false, [=] { return LibcWrite(fd, buf, n); });
}

ssize_t Writev(int fd, const struct iovec* iov, int iovcnt) {
  SocketState* s = g_table.Lookup(fd);
  if (__builtin_expect(s == nullptr, 1)) return LibcWritev(fd, iov, iovcnt);
  return Written(s, fd, WriteApi::kWritev, static_cast<uint64_t>(iovcnt < 0 ? 0 : iovcnt), iov, iovcnt, 0, false,
                 [=] { return LibcWritev(fd, iov, iovcnt); });
}

ssize_t Send(int fd, const void* buf, size_t n, int flags) {
  SocketState* s = g_table.Lookup(fd);
  if (__builtin_expect(s == nullptr, 1)) return LibcSend(fd, buf, n, flags);
  const iovec data = {const_cast<void*>(buf), n};
  return Written(s, fd, WriteApi::kSend, kScalarWrite, &data, 1, flags, (flags & ~kOrdinaryFlags) != 0,
                 [=] { return LibcSend(fd, buf, n, flags); });
}

ssize_t Sendto(int fd, const void* buf, size_t n, int flags, const struct sockaddr* addr, socklen_t addrlen) {
  SocketState* s = g_table.Lookup(fd);
  if (__builtin_expect(s == nullptr, 1)) return LibcSendto(fd, buf, n, flags, addr, addrlen);
  const iovec data = {const_cast<void*>(buf), n};
  return Written(s, fd, WriteApi::kSendto, kScalarWrite, &data, 1, flags,
                 (flags & ~kOrdinaryFlags) != 0 || addr != nullptr,
                 [=] { return LibcSendto(fd, buf, n, flags, addr, addrlen); });
}

ssize_t Sendmsg(int fd, const struct msghdr* msg, int flags) {
  SocketState* s = g_table.Lookup(fd);
  if (__builtin_expect(s == nullptr, 1)) return LibcSendmsg(fd, msg, flags);
  const auto call = [=] { return LibcSendmsg(fd, msg, flags); };
  if (PolicyState* p = s->stats.policy; __builtin_expect(p == nullptr, 1) || PassesUnheld(s, p)) {
    // msg is read only after the kernel accepted it: a bad one gets EFAULT.
    return TrackedWrite(s, WriteApi::kSendmsg, [msg]() -> uint64_t { return msg->msg_iovlen; }, call);
  }
  msghdr m;
  const bool readable = msg != nullptr && CopyFromApp(&m, msg, sizeof(m));
  const bool special = !readable || m.msg_name != nullptr || m.msg_controllen != 0 || (flags & ~kOrdinaryFlags) != 0 ||
                       m.msg_iovlen > static_cast<size_t>(kMaxHeldIovecs);
  return WrittenUnderPolicy(s, fd, WriteApi::kSendmsg, readable ? m.msg_iovlen : 0, readable ? m.msg_iov : nullptr,
                            readable && !special ? static_cast<int>(m.msg_iovlen) : 0, flags, special, call);
}

int Sendmmsg(int fd, struct mmsghdr* msgs, unsigned int vlen, int flags) {
  SocketState* s = g_table.Lookup(fd);
  if (__builtin_expect(s == nullptr, 1)) return Real(g_real.sendmmsg)(fd, msgs, vlen, flags);
  int sent = 0;
  const ssize_t bytes = Written(s, fd, WriteApi::kSendmmsg, vlen, nullptr, 0, flags, true, [&]() -> ssize_t {
    sent = g_real.sendmmsg(fd, msgs, vlen, flags);
    return sent < 0 ? -1 : static_cast<ssize_t>(MessageBytes(msgs, sent));
  });
  // A policy may answer without calling libc (a deferred error): -1 then.
  return bytes < 0 ? -1 : sent;
}

ssize_t Sendfile(int out_fd, int in_fd, off_t* offset, size_t count) {
  SocketState* s = g_table.Lookup(out_fd);
  if (__builtin_expect(s == nullptr, 1)) return Real(g_real.sendfile)(out_fd, in_fd, offset, count);
  return Written(s, out_fd, WriteApi::kSendfile, kScalarWrite, nullptr, 0, 0, true,
                 [=] { return g_real.sendfile(out_fd, in_fd, offset, count); });
}

ssize_t Sendfile64(int out_fd, int in_fd, off64_t* offset, size_t count) {
  SocketState* s = g_table.Lookup(out_fd);
  if (__builtin_expect(s == nullptr, 1)) return Real(g_real.sendfile64)(out_fd, in_fd, offset, count);
  return Written(s, out_fd, WriteApi::kSendfile, kScalarWrite, nullptr, 0, 0, true,
                 [=] { return g_real.sendfile64(out_fd, in_fd, offset, count); });
}

ssize_t Read(int fd, void* buf, size_t n) {
  SocketState* s = g_table.Lookup(fd);
  if (__builtin_expect(s == nullptr, 1)) return LibcRead(fd, buf, n);
  return TrackedRead(s, fd, ReadApi::kRead, 0, [=] { return LibcRead(fd, buf, n); });
}

ssize_t Readv(int fd, const struct iovec* iov, int iovcnt) {
  SocketState* s = g_table.Lookup(fd);
  if (__builtin_expect(s == nullptr, 1)) return LibcReadv(fd, iov, iovcnt);
  return TrackedRead(s, fd, ReadApi::kReadv, 0, [=] { return LibcReadv(fd, iov, iovcnt); });
}

ssize_t Recv(int fd, void* buf, size_t n, int flags) {
  SocketState* s = g_table.Lookup(fd);
  if (__builtin_expect(s == nullptr, 1)) return LibcRecv(fd, buf, n, flags);
  return TrackedRead(s, fd, ReadApi::kRecv, flags, [=] { return LibcRecv(fd, buf, n, flags); });
}

ssize_t Recvfrom(int fd, void* buf, size_t n, int flags, struct sockaddr* addr, socklen_t* addrlen) {
  SocketState* s = g_table.Lookup(fd);
  if (__builtin_expect(s == nullptr, 1)) return LibcRecvfrom(fd, buf, n, flags, addr, addrlen);
  return TrackedRead(s, fd, ReadApi::kRecvfrom, flags, [=] { return LibcRecvfrom(fd, buf, n, flags, addr, addrlen); });
}

ssize_t Recvmsg(int fd, struct msghdr* msg, int flags) {
  SocketState* s = g_table.Lookup(fd);
  if (__builtin_expect(s == nullptr, 1)) return LibcRecvmsg(fd, msg, flags);
  return TrackedRead(s, fd, ReadApi::kRecvmsg, flags, [=] { return LibcRecvmsg(fd, msg, flags); });
}

int Recvmmsg(int fd, struct mmsghdr* msgs, unsigned int vlen, int flags, struct timespec* timeout) {
  SocketState* s = g_table.Lookup(fd);
  if (__builtin_expect(s == nullptr, 1)) return Real(g_real.recvmmsg)(fd, msgs, vlen, flags, timeout);
  int received = 0;
  TrackedRead(s, fd, ReadApi::kRecvmmsg, flags, [&]() -> ssize_t {
    received = g_real.recvmmsg(fd, msgs, vlen, flags, timeout);
    return received < 0 ? -1 : static_cast<ssize_t>(MessageBytes(msgs, received));
  });
  return received;
}

ssize_t ReadChk(int fd, void* buf, size_t n, size_t buflen) {
  SocketState* s = g_table.Lookup(fd);
  if (__builtin_expect(s == nullptr, 1)) return Real(g_real.read_chk)(fd, buf, n, buflen);
  return TrackedRead(s, fd, ReadApi::kRead, 0, [=] { return g_real.read_chk(fd, buf, n, buflen); });
}

ssize_t RecvChk(int fd, void* buf, size_t n, size_t buflen, int flags) {
  SocketState* s = g_table.Lookup(fd);
  if (__builtin_expect(s == nullptr, 1)) return Real(g_real.recv_chk)(fd, buf, n, buflen, flags);
  return TrackedRead(s, fd, ReadApi::kRecv, flags, [=] { return g_real.recv_chk(fd, buf, n, buflen, flags); });
}

ssize_t RecvfromChk(int fd, void* buf, size_t n, size_t buflen, int flags, struct sockaddr* addr, socklen_t* addrlen) {
  SocketState* s = g_table.Lookup(fd);
  if (__builtin_expect(s == nullptr, 1)) return Real(g_real.recvfrom_chk)(fd, buf, n, buflen, flags, addr, addrlen);
  return TrackedRead(s, fd, ReadApi::kRecvfrom, flags,
                     [=] { return g_real.recvfrom_chk(fd, buf, n, buflen, flags, addr, addrlen); });
}

int Socket(int domain, int type, int protocol) {
  const int fd = Real(g_real.socket)(domain, type, protocol);
  const int kind = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd >= 0 && IsTcpFamily(domain) && kind == SOCK_STREAM && (protocol == 0 || protocol == IPPROTO_TCP)) {
    ErrnoSaver errno_saver;
    SocketIdentity id;
    id.local.ss_family = static_cast<sa_family_t>(domain);
    id.peer.ss_family = static_cast<sa_family_t>(domain);
    id.cookie = SocketCookie(fd);
    TrackNew(fd, id, (type & SOCK_NONBLOCK) != 0);
    return fd;
  }
  return NewFile(fd);
}

// A program that asks accept for no address (libuv's, Node.js's) on a
// tracked listener gets the call with the shim's own buffer: the kernel
// writes nothing of the program's either way (it ignores addrlen without
// addr), and the peer needs no getpeername. A program's own buffer is read
// by neither: its length could be a bad pointer, which the kernel answers
// with EFAULT, and accept writes the whole address's length there.
//
// AcceptIntoOurs is that call: libc's accept or accept4 (`real`, given
// `more` arguments after the address: accept4's flags), inlined in each.
template <typename Fn, typename... More>
[[gnu::always_inline]] inline int AcceptIntoOurs(Fn real, int fd, int flags, More... more) {
  AcceptedPeer peer;
  const int accepted = real(fd, reinterpret_cast<sockaddr*>(&peer.address), &peer.length, more...);
  return AfterAccept(fd, accepted, flags, &peer);
}

int Accept(int fd, struct sockaddr* addr, socklen_t* addrlen) {
  if (addr != nullptr || g_table.Lookup(fd) == nullptr) {
    return AfterAccept(fd, Real(g_real.accept)(fd, addr, addrlen), 0, nullptr);
  }
  return AcceptIntoOurs(g_real.accept, fd, 0);
}

int Accept4(int fd, struct sockaddr* addr, socklen_t* addrlen, int flags) {
  if (addr != nullptr || g_table.Lookup(fd) == nullptr) {
    return AfterAccept(fd, Real(g_real.accept4)(fd, addr, addrlen, flags), flags, nullptr);
  }
  return AcceptIntoOurs(g_real.accept4, fd, flags, flags);
}

int Connect(int fd, const struct sockaddr* addr, socklen_t addrlen) {
  if (g_policy_config != nullptr && addr != nullptr) {
    // Before the SYN, so that buffer sizes shape the window it announces;
    // once: a non-blocking connect is called again to learn how it went.
    UpdateTracked(fd, [fd, addr](SocketState* s) {
      if (s->id.role == Role::kClient) return;
      s->id.role = Role::kClient;
      socklen_t len = sizeof(s->id.local);
      getsockname(fd, reinterpret_cast<sockaddr*>(&s->id.local), &len);
      AttachPolicy(fd, s, addr);
    });
  }
  const int result = Real(g_real.connect)(fd, addr, addrlen);
  if (result == 0 || errno == EINPROGRESS) {
    UpdateTracked(fd, [fd, addr, addrlen](SocketState* s) {
      const sa_family_t family = s->id.local.ss_family;
      const int16_t rule = s->id.rule;
      s->id = Identify(fd, Role::kClient);
      s->id.rule = rule;
      if (s->id.peer.ss_family == 0 && addr != nullptr) {
        // A non-blocking connect still in progress has no peer name yet.
        memcpy(&s->id.peer, addr, addrlen < sizeof(s->id.peer) ? addrlen : sizeof(s->id.peer));
      }
      if (s->id.local.ss_family == 0) s->id.local.ss_family = family;
      if (s->experiment_draw_pending) AttachPolicy(fd, s, reinterpret_cast<const sockaddr*>(&s->id.peer));
    });
    if (g_table.Lookup(fd) != nullptr) OnConnectionTracked(/*accepted=*/false);
  }
  return result;
}

int Listen(int fd, int backlog) {
  const int result = Real(g_real.listen)(fd, backlog);
  if (result == 0) {
    UpdateTracked(fd, [fd](SocketState* s) { s->id = Identify(fd, Role::kListener); });
    if (g_table.Lookup(fd) != nullptr) OnListening();
  }
  return result;
}

int CloseTracked(int fd, SocketState* s) {
  return CloseSocket(fd, s, [fd] { return static_cast<long>(LoadSlot(g_real.close)(fd)); });
}

int CloseRange(unsigned int first, unsigned int last, int flags) {
  return CloseRangeWith(first, last, flags, [=] { return static_cast<long>(Real(g_real.close_range)(first, last, flags)); });
}

int Shutdown(int fd, int how) {
  SocketState* s = g_table.Lookup(fd);
  if (s == nullptr || s->stats.policy == nullptr) return Real(g_real.shutdown)(fd, how);
  ReleaseSocket(s, fd, FlushCause::kShutdown);
  const int result = g_real.shutdown(fd, how);
  if (result == 0) OnShutdown(s, how);
  return result;
}

int Dup(int fd) { return AfterDup(fd, Real(g_real.dup)(fd)); }

int Dup2(int old_fd, int new_fd) {
  return DupOnto(old_fd, new_fd, [&] { return Real(g_real.dup2)(old_fd, new_fd); });
}

int Dup3(int old_fd, int new_fd, int flags) {
  return DupOnto(old_fd, new_fd, [&] { return Real(g_real.dup3)(old_fd, new_fd, flags); });
}

int Fcntl(int fd, int cmd, unsigned long arg) {
  return FcntlCommon(fd, cmd, Real(g_real.fcntl)(fd, cmd, arg), arg);
}

int Fcntl64(int fd, int cmd, unsigned long arg) {
  return FcntlCommon(fd, cmd, Real(g_real.fcntl64)(fd, cmd, arg), arg);
}

int Setsockopt(int fd, int level, int name, const void* value, socklen_t len) {
  const int result = Real(g_real.setsockopt)(fd, level, name, value, len);
  AppOption option;
  if (result == 0 && value != nullptr && len >= sizeof(int) && AppOptionOf(level, name, &option)) {
    int32_t v;
    memcpy(&v, value, sizeof(v));
    UpdateTracked(fd, [option, v](SocketState* s) {
      s->SetAppOption(option, v);
      NoteConflict(s, option);
    });
    if (option == AppOption::kCork) {
      ErrnoSaver errno_saver;
      OnApplicationCork(g_table.Lookup(fd), fd);
    }
  }
  return result;
}

int Ioctl(int fd, unsigned long request, void* arg) {
  const int result = Real(g_real.ioctl)(fd, request, arg);
  if (result == 0 && request == FIONBIO && arg != nullptr) {
    int on;
    memcpy(&on, arg, sizeof(on));
    UpdateTracked(fd, [on](SocketState* s) { s->nonblocking.store(on != 0, std::memory_order_relaxed); });
  }
  return result;
}

// ReleasedThen is Waited's path while a policy holds bytes: out of line, so
// that a wait with nothing held saves no register and keeps no frame.
template <typename Wait, typename... Args>
[[gnu::noinline]] auto ReleasedThen(Wait wait, Args... args) {
  ReleaseHeld(FlushCause::kWait);
  return wait(args...);
}

// Waited runs a wait: where the application expects its writes to be on the
// way, so a policy lets go of everything it holds first. With nothing held
// the cost is one load and a tail call. The wait and its arguments as they
// are, not a lambda: the compiler stored a lambda's captures on the stack
// before the test.
template <typename Wait, typename... Args>
[[gnu::always_inline]] inline auto Waited(Wait wait, Args... args) {
  if (__builtin_expect(AnyHeld(), 0)) return ReleasedThen(wait, args...);
  return wait(args...);
}

int Poll(struct pollfd* fds, nfds_t nfds, int timeout) {
  return Waited(LibcPoll, fds, nfds, timeout);
}

int Ppoll(struct pollfd* fds, nfds_t nfds, const struct timespec* timeout, const sigset_t* mask) {
  return Waited(Real(g_real.ppoll), fds, nfds, timeout, mask);
}

int Select(int nfds, fd_set* r, fd_set* w, fd_set* e, struct timeval* timeout) {
  return Waited(Real(g_real.select), nfds, r, w, e, timeout);
}

int Pselect(int nfds, fd_set* r, fd_set* w, fd_set* e, const struct timespec* timeout, const sigset_t* mask) {
  return Waited(Real(g_real.pselect), nfds, r, w, e, timeout, mask);
}

int EpollWait(int epfd, struct epoll_event* events, int maxevents, int timeout) {
  return Waited(LibcEpollWait, epfd, events, maxevents, timeout);
}

int EpollPwait(int epfd, struct epoll_event* events, int maxevents, int timeout, const sigset_t* mask) {
  return Waited(LibcEpollPwait, epfd, events, maxevents, timeout, mask);
}

int PollChk(struct pollfd* fds, nfds_t nfds, int timeout, size_t fdslen) {
  return Waited(Real(g_real.poll_chk), fds, nfds, timeout, fdslen);
}

int PpollChk(struct pollfd* fds, nfds_t nfds, const struct timespec* timeout, const sigset_t* mask, size_t fdslen) {
  return Waited(Real(g_real.ppoll_chk), fds, nfds, timeout, mask, fdslen);
}

int EpollPwait2(int epfd, struct epoll_event* events, int maxevents, const struct timespec* timeout,
                const sigset_t* mask) {
  return Waited(Real(g_real.epoll_pwait2), epfd, events, maxevents, timeout, mask);
}

long Syscall(long number, long a, long b, long c, long d, long e, long f) {
  const auto call = [=] { return Real(g_real.syscall)(number, a, b, c, d, e, f); };
  switch (number) {
    case SYS_close:
      return CloseWith(static_cast<int>(a), call);
    case SYS_close_range:
      return CloseRangeWith(static_cast<unsigned>(a), static_cast<unsigned>(b), static_cast<int>(c), call);
    case SYS_dup2:
    case SYS_dup3:
      return DupOnto(static_cast<int>(a), static_cast<int>(b), [&] { return static_cast<int>(call()); });
    case SYS_dup:
      return AfterDup(static_cast<int>(a), static_cast<int>(call()));
    case SYS_write:
    case SYS_writev:
    case SYS_pwritev:
    case SYS_pwritev2:
    case SYS_sendto:
    case SYS_sendmsg:
    case SYS_sendmmsg:
    case SYS_sendfile:
      // The shim cannot order these after held bytes: they go first.
      PolicyBeforeBypass(static_cast<int>(a), false);
      return call();
    case SYS_splice:
      PolicyBeforeBypass(static_cast<int>(c), false);
      return call();
    case SYS_open:
    case SYS_openat:
    case SYS_creat:
    case SYS_socket:
    case SYS_accept:
    case SYS_accept4:
    case SYS_eventfd2:
    case SYS_memfd_create:
    case SYS_epoll_create1: {
      // A TCP socket made this way is not tracked; its number is no stale entry's.
      const long fd = call();
      return fd > INT32_MAX ? fd : NewFile(static_cast<int>(fd));
    }
    default:
      return call();
  }
}

int Fclose(FILE* stream) {
  const int fd = stream != nullptr ? fileno(stream) : -1;
  SocketState* s = fd < 0 ? nullptr : g_table.Lookup(fd);
  if (s == nullptr) return Real(g_real.fclose)(stream);
  // The stream's buffer leaves in the real fclose, after what is held.
  return CloseSocket(fd, s, [stream] { return static_cast<long>(g_real.fclose(stream)); });
}

void Closefrom(int first) {
  CloseRangeWith(static_cast<unsigned>(first < 0 ? 0 : first), ~0u, 0, [first] {
    g_real.closefrom(first);
    return 0L;
  });
}

FILE* Fdopen(int fd, const char* mode) {
  // stdio writes to the socket where the shim cannot see them: its policy
  // lets go of what it holds and holds nothing more.
  PolicyBeforeBypass(fd, true);
  return Real(g_real.fdopen)(fd, mode);
}

ssize_t Splice(int fd_in, off64_t* off_in, int fd_out, off64_t* off_out, size_t len, unsigned int flags) {
  PolicyBeforeBypass(fd_out, false);
  return Real(g_real.splice)(fd_in, off_in, fd_out, off_out, len, flags);
}

int ForgetStale(int fd) {
  PolicyForgetClosedFd(fd);
  return fd;
}

int Pipe2(int fds[2], int flags) {
  return Pipe(fds, Real(g_real.pipe2)(fds, flags));
}

int Pipe(int fds[2], int result) {
  if (result == 0) {
    NewFile(fds[0]);
    NewFile(fds[1]);
  }
  return result;
}

FILE* NewStream(FILE* stream) {
  if (stream != nullptr) NewFile(fileno(stream));
  return stream;
}

void* MemoryChanged(void* result) {
  ForgetReadableMemory();
  return result;
}

void BeforeExec() { ReleaseAll(FlushCause::kExec); }

void BeforeExit() { ReleaseAll(FlushCause::kExit); }

}  // namespace hooks
}  // namespace tcpadvise
