#include "signals.h"

#include <errno.h>
#include <gtest/gtest.h>
#include <signal.h>

#include "real_libc.h"

namespace tcpadvise {
namespace {

void AppHandler(int) {}

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
  EXPECT_EQ(KernelHandler(SIGTERM), AppHandler);
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
  EXPECT_EQ(KernelHandler(SIGUSR1), AppHandler);
  EXPECT_EQ(Signal(SIGUSR1, SIG_DFL), AppHandler);
  EXPECT_EQ(KernelHandler(SIGUSR1), SIG_DFL);
  EXPECT_EQ(Sigaction(SIGKILL, &app, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
}

// Inert (no runtime started here) the handler writes nothing, and the
// process still dies of the signal, as with SIG_DFL.
TEST_F(SignalsTest, TheHandlerDiesOfTheSignal) {
  EXPECT_EXIT(raise(SIGHUP), ::testing::KilledBySignal(SIGHUP), "");
  EXPECT_EXIT(raise(SIGINT), ::testing::KilledBySignal(SIGINT), "");
}

}  // namespace
}  // namespace tcpadvise
