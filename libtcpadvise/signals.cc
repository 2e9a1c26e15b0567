#include "signals.h"

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include <atomic>

#include "errno_saver.h"
#include "policy.h"
#include "real_libc.h"
#include "reentry.h"
#include "runtime.h"

namespace tcpadvise {

__thread int t_pending_signal = 0;
__thread int t_app_signal_depth = 0;

namespace {

using InfoHandler = void (*)(int, siginfo_t*, void*);

// g_app_plain[sig], g_app_info[sig]: the program's handler for sig, by the
// kind it set (SA_SIGINFO or not), which the kernel runs through RunPlain or
// RunInfo. A slot keeps its last handler when the other kind replaces it:
// the trampoline the kernel runs names the slot that is current.
std::atomic<sighandler_t> g_app_plain[NSIG];
std::atomic<InfoHandler> g_app_info[NSIG];

// RunPlain and RunInfo run the program's handler for sig, counted in
// t_app_signal_depth.
void RunPlain(int sig) {
  ++t_app_signal_depth;
  if (const sighandler_t handler = g_app_plain[sig].load(std::memory_order_acquire)) handler(sig);
  --t_app_signal_depth;
}

void RunInfo(int sig, siginfo_t* info, void* context) {
  ++t_app_signal_depth;
  if (const InfoHandler handler = g_app_info[sig].load(std::memory_order_acquire)) handler(sig, info, context);
  --t_app_signal_depth;
}

// AsPlain is an SA_SIGINFO handler as the sa_handler that shares its
// storage (through void (*)(void), which converts to any function type).
sighandler_t AsPlain(InfoHandler handler) {
  return reinterpret_cast<sighandler_t>(reinterpret_cast<void (*)()>(handler));
}

// Wraps tells whether a handler the program sets is one the shim runs
// through a trampoline: a function, and not a trampoline itself (read back
// with a raw system call and set again).
bool Wraps(sighandler_t handler) {
  return handler != SIG_DFL && handler != SIG_IGN && handler != SIG_HOLD && handler != SIG_ERR &&
         handler != RunPlain && handler != AsPlain(RunInfo);
}

// AppHandlers are the program's handlers of a signal before a change, to
// report as the old ones in place of the trampolines.
struct AppHandlers {
  sighandler_t plain;
  InfoHandler info;

  explicit AppHandlers(int sig)
      : plain(g_app_plain[sig].load(std::memory_order_acquire)),
        info(g_app_info[sig].load(std::memory_order_acquire)) {}

