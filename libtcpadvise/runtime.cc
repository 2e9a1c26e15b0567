#include "runtime.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <atomic>

#include "background_thread.h"
#include "call_sites.h"
#include "policy.h"
#include "parse_count.h"
#include "private_alloc.h"
#include "process_page.h"
#include "raw_log.h"
#include "real_libc.h"
#include "reentry.h"
#include "signals.h"
#include "socket_table.h"
#include "trace_writer.h"
#include "utf8.h"

namespace tcpadvise {

RuntimeState g_runtime;
std::atomic<uint64_t> g_next_snapshot_tick{UINT64_MAX};

namespace {

std::atomic<bool> g_active{false};
// g_tracked_any is set with the first socket this process (or its fork
// parent) tracked: without one there is nothing to hold nor to write, and
// exit costs a process that never opened a socket nothing.
std::atomic<bool> g_tracked_any{false};
std::atomic<bool> g_armed{false};
std::atomic<bool> g_snapshot_thread_started{false};
std::atomic<uint32_t> g_warnings{0};

uint64_t IntervalTicks() {
  return static_cast<uint64_t>(g_runtime.settings.interval_s * g_runtime.tick_rate.TicksPerSecond());
}

// SnapshotLoop writes a snapshot every interval, looking at least once a
// second whether the application is still there.
void* SnapshotLoop(void*) {
  const uint64_t interval_ns = static_cast<uint64_t>(g_runtime.settings.interval_s * 1e9);
  for (;;) {
    for (uint64_t slept_ns = 0; slept_ns < interval_ns;) {
      const uint64_t slice_ns = interval_ns - slept_ns < 1000000000 ? interval_ns - slept_ns : 1000000000;
      const timespec slice = {static_cast<time_t>(slice_ns / 1000000000), static_cast<long>(slice_ns % 1000000000)};
      while (clock_nanosleep(CLOCK_MONOTONIC, 0, &slice, nullptr) == EINTR) {
      }
      slept_ns += slice_ns;
      ExitIfApplicationGone();
    }
    WriteTrace(/*final=*/false);
  }
  return nullptr;
}

// StartSnapshotThreadOnce starts the snapshot thread unless it runs; false
// if it could not start (the calling threads then take the snapshots).
bool StartSnapshotThreadOnce() {
  if (g_snapshot_thread_started.exchange(true, std::memory_order_acq_rel)) return true;
  if (StartBackgroundThread(SnapshotLoop, 64 * 1024, "snap")) return true;
  g_snapshot_thread_started.store(false, std::memory_order_relaxed);
  return false;
}

// t_fork_inside_shim: this thread forks from a signal handler that
// interrupted the shim, holding one of its locks or a socket's turn, which
// the fork handlers would wait for for ever. They then take no lock, and
// the child, which goes on with the interrupted section when the handler
// returns, gets the memory that section changes as it was (the process
// page and the table's Local, else zeroed) and drops what its parent holds.
// t_fork_inside_shim_tid is the forking thread's id, the owner its child
// finds on the locks that thread holds; t_kept_page and t_kept_local: that
// fork keeps the process page, the table's Local.
__thread bool t_fork_inside_shim = false;
__thread pid_t t_fork_inside_shim_tid = 0;
__thread bool t_kept_page = false;
__thread bool t_kept_local = false;

// WipeAgainAfterForkInsideShim has the memory kept for such a fork wiped
// in fork children again (process_page.h: KeepWipedOnFork).
void WipeAgainAfterForkInsideShim() {
  WipeProcessPageAgainAfterFork(t_kept_page);
  g_table.WipeLocalAgainAfterFork(t_kept_local);
}

void BeforeFork() {
  if (Reentered() || InsidePolicy()) {
    t_fork_inside_shim = true;
    t_fork_inside_shim_tid = gettid();
    t_kept_page = KeepProcessPageOnFork();
    t_kept_local = g_table.KeepLocalOnFork();
    return;
  }
  ++g_process_page.forks;
  // The child must not send what the parent holds: it all goes out now.
  ReleaseAll(FlushCause::kFork);
  CallSitesBeforeFork();
  LockTraceWriter();
  if (g_tracked_any.load(std::memory_order_relaxed)) SpoolBeforeFork();
  g_table.Lock();
  PrivateHeapBeforeFork();
}

void AfterForkInParent() {
  if (t_fork_inside_shim) {
    t_fork_inside_shim = false;
    WipeAgainAfterForkInsideShim();
    return;
  }
  PrivateHeapAfterForkInParent();
  g_table.Unlock();
  UnlockTraceWriter();
  CallSitesAfterForkInParent();
}

// AfterForkInChild writes as little as it can: each page it writes is one
// the child copies from its parent. The locks and the trace's flags are the
// process page's, which the child gets zeroed (process_page.h).
void AfterForkInChild() {
  if (t_fork_inside_shim) {
    // The section this thread was in finishes if the handler returns. The
    // child writes no trace, final or snapshot (its runtime, half its
    // parent's, would describe neither), nor sends its parent's bytes; its
    // policies still run, and what they hold goes out on its way out
    // (RuntimeStop, DieOf: its own pid tells it from a vfork child).
    t_fork_inside_shim = false;
    WipeAgainAfterForkInsideShim();
    ReleaseOtherThreadsLocksInChild(t_fork_inside_shim_tid);
    g_table.ForEachLive([](int, SocketState* s) { FreeTurnInChild(s->policy_state); });
    g_active.store(false, std::memory_order_release);
    g_runtime.pid = getpid();
    g_runtime.settings.interval_s = 0;
    g_armed.store(false, std::memory_order_relaxed);
    g_next_snapshot_tick.store(UINT64_MAX, std::memory_order_relaxed);
    DropHeldInChild(t_fork_inside_shim_tid);
    CallSitesAfterForkInsideShim();
    return;
  }
  g_runtime.start_ticks = ReadTicks();
  g_runtime.start_unix_ns = 0;
  g_runtime.ppid = g_runtime.pid;
  g_runtime.pid = getpid();
  ResetProcessPageInChild(g_runtime.pid, g_runtime.start_ticks);
  PrivateHeapAfterForkInChild();
  DropHeldInChild();
  g_table.ResetInChild();
  ForgetPendingSignalInChild();
  CallSitesAfterForkInChild();
  // The parent's snapshot thread did not survive the fork, and its deadline
  // (or the mark of its thread's start) is not the child's: the child's
  // first snapshot is an interval away, and its thread starts with a
  // connection of its own (OnConnectionTracked) or at that deadline.
  if (g_snapshot_thread_started.load(std::memory_order_relaxed)) {
    g_snapshot_thread_started.store(false, std::memory_order_relaxed);
  }
  if (g_armed.load(std::memory_order_relaxed)) {
    g_next_snapshot_tick.store(ReadTicks() + IntervalTicks(), std::memory_order_relaxed);
  }
}

}  // namespace

// TCPADVISE_SPELL spells a macro's value; the TCPADVISE_BAD_ macros are
// the warnings of bad settings, macros so that the one for two is their
// concatenation (OneWarning), and so that each names its setting's default.
#define TCPADVISE_SPELL_VALUE(x) #x
#define TCPADVISE_SPELL(x) TCPADVISE_SPELL_VALUE(x)
#define TCPADVISE_BAD_OUT "TCPADVISE_OUT is too long; traces go to the current directory"
#define TCPADVISE_BAD_INTERVAL \
  "TCPADVISE_INTERVAL must be a number of seconds from 0 to 86400; using " TCPADVISE_SPELL(TCPADVISE_INTERVAL_DEFAULT)
#define TCPADVISE_BAD_TURNS_FIRST                                         \
  "TCPADVISE_TURNS_FIRST must be a count from 0 to 1099511627776; using " \
      TCPADVISE_SPELL(TCPADVISE_TURNS_FIRST_DEFAULT)
#define TCPADVISE_BAD_TURNS_EVERY                                        \
  "TCPADVISE_TURNS_EVERY must be a power of two from 1 to 65536; using " \
      TCPADVISE_SPELL(TCPADVISE_TURNS_EVERY_DEFAULT)
#define TCPADVISE_BAD_CHILD_TRACES_FIRST                                         \
  "TCPADVISE_CHILD_TRACES_FIRST must be a count from 0 to 1099511627776; using " \
      TCPADVISE_SPELL(TCPADVISE_CHILD_TRACES_FIRST_DEFAULT)
#define TCPADVISE_BAD_CHILD_TRACES_EVERY                                        \
  "TCPADVISE_CHILD_TRACES_EVERY must be a power of two from 1 to 65536; using " \
      TCPADVISE_SPELL(TCPADVISE_CHILD_TRACES_EVERY_DEFAULT)

// OneWarning is the line naming what is bad of two settings: when both are,
// `both`, their warnings joined, so that fixing one does not reveal the other.
static const char* OneWarning(bool bad_a, const char* a, bool bad_b, const char* b, const char* both) {
  return bad_a && bad_b ? both : bad_a ? a : bad_b ? b : nullptr;
}

Settings ParseSettings(const char* out_dir, const char* interval, const char** warning) {
  Settings s;
  const bool bad_out = out_dir != nullptr && out_dir[0] != '\0' && strlen(out_dir) >= sizeof(s.out_dir);
  if (out_dir != nullptr && out_dir[0] != '\0' && !bad_out) strcpy(s.out_dir, out_dir);
  bool bad_interval = false;
  if (interval != nullptr && interval[0] != '\0') {
    char* end = nullptr;
    const double value = strtod(interval, &end);
    bad_interval = end == interval || *end != '\0' || !(value >= 0) || value > 86400;
    if (!bad_interval) s.interval_s = value;
  }
  *warning = OneWarning(bad_out, TCPADVISE_BAD_OUT, bad_interval, TCPADVISE_BAD_INTERVAL,
                        TCPADVISE_BAD_OUT "; " TCPADVISE_BAD_INTERVAL);
  return s;
}

// ParseFirstEvery reads a "first N, then one in every" pair of settings
// into a Sampling's first and every_shift, each keeping its default where
// its value is bad; *warning names the bad ones in one line.
template <typename Sampling>
static Sampling ParseFirstEvery(const char* first, const char* every, const char* bad_first_warning,
                                const char* bad_every_warning, const char* both_warning, const char** warning) {
  Sampling s;
  const bool bad_first = first != nullptr && first[0] != '\0' && !ParseCount(first, uint64_t{1} << 40, &s.first);
  uint64_t every_value = uint64_t{1} << s.every_shift;
  const bool bad_every = every != nullptr && every[0] != '\0' && !ParsePowerOfTwo(every, 65536, &every_value);
  s.every_shift = static_cast<uint32_t>(__builtin_ctzll(every_value));
  *warning = OneWarning(bad_first, bad_first_warning, bad_every, bad_every_warning, both_warning);
  return s;
}

TurnSampling ParseTurnSampling(const char* first, const char* every, const char** warning) {
  return ParseFirstEvery<TurnSampling>(first, every, TCPADVISE_BAD_TURNS_FIRST, TCPADVISE_BAD_TURNS_EVERY,
                                       TCPADVISE_BAD_TURNS_FIRST "; " TCPADVISE_BAD_TURNS_EVERY, warning);
}

ChildTraceSampling ParseChildTraceSampling(const char* first, const char* every, const char** warning) {
  return ParseFirstEvery<ChildTraceSampling>(
      first, every, TCPADVISE_BAD_CHILD_TRACES_FIRST, TCPADVISE_BAD_CHILD_TRACES_EVERY,
      TCPADVISE_BAD_CHILD_TRACES_FIRST "; " TCPADVISE_BAD_CHILD_TRACES_EVERY, warning);
}

#undef TCPADVISE_SPELL_VALUE
#undef TCPADVISE_SPELL
#undef TCPADVISE_BAD_OUT
#undef TCPADVISE_BAD_INTERVAL
#undef TCPADVISE_BAD_TURNS_FIRST
#undef TCPADVISE_BAD_TURNS_EVERY
#undef TCPADVISE_BAD_CHILD_TRACES_FIRST
#undef TCPADVISE_BAD_CHILD_TRACES_EVERY

// ApplyConfigOutput takes the config's output settings where the environment
// gave none.
static void ApplyConfigOutput() {
  if (g_policy_config == nullptr) return;
  const char* env_dir = secure_getenv("TCPADVISE_OUT");
  const char* env_interval = secure_getenv("TCPADVISE_INTERVAL");
  if ((env_dir == nullptr || env_dir[0] == '\0') && g_policy_config->output_dir[0] != '\0' &&
      strlen(g_policy_config->output_dir) < sizeof(g_runtime.settings.out_dir)) {
    strcpy(g_runtime.settings.out_dir, g_policy_config->output_dir);
  }
  if ((env_interval == nullptr || env_interval[0] == '\0') && g_policy_config->output_interval_s >= 0) {
    g_runtime.settings.interval_s = g_policy_config->output_interval_s;
  }
}

void RuntimeStart() {
  BindRealLibc();
  if (getauxval(AT_SECURE) != 0) return;  // setuid and the like: stay inert
  const char* warning = nullptr;
  g_runtime.settings = ParseSettings(secure_getenv("TCPADVISE_OUT"), secure_getenv("TCPADVISE_INTERVAL"), &warning);
  if (warning != nullptr) RawWarning("%s", warning);
  g_runtime.settings.turns =
      ParseTurnSampling(secure_getenv("TCPADVISE_TURNS_FIRST"), secure_getenv("TCPADVISE_TURNS_EVERY"), &warning);
  if (warning != nullptr) RawWarning("%s", warning);
  g_runtime.settings.child_traces = ParseChildTraceSampling(secure_getenv("TCPADVISE_CHILD_TRACES_FIRST"),
                                                           secure_getenv("TCPADVISE_CHILD_TRACES_EVERY"), &warning);
  if (warning != nullptr) RawWarning("%s", warning);
  g_runtime.tick_rate.Start();
  g_runtime.start_unix_ns = RealtimeNs();
  g_runtime.pid = getpid();
  StartProcessPage(g_runtime.pid, g_runtime.start_unix_ns);
  if (program_invocation_short_name != nullptr && program_invocation_short_name[0] != '\0') {
    // A longer name (argv[0] is whatever the exec gave) is cut on a UTF-8
    // character boundary, so that the trace never holds half a character.
    const char* name = program_invocation_short_name;
    const size_t length = Utf8Cut(name, strlen(name), sizeof(g_runtime.program) - 1);
    memcpy(g_runtime.program, name, length);
    g_runtime.program[length] = '\0';
  }
  g_table.Init();
  if (const char* config = secure_getenv("TCPADVISE_CONFIG"); config != nullptr && config[0] != '\0') {
    LoadPolicyConfig(config);
    ApplyConfigOutput();
  }
  CallSitesStart();
  pthread_atfork(BeforeFork, AfterForkInParent, AfterForkInChild);
  g_active.store(true, std::memory_order_release);
  StartSignalWatch();
}

uint64_t StartUnixNs() {
  if (g_runtime.start_unix_ns == 0) {
    const double ns_per_tick = 1e9 / g_runtime.tick_rate.TicksPerSecond();
    const uint64_t now = RealtimeNs();
    // Signed: a counter read on another CPU may be a little behind the start's.
    const double since = static_cast<double>(static_cast<int64_t>(ReadTicks() - g_runtime.start_ticks)) * ns_per_tick;
    g_runtime.start_unix_ns = since > 0 && since < static_cast<double>(now) ? now - static_cast<uint64_t>(since) : now;
  }
  return g_runtime.start_unix_ns;
}

void RuntimeStop() {
  if (!g_tracked_any.load(std::memory_order_acquire)) return;
  ReleaseAll(FlushCause::kExit);
  if (g_active.load(std::memory_order_acquire)) WriteTrace(/*final=*/true);
}

void RuntimeStopAtExitCall() {
  if (!g_active.load(std::memory_order_acquire) || !g_tracked_any.load(std::memory_order_acquire)) return;
  // A vfork child shares its parent's memory: a trace written here would
  // be the parent's, and would end its snapshots.
  if (getpid() != g_runtime.pid) return;
  // A signal handler that interrupted the shim: its locks are held.
  if (Reentered()) return;
  WriteTrace(/*final=*/true);
}

void OnSocketTracked() {
  if (!g_tracked_any.load(std::memory_order_relaxed)) {
    WipeProcessPageOnFork();
    AvoidHugePagesInZeroedData();
    // The host name and the key of the traces' names, before the fork
    // children that will inherit them: none asks uname or getrandom again.
    LockTraceWriter();
    if (g_runtime.host[0] == '\0') NoteHostName();
    if (!g_runtime.name_key_drawn) NoteNameKey();
    UnlockTraceWriter();
    g_tracked_any.store(true, std::memory_order_release);
  }
  CallSitesOnSocketTracked(g_runtime.pid);
  if (g_runtime.settings.interval_s <= 0) return;
  const uint64_t now = ReadTicks();
  if (!g_armed.exchange(true, std::memory_order_relaxed)) {
    g_next_snapshot_tick.store(now + IntervalTicks(), std::memory_order_relaxed);
  }
  MaybeSnapshot(now);
}

void OnConnectionTracked(bool accepted) {
  if (accepted) g_process_page.forks_at_accept = g_process_page.forks;
  if (!g_armed.load(std::memory_order_relaxed) || g_process_page.hands_off_connections ||
      g_snapshot_thread_started.load(std::memory_order_relaxed)) {
    return;
  }
  // Due now: the next call that reads the clock (the connection's first
  // write, its close) starts the thread, out of this call.
  g_next_snapshot_tick.store(0, std::memory_order_relaxed);
}

// The process page is never shared with a child (process_page.h): these
// flags are written as they are, with no test to spare a copied page.
void OnListening() { g_process_page.listens = true; }

void OnSocketClosing(const SocketState& s) {
  if (s.id.role == Role::kServer && !s.stats.Active() && !s.Inherited() &&
      g_process_page.forks != g_process_page.forks_at_accept) {
    g_process_page.hands_off_connections = true;
  }
}

void SnapshotDue(uint64_t now_ticks) {
  // A signal handler's hook: the next hook outside it starts the thread or writes the snapshot.
  if (!ThreadStartSafe()) return;
  uint64_t due = g_next_snapshot_tick.load(std::memory_order_relaxed);
  // One thread wins the deadline; the others go back to the application.
  if (now_ticks < due ||
      !g_next_snapshot_tick.compare_exchange_strong(due, UINT64_MAX, std::memory_order_acq_rel)) {
    return;
  }
  // The thread owns snapshots from its start on. Due at 0, it was marked to
  // start (OnConnectionTracked); at a deadline, it starts unless the
  // process listens (it may yet hand its connections to fork children:
  // a postmaster idle for longer than the interval before its first). A
  // process that hands its connections off takes its snapshots here.
  const bool start = !g_process_page.hands_off_connections && (due == 0 || !g_process_page.listens);
  if (start && StartSnapshotThreadOnce()) return;
  if (due != 0) WriteTrace(/*final=*/false);  // 0: the thread's start was due, not a snapshot
  g_next_snapshot_tick.store(ReadTicks() + IntervalTicks(), std::memory_order_relaxed);
}

void NoteTrackFailure(int fd) {
  // A signal handler's socket that came while its thread held the table's
  // lock is left untracked (SocketTable::Track), not for want of memory.
  const uint32_t flag = !g_table.Covers(fd) ? kWarnFdBeyondTable
                        : Reentered()       ? kWarnSignalHandlerSocket
                                            : kWarnOutOfMemory;
  g_warnings.fetch_or(flag, std::memory_order_relaxed);
}

uint32_t ShimWarnings() { return g_warnings.load(std::memory_order_relaxed); }

}  // namespace tcpadvise
