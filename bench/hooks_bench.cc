// Observe-mode cost of the shim's hooks, in nanoseconds per call.
//
// The *_Stub benchmarks bind the "real" libc function to a stub that returns
// at once, so what they time is exactly what the shim adds: the table lookup,
// the two tick reads and the counters. The *_Syscall benchmarks do the same
// around real write(2) calls on a loopback TCP connection, for context (there
// the syscall dominates and run-to-run noise is larger than the overhead).
#include <benchmark/benchmark.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

#include "libtcpadvise/call_sites.h"
#include "libtcpadvise/clock.h"
#include "libtcpadvise/background_thread.h"
#include "libtcpadvise/hooks.h"
#include "libtcpadvise/policy.h"
#include "libtcpadvise/real_libc.h"
#include "libtcpadvise/socket_table.h"

namespace tcpadvise {
namespace {

constexpr int kTrackedFd = 900;
constexpr int kUntrackedFd = 901;
// kVariedFd is a tracked socket of its own for the varied-size benchmark,
// whose many buckets would otherwise change kTrackedFd's histograms.
constexpr int kVariedFd = 902;

__attribute__((noinline)) ssize_t StubWrite(int, const void*, size_t n) {
  benchmark::ClobberMemory();
  return static_cast<ssize_t>(n);
}

__attribute__((noinline)) ssize_t StubRead(int, void*, size_t n) {
  benchmark::ClobberMemory();
  return static_cast<ssize_t>(n);
}

struct StubbedShim {
  StubbedShim() {
    BindRealLibc();
    g_table.Init();
    real_write = g_real.write;
    real_read = g_real.read;
    SocketIdentity id;
    id.role = Role::kClient;
    g_table.Track(kTrackedFd, id);
    g_table.Track(kVariedFd, id);
  }
  ssize_t (*real_write)(int, const void*, size_t);
  ssize_t (*real_read)(int, void*, size_t);
};

StubbedShim& Shim() {
  static StubbedShim shim;
  return shim;
}

// Stubbed swaps the libc pointers for stubs for the life of one benchmark.
struct Stubbed {
  Stubbed() {
    Shim();
    g_real.write = StubWrite;
    g_real.read = StubRead;
  }
  ~Stubbed() {
    g_real.write = Shim().real_write;
    g_real.read = Shim().real_read;
  }
};

char g_buf[64];

void BM_Write_Stub_Direct(benchmark::State& state) {
  Stubbed stubbed;
  ssize_t (*volatile fn)(int, const void*, size_t) = StubWrite;
  for (auto _ : state) benchmark::DoNotOptimize(fn(kTrackedFd, g_buf, 2));
}
BENCHMARK(BM_Write_Stub_Direct);

void BM_Write_Stub_UntrackedFd(benchmark::State& state) {
  Stubbed stubbed;
  for (auto _ : state) benchmark::DoNotOptimize(hooks::Write(kUntrackedFd, g_buf, 2));
}
BENCHMARK(BM_Write_Stub_UntrackedFd);

void BM_Write_Stub_TrackedSocket(benchmark::State& state) {
  Stubbed stubbed;
  for (auto _ : state) benchmark::DoNotOptimize(hooks::Write(kTrackedFd, g_buf, 2));
}
BENCHMARK(BM_Write_Stub_TrackedSocket);

// WithCallSites turns call-site sampling on for one benchmark, as the shim
// does at start (libunwind loaded, its unwinder).
struct WithCallSites {
  explicit WithCallSites(const char* mode) {
    setenv("TCPADVISE_CALL_SITES", mode, 1);
    CallSitesStart();
    CallSitesOnSocketTracked(getpid());
  }
  ~WithCallSites() { CallSitesConfigure(CallSiteSettings{CallSiteMode::kOff, 0, 0}, nullptr); }
};

// A tracked write with call sites sampled as by default (one in 64 past the
// socket's first 16), and with every write's stack taken: the latter minus
// BM_Write_Stub_TrackedSocket is the cost of one sampled write.
void BM_Write_Stub_TrackedSocket_CallSitesSample(benchmark::State& state) {
  Stubbed stubbed;
  WithCallSites sites("sample");
  for (auto _ : state) benchmark::DoNotOptimize(hooks::Write(kTrackedFd, g_buf, 2));
}
BENCHMARK(BM_Write_Stub_TrackedSocket_CallSitesSample);

void BM_Write_Stub_TrackedSocket_CallSitesAll(benchmark::State& state) {
  Stubbed stubbed;
  WithCallSites sites("all");
  for (auto _ : state) benchmark::DoNotOptimize(hooks::Write(kTrackedFd, g_buf, 2));
}
BENCHMARK(BM_Write_Stub_TrackedSocket_CallSitesAll);

void BM_WriteRead_Stub_TrackedSocket(benchmark::State& state) {
  // A burst of one write and a read: the read closes the burst and the turn.
  Stubbed stubbed;
  for (auto _ : state) {
    benchmark::DoNotOptimize(hooks::Write(kTrackedFd, g_buf, 2));
    benchmark::DoNotOptimize(hooks::Read(kTrackedFd, g_buf, 2));
  }
}
BENCHMARK(BM_WriteRead_Stub_TrackedSocket);

// A write and a read whose sizes vary over 61 sizes from 1 B to 60 KiB (as a
// server's replies do): the size histograms hold most of their buckets
// beyond the three inline ones, in the tables (sparse_counters.h).
void BM_WriteRead_Stub_TrackedSocket_VariedSizes(benchmark::State& state) {
  static char buf[65536];
  size_t sizes[61];
  for (int i = 0; i < 61; ++i) sizes[i] = static_cast<size_t>(1) << (i / 4) | static_cast<size_t>(i * 37 % 64);
  Stubbed stubbed;
  int i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(hooks::Write(kVariedFd, buf, sizes[i]));
    benchmark::DoNotOptimize(hooks::Read(kVariedFd, buf, sizes[60 - i]));
    i = i == 60 ? 0 : i + 1;
  }
}
BENCHMARK(BM_WriteRead_Stub_TrackedSocket_VariedSizes);

void BM_ReadTicks(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(ReadTicks());
}
BENCHMARK(BM_ReadTicks);

void BM_ClockGettime(benchmark::State& state) {
  timespec ts;
  for (auto _ : state) {
    clock_gettime(CLOCK_MONOTONIC, &ts);
    benchmark::DoNotOptimize(ts);
  }
}
BENCHMARK(BM_ClockGettime);

// A loopback connection whose receiver drains everything on a thread.
struct Loopback {
  Loopback() {
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(lfd, 1);
    socklen_t len = sizeof(addr);
    getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len);
    writer = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(writer, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    connect(writer, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    reader = accept(lfd, nullptr, nullptr);
    close(lfd);
    pthread_create(&thread, nullptr, Drain, this);
  }
  ~Loopback() {
    shutdown(writer, SHUT_WR);
    pthread_join(thread, nullptr);
    close(writer);
    close(reader);
  }
  static void* Drain(void* self) {
    char buf[65536];
    while (read(static_cast<Loopback*>(self)->reader, buf, sizeof(buf)) > 0) {
    }
    return nullptr;
  }
  int writer, reader;
  pthread_t thread;
};

void BM_Write_Syscall_Plain(benchmark::State& state) {
  Shim();
  Loopback lo;
  for (auto _ : state) benchmark::DoNotOptimize(g_real.write(lo.writer, g_buf, 64));
}
BENCHMARK(BM_Write_Syscall_Plain)->MinTime(1.0);

void BM_Write_Syscall_TrackedSocket(benchmark::State& state) {
  Shim();
  Loopback lo;
  SocketIdentity id;
  id.role = Role::kClient;
  g_table.Track(lo.writer, id);
  for (auto _ : state) benchmark::DoNotOptimize(hooks::Write(lo.writer, g_buf, 64));
  g_table.Release(lo.writer);
}
BENCHMARK(BM_Write_Syscall_TrackedSocket)->MinTime(1.0);

// Coalesced bursts: a coalesce policy on the socket, 15 two-byte writes it
// holds, then what a read does first (ReleaseAll): one send of 30 bytes.
// Timed per burst. Under _Stub the sends are stubs too (the shim's own
// cost); under _Syscall they reach a loopback connection.
constexpr int kBurstWrites = 15;

__attribute__((noinline)) ssize_t StubSend(int, const void*, size_t n, int) {
  benchmark::ClobberMemory();
  return static_cast<ssize_t>(n);
}

__attribute__((noinline)) ssize_t StubSendmsg(int, const msghdr* msg, int) {
  benchmark::ClobberMemory();
  ssize_t n = 0;
  for (size_t i = 0; i < msg->msg_iovlen; ++i) n += static_cast<ssize_t>(msg->msg_iov[i].iov_len);
  return n;
}

// UnderCoalesce attaches a coalesce policy to fd for one benchmark; calls
// go through glibc's pointers (as in a threaded program), so stubs apply.
struct UnderCoalesce {
  explicit UnderCoalesce(int fd) {
    Shim();
    NoteApplicationThread();
    config.rule_count = 1;
    config.rules[0].settings.coalesce = true;
    config.rules[0].settings.coalesce_max_bytes = 1448;
    g_policy_config = &config;
    SocketIdentity id;
    id.role = Role::kClient;
    g_table.Track(fd, id);
    g_table.Lock();
    AttachPolicy(fd, g_table.Lookup(fd), nullptr);
    g_table.Unlock();
  }
  ~UnderCoalesce() { g_policy_config = nullptr; }
  PolicyConfig config;
};

void Burst(int fd) {
  for (int i = 0; i < kBurstWrites; ++i) benchmark::DoNotOptimize(hooks::Write(fd, g_buf, 2));
  ReleaseAll(FlushCause::kRead);
}

constexpr int kCoalescedFd = 902;

void BM_CoalescedBurst_Stub(benchmark::State& state) {
  Stubbed stubbed;
  const auto real_send = g_real.send;
  const auto real_sendmsg = g_real.sendmsg;
  g_real.send = StubSend;
  g_real.sendmsg = StubSendmsg;
  {
    UnderCoalesce coalesce(kCoalescedFd);
    for (auto _ : state) Burst(kCoalescedFd);
    g_table.Release(kCoalescedFd);
  }
  g_real.send = real_send;
  g_real.sendmsg = real_sendmsg;
}
BENCHMARK(BM_CoalescedBurst_Stub);

void BM_CoalescedBurst_Syscall(benchmark::State& state) {
  Loopback lo;
  UnderCoalesce coalesce(lo.writer);
  for (auto _ : state) Burst(lo.writer);
  g_table.Release(lo.writer);
}
BENCHMARK(BM_CoalescedBurst_Syscall)->MinTime(1.0);

// A passive socket under the adaptive coalesce policy (the default): bursts
// of one write, each closed by a read, as a redis or nginx connection makes
// them. Its writes pass straight through without the socket's turn
// (policy.h: PassesUnheld): against BM_WriteRead_Stub_TrackedSocket, what
// the adaptive rule costs such a socket.
constexpr int kPassiveFd = 904;

void BM_PassiveWriteRead_Stub(benchmark::State& state) {
  Stubbed stubbed;
  UnderCoalesce coalesce(kPassiveFd);
  for (auto _ : state) {
    benchmark::DoNotOptimize(hooks::Write(kPassiveFd, g_buf, 2));
    benchmark::DoNotOptimize(hooks::Read(kPassiveFd, g_buf, 2));
  }
  g_table.Release(kPassiveFd);
}
BENCHMARK(BM_PassiveWriteRead_Stub);

}  // namespace
}  // namespace tcpadvise

BENCHMARK_MAIN();
