#include "process_page.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

namespace tcpadvise {
namespace {

// RunChild forks, runs body in the child and returns its exit status.
template <typename Body>
int RunChild(Body body) {
  const pid_t child = fork();
  if (child == 0) _exit(body());
  int status = -1;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The page's locks, flags and token are the parent's own: a fork child finds
// them zeroed, from the kernel, before its handler runs; its handler gives it
// a token of its own. The parent's page is as it was.
TEST(ProcessPageTest, AForkChildFindsThePageZeroedAndTakesATokenOfItsOwn) {
  StartProcessPage(getpid(), 100);
  WipeProcessPageOnFork();
  const uint64_t parent_token = ProcessToken();
  EXPECT_NE(parent_token, 0u);
  if (!ProcessPageWipedByKernel()) GTEST_SKIP() << "no MADV_WIPEONFORK here (Linux before 4.14)";
  ASSERT_EQ(pthread_mutex_lock(&g_process_page.table_mutex), 0);
  g_process_page.trace_final_written = true;
  g_process_page.heap_users = 3;
  EXPECT_EQ(RunChild([] {
              const bool zero = ProcessToken() == 0 && !g_process_page.trace_final_written &&
                                g_process_page.heap_users == 0 &&
                                pthread_mutex_trylock(&g_process_page.table_mutex) == 0;
              return zero ? 0 : 1;
            }),
            0);
  EXPECT_EQ(RunChild([parent_token] {
              ResetProcessPageInChild(getpid(), 200);
              return ProcessToken() != 0 && ProcessToken() != parent_token ? 0 : 1;
            }),
            0);
  EXPECT_EQ(ProcessToken(), parent_token);
  EXPECT_TRUE(g_process_page.trace_final_written);
  EXPECT_EQ(pthread_mutex_trylock(&g_process_page.table_mutex), EBUSY);
  pthread_mutex_unlock(&g_process_page.table_mutex);
  g_process_page.trace_final_written = false;
  g_process_page.heap_users = 0;
}

}  // namespace
}  // namespace tcpadvise
