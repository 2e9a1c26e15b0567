#include "private_alloc.h"

#include <jemalloc/jemalloc.h>
#include <pthread.h>

#include <atomic>

#include "process_page.h"
#include "reentry.h"
#include "table_arena.h"

namespace tcpadvise {

__thread bool t_in_private_heap = false;

namespace {

// HeapSection marks a call into jemalloc, which may hold an arena lock
// inside it: a ShimSection, and t_in_private_heap.
class HeapSection {
 public:
  HeapSection() { t_in_private_heap = true; }
  ~HeapSection() { t_in_private_heap = false; }
  HeapSection(const HeapSection&) = delete;
  HeapSection& operator=(const HeapSection&) = delete;

 private:
  ShimSection section_;
};

// jemalloc's fork handlers, which it hands to tcpadvise_jemalloc_atfork; the
// runtime's fork handlers run them (PrivateHeapBeforeFork and the rest).
using ForkHandler = void (*)();
std::atomic<ForkHandler> g_heap_prefork{nullptr};
std::atomic<ForkHandler> g_heap_postfork_parent{nullptr};
std::atomic<ForkHandler> g_heap_postfork_child{nullptr};

// jemalloc sets itself up at the shim's first allocation (its constructor is
// left out: libtcpadvise/CMakeLists.txt), under g_heap_start, which fork takes
// too: a fork child never inherits a heap another thread was halfway through
// setting up (its first allocation would wait for that thread forever).
// The lock is the process page's (g_heap_start), free in a fork child.
pthread_mutex_t& g_heap_start = g_process_page.heap_start;
std::atomic<bool> g_heap_started{false};

// g_heap_users counts the threads that have entered the heap (t_heap_user),
// under g_heap_start; it never goes down (a thread that ended may have been
// inside jemalloc, freeing its thread cache, as it ended). Only such threads
// can hold jemalloc's locks or have its per-thread state.
__thread bool t_heap_user = false;
unsigned& g_heap_users = g_process_page.heap_users;

// g_fork_runs_heap_handlers: the fork under way runs jemalloc's fork handlers
// (set before it, under g_heap_start).
bool g_fork_runs_heap_handlers = false;

// JoinHeap counts this thread as the heap's and sets jemalloc up if it is
// not yet, inside the caller's HeapSection.
[[gnu::cold]] [[gnu::noinline]] void JoinHeap() {
  pthread_mutex_lock(&g_heap_start);
  if (!t_heap_user) {
    t_heap_user = true;
    ++g_heap_users;
  }
  if (!g_heap_started.load(std::memory_order_relaxed)) {
    void* first = mallocx(1, 0);
    if (first != nullptr) {
      dallocx(first, 0);
      g_heap_started.store(true, std::memory_order_release);
    }
  }
  pthread_mutex_unlock(&g_heap_start);
}

// t_heap_calls counts this thread's calls into the heap, and
// t_heap_calls_warmed what it was when WarmThreadCache last ran.
__thread unsigned long t_heap_calls = 0;
__thread unsigned long t_heap_calls_warmed = ~0ul;

// EnterHeap comes before every call into jemalloc.
inline void EnterHeap() {
  if (__builtin_expect(!t_heap_user || !g_heap_started.load(std::memory_order_acquire), 0)) JoinHeap();
  ++t_heap_calls;
}

// kWarmSizes are what a forked child of a server under a policy allocates
// first: its connection's policy state (128 B: policy_state.h). The socket
// table's entries, their statistics' tables and their policy counters come
// from its arena (TableAlloc), not from the heap.
constexpr size_t kWarmSizes[] = {128};

// WarmThreadCache allocates and frees one block of each of kWarmSizes, so
// that this thread's jemalloc cache holds some of each when it forks: the
// child's first blocks then come from the cache it inherits (a page or two
// written) rather than from the arena, which would set up a slab there and
// write some 15 pages of jemalloc's metadata, copied, in every child. A
// thread that made no call into the heap since it last warmed its cache has
// the cache it left (jemalloc trims a cache only as its thread allocates):
// it writes nothing (the pages it would write are shared with the last
// child, and each write would copy one). Called under g_heap_start by the
// heap's only thread, in the fork handler.
void WarmThreadCache() {
  if (t_heap_calls == t_heap_calls_warmed) return;
  HeapSection section;
  for (const size_t size : kWarmSizes) {
    if (void* p = mallocx(size, 0)) dallocx(p, 0);
  }
  t_heap_calls_warmed = t_heap_calls;
}

}  // namespace

void* PrivateAlloc(size_t size) {
  HeapSection section;
  EnterHeap();
  return mallocx(size ? size : 1, MALLOCX_ZERO);
}

void* PrivateRealloc(void* p, size_t size) {
  if (p == nullptr) return PrivateAlloc(size);
  HeapSection section;
  EnterHeap();
  return rallocx(p, size ? size : 1, 0);
}

void PrivateFree(void* p) {
  if (p == nullptr) return;
  HeapSection section;
  EnterHeap();
  dallocx(p, 0);
}

namespace {

// kTableObjectBytes: room for the entries and tables of some 6,000 open
// sockets (a fork server's parent and children use a few), the later ones
// from the private heap. Not more: fork_echo's connections cost 11.8 us
// more [3.5-18.6] with 256 MiB reserved (bench/results/session18.md).
constexpr size_t kTableObjectBytes = size_t{8} << 20;
TableArena g_table_arena;

}  // namespace

void* TableStart(size_t slots_bytes) {
  if (void* slots = g_table_arena.Reserve(slots_bytes, kTableObjectBytes)) return slots;
  return PrivateAlloc(slots_bytes);
}

void* TableAlloc(size_t size, size_t align) {
  if (void* p = g_table_arena.Alloc(size, align)) return p;
  return PrivateAlloc(size);
}

void TableFree(void* p) {
  if (!g_table_arena.Owns(p)) PrivateFree(p);
}

void PrivateHeapBeforeFork() {
  pthread_mutex_lock(&g_heap_start);
  // jemalloc's fork handlers lock every one of its mutexes before the fork;
  // after it the parent unlocks them and the child re-initialises them and
  // forgets the other threads' caches: some 30 pages written on each side,
  // copied, at every fork. When no thread but this one has entered the heap,
  // and this one is not inside it (a signal handler's fork), no thread can
  // hold a mutex nor have a cache, and the child's heap is already what the
  // handlers would make it: they are skipped. A thread entering the heap
  // meanwhile waits for g_heap_start, held across the fork.
  const bool run = g_heap_users > (t_heap_user ? 1u : 0u) || t_in_private_heap;
  if (g_fork_runs_heap_handlers != run) g_fork_runs_heap_handlers = run;
  if (!run) {
    if (t_heap_user && g_heap_started.load(std::memory_order_relaxed)) WarmThreadCache();
    return;
  }
  if (const ForkHandler prefork = g_heap_prefork.load(std::memory_order_acquire)) prefork();
}

void PrivateHeapAfterForkInParent() {
  if (g_fork_runs_heap_handlers) {
    if (const ForkHandler parent = g_heap_postfork_parent.load(std::memory_order_acquire)) parent();
  }
  pthread_mutex_unlock(&g_heap_start);
}

void PrivateHeapAfterForkInChild() {
  if (g_fork_runs_heap_handlers) {
    if (const ForkHandler child = g_heap_postfork_child.load(std::memory_order_acquire)) child();
  }
  // The child's one thread is this one; its process page came zeroed.
  if (t_heap_user) g_heap_users = 1;
}

}  // namespace tcpadvise

