#include "signals.h"

#include <errno.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include "background_thread.h"
#include "real_libc.h"
#include "reentry.h"

namespace tcpadvise {
namespace {

void AppHandler(int) {}

// What the last handler run saw.
volatile sig_atomic_t g_seen_sig = 0;
volatile sig_atomic_t g_seen_depth = 0;
volatile sig_atomic_t g_seen_thread_start_safe = 1;
volatile sig_atomic_t g_seen_value = 0;

void Note(int sig) {
  g_seen_sig = sig;
  g_seen_depth = t_app_signal_depth;
  g_seen_thread_start_safe = ThreadStartSafe();
}

void NotingHandler(int sig) { Note(sig); }

void NotingInfoHandler(int sig, siginfo_t* info, void* context) {
  Note(sig);
  g_seen_value = context != nullptr && info->si_signo == sig ? info->si_value.sival_int : -1;
}

// KernelHandler is what the kernel would run for sig.
sighandler_t KernelHandler(int sig) {
  struct sigaction now;
  g_real.sigaction(sig, nullptr, &now);
  return now.sa_handler;
}

// ProgramView is what the program reads back through the wrapper.
sighandler_t ProgramView(int sig) {
  struct sigaction now;
  EXPECT_EQ(Sigaction(sig, nullptr, &now), 0);
  return now.sa_handler;
}

class SignalsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    BindRealLibc();
    StartSignalWatch();
  }
};

// The shim's handler sits where the program believes SIG_DFL is, and only there.
TEST_F(SignalsTest, TheShimsHandlerFollowsTheProgramsDefault) {
  EXPECT_NE(KernelHandler(SIGTERM), SIG_DFL);
  EXPECT_EQ(ProgramView(SIGTERM), SIG_DFL);

  struct sigaction app = {};
  app.sa_handler = AppHandler;
  struct sigaction old;
  ASSERT_EQ(Sigaction(SIGTERM, &app, &old), 0);
  EXPECT_EQ(old.sa_handler, SIG_DFL);
  EXPECT_NE(KernelHandler(SIGTERM), SIG_DFL);  // the trampoline that runs AppHandler
  EXPECT_EQ(ProgramView(SIGTERM), AppHandler);

  EXPECT_EQ(Signal(SIGTERM, SIG_DFL), AppHandler);
  EXPECT_NE(KernelHandler(SIGTERM), SIG_DFL);
  EXPECT_EQ(ProgramView(SIGTERM), SIG_DFL);
  EXPECT_EQ(Signal(SIGTERM, SIG_DFL), SIG_DFL);

  EXPECT_EQ(Signal(SIGTERM, SIG_IGN), SIG_DFL);
  EXPECT_EQ(KernelHandler(SIGTERM), SIG_IGN);
  EXPECT_EQ(Signal(SIGTERM, SIG_DFL), SIG_IGN);
}

TEST_F(SignalsTest, OtherSignalsPassThrough) {
  struct sigaction app = {};
  app.sa_handler = AppHandler;
  ASSERT_EQ(Sigaction(SIGUSR1, &app, nullptr), 0);
  EXPECT_EQ(ProgramView(SIGUSR1), AppHandler);
  EXPECT_EQ(Signal(SIGUSR1, SIG_DFL), AppHandler);
  EXPECT_EQ(KernelHandler(SIGUSR1), SIG_DFL);
  EXPECT_EQ(Sigaction(SIGKILL, &app, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
}

// The program's handlers run counted (a hook inside one starts no thread),
// with what the kernel hands them, and read back as the program set them.
TEST_F(SignalsTest, ProgramHandlersRunCounted) {
  struct sigaction app = {};
  app.sa_handler = NotingHandler;
  ASSERT_EQ(Sigaction(SIGUSR2, &app, nullptr), 0);
  EXPECT_TRUE(ThreadStartSafe());
  ASSERT_EQ(raise(SIGUSR2), 0);
  EXPECT_EQ(g_seen_sig, SIGUSR2);
  EXPECT_EQ(g_seen_depth, 1);
  EXPECT_FALSE(g_seen_thread_start_safe);
  EXPECT_FALSE(InApplicationSignalHandler());
  EXPECT_TRUE(ThreadStartSafe());

  // SA_SIGINFO: the handler gets its siginfo and context; the program reads
  // back its sa_sigaction and flags. act and old may be one struct.
  struct sigaction info = {};
  info.sa_sigaction = NotingInfoHandler;
  info.sa_flags = SA_SIGINFO | SA_RESTART;
  ASSERT_EQ(Sigaction(SIGUSR2, &info, &info), 0);
  EXPECT_EQ(info.sa_handler, NotingHandler);
  EXPECT_EQ(info.sa_flags & SA_SIGINFO, 0);
  struct sigaction now;
  ASSERT_EQ(Sigaction(SIGUSR2, nullptr, &now), 0);
  EXPECT_EQ(now.sa_sigaction, NotingInfoHandler);
  EXPECT_EQ(now.sa_flags & (SA_SIGINFO | SA_RESTART), SA_SIGINFO | SA_RESTART);
  g_seen_depth = 0;
  g_seen_value = 0;
  sigval value;
  value.sival_int = 42;
  ASSERT_EQ(sigqueue(getpid(), SIGUSR2, value), 0);
  // ThreadSanitizer runs a handler at its next interceptor, not at once.
  for (int i = 0; i < 10000 && g_seen_value == 0; ++i) usleep(100);
  EXPECT_EQ(g_seen_value, 42);
  EXPECT_EQ(g_seen_depth, 1);

  // signal() answers with the previous handler, the program's own.
  EXPECT_EQ(Signal(SIGUSR2, NotingHandler), reinterpret_cast<sighandler_t>(reinterpret_cast<void (*)()>(NotingInfoHandler)));
  EXPECT_EQ(Signal(SIGUSR2, SIG_DFL), NotingHandler);
  EXPECT_EQ(KernelHandler(SIGUSR2), SIG_DFL);
}

// sysv_signal's handler is one-shot: after it ran, the kernel's SIG_DFL is
// what the program reads back, not the handler the trampoline kept.
TEST_F(SignalsTest, AOneShotHandlerReadsBackAsDefaultOnceRun) {
  ASSERT_EQ(SysvSignal(SIGUSR2, NotingHandler), SIG_DFL);
  EXPECT_EQ(ProgramView(SIGUSR2), NotingHandler);
  g_seen_sig = 0;
  ASSERT_EQ(raise(SIGUSR2), 0);
  EXPECT_EQ(g_seen_sig, SIGUSR2);
  EXPECT_EQ(ProgramView(SIGUSR2), SIG_DFL);
}

// Inert (no runtime started here) the handler writes nothing, and the
// process still dies of the signal, as with SIG_DFL.
TEST_F(SignalsTest, TheHandlerDiesOfTheSignal) {
  EXPECT_EXIT(raise(SIGHUP), ::testing::KilledBySignal(SIGHUP), "");
  EXPECT_EXIT(raise(SIGINT), ::testing::KilledBySignal(SIGINT), "");
}

}  // namespace
}  // namespace tcpadvise
