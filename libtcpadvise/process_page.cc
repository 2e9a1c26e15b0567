#include "process_page.h"

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

// The ends of the shim's zeroed data before its wiped part, set by
// preload/child_layout.ld (weak: a build without it has neither).
extern "C" {
[[gnu::weak, gnu::visibility("hidden")]] extern char tcpadvise_zeroed_start[];
[[gnu::weak, gnu::visibility("hidden")]] extern char tcpadvise_zeroed_end[];
}

namespace tcpadvise {

ProcessPage g_process_page;

namespace {

// g_page_wiped: the kernel zeroes the page in fork children. Outside the
// page, so that a child knows it.
std::atomic<bool> g_page_wiped{false};

// ReleaseUnlessHeldBy frees a mutex that a thread other than tid (a parent's
// thread id) held when the process forked: that thread is gone in the child.
void ReleaseUnlessHeldBy(pthread_mutex_t* m, pid_t tid) {
  if (m->__data.__lock != 0 && !HeldByThread(*m, tid)) *m = PTHREAD_MUTEX_INITIALIZER;
}

// TokenOf mixes a pid and a start (a time, or a fork child's tick count): a
// process and the fork ancestor whose memory it inherited never share both.
uint64_t TokenOf(int pid, uint64_t start) {
  uint64_t h = (start ^ static_cast<uint64_t>(static_cast<unsigned>(pid)) << 32) * 0x9e3779b97f4a7c15ull;
  h ^= h >> 29;
  return h | 1;  // never 0, a child's token before its handler ran
}

}  // namespace

void StartProcessPage(int pid, uint64_t start) {
  static_assert(sizeof(ProcessPage) == 4096, "one page");
  g_process_page.token = TokenOf(pid, start);
}

void AvoidHugePagesInZeroedData() {
  if (tcpadvise_zeroed_start == nullptr || tcpadvise_zeroed_end == nullptr) return;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  // The loader maps the zeroed data from the page after the file's last one.
  const uintptr_t start = (reinterpret_cast<uintptr_t>(tcpadvise_zeroed_start) + page - 1) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(tcpadvise_zeroed_end);
  if (end > start) madvise(reinterpret_cast<void*>(start), end - start, MADV_NOHUGEPAGE);
}

void WipeProcessPageOnFork() {
  // A fork meanwhile finds g_page_wiped still false: its child zeroes the page.
  if (g_page_wiped.load(std::memory_order_relaxed)) return;
  if (madvise(&g_process_page, sizeof(g_process_page), MADV_WIPEONFORK) == 0) {
    g_page_wiped.store(true, std::memory_order_release);
  }
}

bool ProcessPageWipedByKernel() { return g_page_wiped.load(std::memory_order_acquire); }

bool KeepWipedOnFork(std::atomic<bool>* wiped, void* start, size_t length) {
  if (!wiped->exchange(false, std::memory_order_acq_rel)) return false;
  madvise(start, length, MADV_KEEPONFORK);
  return true;
}

void WipeAgainAfterFork(std::atomic<bool>* wiped, bool kept, void* start, size_t length) {
  if (kept && madvise(start, length, MADV_WIPEONFORK) == 0) wiped->store(true, std::memory_order_release);
}

bool KeepProcessPageOnFork() { return KeepWipedOnFork(&g_page_wiped, &g_process_page, sizeof(g_process_page)); }

void WipeProcessPageAgainAfterFork(bool kept) {
  WipeAgainAfterFork(&g_page_wiped, kept, &g_process_page, sizeof(g_process_page));
}

void ReleaseOtherThreadsLocksInChild(pid_t tid) {
  ReleaseUnlessHeldBy(&g_process_page.table_mutex, tid);
  ReleaseUnlessHeldBy(&g_process_page.trace_mutex, tid);
  ReleaseUnlessHeldBy(&g_process_page.heap_start, tid);
}

void ResetProcessPageInChild(int pid, uint64_t start) {
  if (!g_page_wiped.load(std::memory_order_acquire)) {
    memset(static_cast<void*>(&g_process_page), 0, sizeof(g_process_page));
  }
  g_process_page.token = TokenOf(pid, start);
}

}  // namespace tcpadvise