// jemalloc registers its fork handlers here rather than with pthread_atfork
// (renamed in its archive: libtcpadvise/CMakeLists.txt). Set up lazily, it
// would otherwise call pthread_atfork from the first tracked socket, where
// it waits for glibc's fork lock, which a fork in another thread holds while
// its handlers wait for g_heap_start.
extern "C" int tcpadvise_jemalloc_atfork(void (*prepare)(), void (*parent)(), void (*child)()) {
  tcpadvise::g_heap_postfork_parent.store(parent, std::memory_order_relaxed);
  tcpadvise::g_heap_postfork_child.store(child, std::memory_order_relaxed);
  tcpadvise::g_heap_prefork.store(prepare, std::memory_order_release);
  return 0;
}

// jemalloc's heap profiler is its only user of libm, and it stays off in the
// shim's heap whatever the application's MALLOC_CONF (meant for the
// application's own jemalloc, if any) says: jemalloc reads this setting after
// the environment's. Its exp, log and round are renamed to these
// (libtcpadvise/CMakeLists.txt), never called, so that the shim does not load
// libm into every process. Its background threads stay off too: they would
// enter the heap unseen by g_heap_users, and a fork must then run
// jemalloc's fork handlers. Nor does it take huge pages where the kernel
// would give them unasked (transparent_hugepage "always": its first extent
// 4 MiB of memory, each fork child's write a huge page split).
extern "C" {
const char* malloc_conf_2_conf_harder = "prof:false,background_thread:false,thp:never";
double tcpadvise_jemalloc_exp(double) { __builtin_trap(); }
double tcpadvise_jemalloc_log(double) { __builtin_trap(); }
double tcpadvise_jemalloc_round(double) { __builtin_trap(); }
}
