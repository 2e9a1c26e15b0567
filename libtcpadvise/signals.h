// Signals: a server stopped by SIGINT, SIGTERM, SIGHUP or SIGQUIT (how
// servers are stopped) leaves its final trace. While the program leaves
// such a signal at its default disposition, the shim's handler takes it:
// it writes the final trace, then dies of the same signal with the default
// disposition (the parent sees the same wait status, SIGQUIT still dumps
// core). A program that installs its own handler or ignores the signal is
// left alone (its exit writes the trace); the sigaction and signal wrappers
// keep track, and answer the program as if the shim's handler were not
// there (SIG_DFL).
//
// Async-signal safety. The handler writes the trace itself, on the thread
// the signal interrupted, with the code every snapshot runs: it takes the
// trace writer's and the table's mutexes, allocates from the shim's private
// heap and makes plain system calls. That is safe when the interrupted
// thread holds none of these, which the shim knows: every shim section that
// takes one of them is marked (reentry.h: the table's lock, the private
// heap, the trace writer) or is policy code (policy.h: InsidePolicy). Other
// threads holding them let go shortly (no shim lock is held across a
// blocking call). When the signal interrupted such a section, the handler
// only notes the signal and returns; the section's end
// (RunPendingSignal) then writes the trace and dies. The handler runs
// without SA_RESTART so that a call inside the section returns (EINTR, which
// the shim's own loops retry) rather than blocks on. The window between a
// program's sigaction(SIG_DFL) and the shim's handler going back is a few
// instructions, during which the signal kills without a trace. A call the
// signal interrupts between the kernel's return and the shim's counters is
// not counted: the program never saw its result.
//
// The program's own handlers. Every handler function the program sets
// (sigaction, signal and the rest) runs through a trampoline of the shim's
// that counts the handlers the thread is in (reentry.h:
// InApplicationSignalHandler), so that a hook called from a handler, which
// may have interrupted the program inside malloc or the loader, starts no
// thread and unwinds no stack. The kernel sees the trampoline, with the
// program's flags and mask; the program reads back its own handler. A
// longjmp out of a handler (the longjmp wrappers: LeaveSignalHandlers)
// ends the count; one from a handler into another handler ends it early,
// and a handler left some other way (setcontext) leaves it counted: that
// thread's hooks then start no thread and sample no call site.
#ifndef TCPADVISE_SIGNALS_H_
#define TCPADVISE_SIGNALS_H_

#include <signal.h>

namespace tcpadvise {

// StartSignalWatch installs the shim's handler on each of the four signals
// whose disposition is the default (once, at start-up).
void StartSignalWatch();

// Sigaction wraps sigaction(2): the program's action is installed, unless it
// is SIG_DFL on a watched signal, which the shim's handler keeps; old is
// what the program set last.
int Sigaction(int sig, const struct sigaction* act, struct sigaction* old);

// Signal wraps signal and bsd_signal (glibc's signal: BSD semantics).
sighandler_t Signal(int sig, sighandler_t handler);

// SysvSignal wraps sysv_signal and __sysv_signal (one-shot, not deferred).
sighandler_t SysvSignal(int sig, sighandler_t handler);

// Sigset wraps the System V sigset: SIG_HOLD passes through.
sighandler_t Sigset(int sig, sighandler_t disposition);

// LeaveSignalHandlers notes that this thread left every handler it was in
// (a longjmp, which a program may call from a handler).
void LeaveSignalHandlers();

// ForgetPendingSignalInChild drops, in a fork child, a stop signal its
// parent's thread noted inside a shim section: it was the parent's.
void ForgetPendingSignalInChild();

}  // namespace tcpadvise

#endif  // TCPADVISE_SIGNALS_H_