  sighandler_t Program(sighandler_t kernel) const {
    if (kernel == RunPlain) return plain;
    if (kernel == AsPlain(RunInfo)) return AsPlain(info);
    return kernel;
  }
};

// WrappedPlain is the handler to hand the kernel for the program's plain
// handler: RunPlain in place of a function, whose slot now holds it.
sighandler_t WrappedPlain(int sig, sighandler_t handler) {
  if (!Wraps(handler)) return handler;
  g_app_plain[sig].store(handler, std::memory_order_release);
  return RunPlain;
}

// Wrapped is the action to hand the kernel for the program's act: a copy
// with the trampoline in place of a handler function (its flags and mask
// as they are), whose slot now holds the program's handler.
const struct sigaction* Wrapped(int sig, const struct sigaction* act, struct sigaction* copy) {
  if (act == nullptr) return act;
  const bool info = (act->sa_flags & SA_SIGINFO) != 0;
  if (!Wraps(info ? AsPlain(act->sa_sigaction) : act->sa_handler)) return act;
  *copy = *act;
  if (info) {
    g_app_info[sig].store(act->sa_sigaction, std::memory_order_release);
    copy->sa_sigaction = RunInfo;
  } else {
    copy->sa_handler = WrappedPlain(sig, act->sa_handler);
  }
  return copy;
}

// g_watching is set once the watched signals' handlers are in place; from
// then on the program's handlers run through RunPlain and RunInfo.
std::atomic<bool> g_watching{false};
// g_owned[sig]: the shim's handler is installed where the program believes
// SIG_DFL is.
std::atomic<bool> g_owned[NSIG];

// Bound returns a bound libc pointer, looking it up itself when a call comes
// before the shim's constructor: a sanitizer's start-up calls sigaction
// through here, where BindRealLibc (instrumented) must not run yet.
template <typename Fn>
Fn Bound(Fn slot, const char* name) {
  return slot != nullptr ? slot : reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

bool Watched(int sig) { return sig == SIGHUP || sig == SIGINT || sig == SIGQUIT || sig == SIGTERM; }

// DieOf writes the final trace, then ends the process by sig as the default
// disposition would have (core dump included for SIGQUIT).
[[noreturn]] void DieOf(int sig) {
  // A vfork child shares its parent's memory: the trace would be the parent's.
  if (getpid() == g_runtime.pid) {
    g_runtime.stop_signal = sig;
    RuntimeStop();
  }
  struct sigaction dfl;
  memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  g_real.sigaction(sig, &dfl, nullptr);
  g_owned[sig].store(false, std::memory_order_relaxed);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  raise(sig);
  // Still alive: the program blocks sig in some way raise cannot undo.
  g_real.exit_now(128 + sig);
  __builtin_unreachable();
}

bool InsideShim() { return Reentered() || InsidePolicy(); }

void OnStopSignal(int sig) {
  ErrnoSaver errno_saver;
  if (InsideShim()) {
    t_pending_signal = sig;  // the section's end dies of it (RunPendingSignal)
    return;
  }
  DieOf(sig);
}

// Install puts the shim's handler on sig. The watched signals are blocked
// while it runs: a second stop signal waits for the trace.
bool Install(int sig) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGHUP);
  sigaddset(&sa.sa_mask, SIGINT);
  sigaddset(&sa.sa_mask, SIGQUIT);
  sigaddset(&sa.sa_mask, SIGTERM);
  // No SA_RESTART: a call inside a shim section that the signal interrupted
  // returns, so the section ends and the process dies, rather than blocks.
  sa.sa_flags = 0;
  if (g_real.sigaction(sig, &sa, nullptr) != 0) return false;
  g_owned[sig].store(true, std::memory_order_relaxed);
  return true;
}

// Reconcile follows a disposition the program set (no need to ask the
// kernel: a forked server's child sets its four every time): the shim's
// handler goes back where the program set SIG_DFL, and leaves anything
// else alone.
void Reconcile(int sig, sighandler_t set) {
  if (set == SIG_DFL) {
    Install(sig);
  } else {
    g_owned[sig].store(false, std::memory_order_relaxed);
  }
}

void FillDefault(struct sigaction* old) {
  memset(old, 0, sizeof(*old));
  old->sa_handler = SIG_DFL;
  sigemptyset(&old->sa_mask);
}

bool Covered(int sig) { return g_watching.load(std::memory_order_acquire) && sig > 0 && sig < NSIG; }

// ChangeHandler runs one of the signal() family (real), a handler function
// through RunPlain: real sets the flags and mask its semantics want.
sighandler_t ChangeHandler(sighandler_t (*real)(int, sighandler_t), int sig, sighandler_t handler) {
  if (!Covered(sig)) return real(sig, handler);
  const bool watched = Watched(sig);
  const bool owned = watched && g_owned[sig].load(std::memory_order_relaxed);
  if (owned && handler == SIG_DFL) return SIG_DFL;  // the shim's handler stays
  const AppHandlers before(sig);
  const sighandler_t previous = real(sig, WrappedPlain(sig, handler));
  if (previous == SIG_ERR) return previous;
  ErrnoSaver errno_saver;
  if (watched && handler != SIG_HOLD) Reconcile(sig, handler);
  return owned ? SIG_DFL : before.Program(previous);
}

}  // namespace

void RunPendingSignal() {
  if (InsideShim()) return;
  const int sig = t_pending_signal;
  t_pending_signal = 0;
  if (g_owned[sig].load(std::memory_order_relaxed)) DieOf(sig);
  raise(sig);  // the program took the signal over meanwhile: its disposition decides
}

void StartSignalWatch() {
  static const int kWatched[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM};
  ErrnoSaver errno_saver;
  if (Real(g_real.sigaction) == nullptr) return;
  for (const int sig : kWatched) {
    struct sigaction now;
    if (g_real.sigaction(sig, nullptr, &now) == 0 && now.sa_handler == SIG_DFL) Install(sig);
  }
  g_watching.store(true, std::memory_order_release);
}

int Sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  if (!Covered(sig)) return Bound(g_real.sigaction, "sigaction")(sig, act, old);
  const bool watched = Watched(sig);
  const bool owned = watched && g_owned[sig].load(std::memory_order_relaxed);
  if (owned && act != nullptr && act->sa_handler == SIG_DFL) {
    if (old != nullptr) FillDefault(old);  // the shim's handler stays
    return 0;
  }
  const AppHandlers before(sig);
  // Read before the call: old may be act.
  const sighandler_t set = act != nullptr ? act->sa_handler : SIG_ERR;
  struct sigaction copy;
  const int result = g_real.sigaction(sig, Wrapped(sig, act, &copy), old);
  if (result != 0) return result;
  ErrnoSaver errno_saver;
  if (old != nullptr) {
    if (owned) {
      FillDefault(old);
    } else {
      old->sa_handler = before.Program(old->sa_handler);  // sa_sigaction shares its storage
    }
  }
  if (watched && act != nullptr) Reconcile(sig, set);
  return result;
}

sighandler_t Signal(int sig, sighandler_t handler) {
  return ChangeHandler(Bound(g_real.signal, "signal"), sig, handler);
}

sighandler_t SysvSignal(int sig, sighandler_t handler) {
  return ChangeHandler(Bound(g_real.sysv_signal, "sysv_signal"), sig, handler);
}

sighandler_t Sigset(int sig, sighandler_t disposition) {
  return ChangeHandler(Bound(g_real.sigset, "sigset"), sig, disposition);
}

void ForgetPendingSignalInChild() { t_pending_signal = 0; }

void LeaveSignalHandlers() { t_app_signal_depth = 0; }

}  // namespace tcpadvise
