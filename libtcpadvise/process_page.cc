#include "process_page.h"

#include <string.h>
#include <sys/mman.h>

namespace tcpadvise {

ProcessPage g_process_page;

namespace {

// g_page_wiped: the kernel zeroes the page in fork children. Outside the
// page, so that a child knows it.
std::atomic<bool> g_page_wiped{false};

// TokenOf mixes a pid and a start time: a process and the fork ancestor
// whose memory it inherited never share both.
uint64_t TokenOf(int pid, uint64_t start_ns) {
  uint64_t h = (start_ns ^ static_cast<uint64_t>(static_cast<unsigned>(pid)) << 32) * 0x9e3779b97f4a7c15ull;
  h ^= h >> 29;
  return h | 1;  // never 0, a child's token before its handler ran
}

}  // namespace

void StartProcessPage(int pid, uint64_t start_ns) {
  static_assert(sizeof(ProcessPage) == 4096, "one page");
  g_process_page.token = TokenOf(pid, start_ns);
}

void WipeProcessPageOnFork() {
  // A fork meanwhile finds g_page_wiped still false: its child zeroes the page.
  if (g_page_wiped.load(std::memory_order_relaxed)) return;
  if (madvise(&g_process_page, sizeof(g_process_page), MADV_WIPEONFORK) == 0) {
    g_page_wiped.store(true, std::memory_order_release);
  }
}

bool ProcessPageWipedByKernel() { return g_page_wiped.load(std::memory_order_acquire); }

void ResetProcessPageInChild(int pid, uint64_t start_ns) {
  if (!g_page_wiped.load(std::memory_order_acquire)) {
    memset(static_cast<void*>(&g_process_page), 0, sizeof(g_process_page));
  }
  g_process_page.token = TokenOf(pid, start_ns);
}

}  // namespace tcpadvise
