#include "call_sites.h"

#include <dlfcn.h>
#include <errno.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

// Only libunwind's types: its functions are looked up in the dlopen'ed library.
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "clock.h"
#include "errno_saver.h"
#include "histogram.h"
#include "import_redirect.h"
#include "json_writer.h"
#include "parse_count.h"
#include "process_page.h"
#include "raw_log.h"
#include "reentry.h"
#include "socket_state.h"
#include "trace_writer.h"

namespace tcpadvise {

std::atomic<uint64_t> g_call_site_first{0};
std::atomic<uint64_t> g_call_site_threshold{0};
__thread bool t_unwinding = false;

namespace {

// t_sampling: this thread is inside SampleCallSite's unwind (the fork lock
// held shared); t_forked_while_sampling: a signal handler that interrupted
// it forked (CallSitesBeforeFork).
__thread bool t_sampling = false;
__thread bool t_forked_while_sampling = false;
// g_fork_lock_unusable: this process is the child of a fork from a signal
// handler inside the shim (CallSitesAfterForkInsideShim), which may have
// interrupted this thread taking or giving back the fork lock: the child
// resumes that on its own, fresh, copy of the lock, which it then never
// uses again.
bool g_fork_lock_unusable = false;

// kMaxFrames bounds a stack; kMaxStacks and kMaxPairs cap the memory (the
// tables are twice as large, so that probes stay short).
constexpr int kMaxFrames = 24;
constexpr uint32_t kMaxStacks = 512;
constexpr uint32_t kStackSlots = kMaxStacks * 2;
constexpr uint32_t kMaxPairs = 2048;
constexpr uint32_t kPairSlots = kMaxPairs * 2;

// kSizeBuckets: distinct write-size buckets (histogram.h's) a stack keeps;
// sizes in other buckets are counted as unbucketed (count, sum, min and max
// stay exact). A call site writes a few sizes, mostly one.
constexpr int kSizeBuckets = 8;

// SizeBucket is one bucket of a stack's write sizes; key is the bucket's
// index + 1 (0: free), claimed with compare-and-swap.
struct SizeBucket {
  std::atomic<uint32_t> key;
  std::atomic<uint64_t> count;
};

// StackSlot is one distinct stack; key 0 is a free slot. The frames are
// written once by the thread that claims the slot, then ready is set.
// last counts sampled writes known to have ended their burst (the next
// write on the socket opened one), alone those that were first too.
struct StackSlot {
  std::atomic<uint64_t> key;
  std::atomic<uint32_t> ready;
  uint32_t depth;
  uintptr_t frames[kMaxFrames];
  std::atomic<uint64_t> writes;
  std::atomic<uint64_t> bytes;
  std::atomic<uint64_t> first;
  std::atomic<uint64_t> estimated;        // the writes each sample stands for, added up
  std::atomic<uint64_t> estimated_bytes;
  std::atomic<uint64_t> last;
  std::atomic<uint64_t> alone;
  std::atomic<uint64_t> min_inverted;  // ~min, so that 0 is empty
  std::atomic<uint64_t> max;
  std::atomic<uint64_t> unbucketed;
  SizeBucket sizes[kSizeBuckets];
};

// LastSample is a socket's last sampled write: its number on the socket
// (write_calls), its stack and whether it opened its burst. Placed by the
// hash of the cookie, a newer socket's replaces it; read when the socket's
// next write opens a burst (CallSiteBurstEnded).
constexpr uint32_t kLastSlots = 1024;
struct LastSample {
  std::atomic<uint64_t> cookie;
  std::atomic<uint64_t> write;  // write number << 1 | opened its burst
  std::atomic<uint32_t> stack;
};
LastSample g_last[kLastSlots];

// PairSlot counts one stack's writes on one socket; group is set when the
// socket closes and is folded into a group. The pairs are dense, handed out
// in order (g_pairs_claimed), so that a process with few sockets touches few
// of their pages (each socket has a pair: 72 B, where a slot of a table
// spread by hash cost a 4 KiB page each for the first few hundred sockets);
// g_pair_index finds them.
struct PairSlot {
  std::atomic<uint64_t> key;
  std::atomic<uint64_t> cookie;
  std::atomic<uint32_t> stack;
  std::atomic<uint32_t> ready;
  std::atomic<const SocketState*> group;
  std::atomic<uint64_t> writes;
  std::atomic<uint64_t> bytes;
  std::atomic<uint64_t> first;
  std::atomic<uint64_t> estimated;
  std::atomic<uint64_t> estimated_bytes;
};

StackSlot g_stacks[kStackSlots];
PairSlot g_pairs[kMaxPairs];
// g_pair_index is the pairs' open-addressed index, placed by the hash of the
// cookie alone (a socket's pairs sit in one run before a free slot): a
// pair's number in g_pairs + 1, 0 for a free slot; published with a
// compare-and-swap once the pair's key is written.
std::atomic<uint16_t> g_pair_index[kPairSlots];
static_assert(kMaxPairs < 0xffff, "a pair's number + 1 fits the index");
// g_pairs_claimed counts the pairs handed out (one a racing thread took but
// did not publish stays unused); g_pair_count those published.
std::atomic<uint32_t> g_pairs_claimed{0};
// g_stack_order lists the claimed stack slots (slot + 1; 0 while its claimer
// has not written it yet) in the order they were claimed: the trace walks
// these few instead of the whole table, which a forked process that sampled
// a handful of writes would otherwise fault in at exit (the pairs are dense
// and in claim order already).
std::atomic<uint32_t> g_stack_order[kStackSlots];
std::atomic<uint32_t> g_stack_claims{0};
std::atomic<uint32_t> g_stack_count{0};
std::atomic<uint32_t> g_pair_count{0};
std::atomic<uint64_t> g_sampled{0};
std::atomic<uint64_t> g_dropped{0};         // writes whose stack or pair found the table full, or sampled during a fork or another thread's load of libunwind
std::atomic<uint64_t> g_unwind_failed{0};   // writes whose unwinding gave no frame
// The first writes a fork child left to its tree's samples are counted in
// its process page (g_process_page.call_sites_left_to_tree): a child's
// count is its own, and counting it copies no page of its parent's.

// g_tree_firsts lets the processes a sampling process forks share one count
// of the first writes they sampled, per service and write number. A fork-per-
// connection server's child (PostgreSQL's backend) starts with libunwind's
// caches as cold as its parent's, which never wrote: unwinding its first
// writes cost it about 85 lookups of a frame's unwind table (dl_iterate_phdr
// over every module, with signals blocked around each), about 7% of what a
// pgbench -C connection costs the server. Its siblings' first writes come
// from the same code, so the tree samples them from kTreeFirst children's
// sockets of a service, then from one socket in every_now, each standing
// for that many. The counts are the trace spool's (CallSitesShareTree): the
// page each child writes anyway, and no mapping of their own for every fork
// and exit to copy and tear down.
constexpr uint32_t kTreeFirst = 16;
std::atomic<uint32_t>* g_tree_firsts = nullptr;
// g_sampling_pid started sampling; the processes it forks (any other pid
// that has it) share g_tree_firsts. A pid, not a flag set at fork: writing
// one would copy a page of the parent's into every child.
pid_t g_sampling_pid = 0;

CallSiteSettings g_settings{CallSiteMode::kOff, 0, 0};

// Pace keeps sampling's cost bounded (sample mode): sampled writes are
// counted per window of 100 ms; a window with more than kWindowBudget
// halves the rate at once (every doubles, up to kMaxEvery; at kMaxEvery a
// socket's first writes are no longer always taken), and a window with
// under a quarter of it doubles the rate back towards the setting. Each
// sample counts for the writes it stands for at its rate (estimated), so
// counts scale honestly across changes of rate.
constexpr uint64_t kWindowNs = 100000000;
// kWindowBudget: 500 a second, at 2.5 to 5 us an unwind 0.12 to 0.25% of one
// CPU (2000 until session 14: up to 1%, the whole of issue 16's goal for the
// shim, spent on call sites alone by a server that opens connections fast).
constexpr uint64_t kWindowBudget = 50;
constexpr uint64_t kMaxEvery = uint64_t{1} << 20;
std::atomic<uint64_t> g_every_now{0};
std::atomic<uint64_t> g_every_max{0};
std::atomic<uint64_t> g_window_start{0};
std::atomic<uint64_t> g_window_samples{0};
std::atomic<uint64_t> g_slowdowns{0};
// g_unwind is published last (release) by CallSitesConfigure, which another
// thread may run while this one writes: whoever loads it (acquire) then sees
// g_settings and the shim's code range. g_configured does the same for the
// trace writer, which also needs g_problem.
std::atomic<UnwindFn> g_unwind{nullptr};
std::atomic<bool> g_configured{false};
const char* g_problem = nullptr;  // why call sites are off, for the trace
// g_self_lo..g_self_hi is the shim's code: its frames are not the program's.
uintptr_t g_self_lo = 0, g_self_hi = 0;

// kMaxModules bounds the module snapshot the trace is written from.
constexpr int kMaxModules = 256;
constexpr int kMaxSegments = 8;
struct Module {
  char path[256];
  char build_id[41];
  uintptr_t base;
  const ElfW(Phdr) * phdr;  // its program headers: the build id is read only for a module a stack uses
  int phnum;
  int segments;
  uintptr_t lo[kMaxSegments], hi[kMaxSegments];
};
Module g_modules[kMaxModules];
int g_module_count = 0;
// g_stack_index maps a stack slot to its index in the trace's list + 1 (0:
// not in it, as every slot is before the first trace: a forked server's
// child that sampled nothing writes no page of it).
int32_t g_stack_index[kStackSlots];
bool g_module_used[kMaxModules];

// g_unw holds libunwind's local unwinding functions. unw_backtrace's fast
// path walks frames from a cache without checking that the memory it reads
// is mapped: under ThreadSanitizer it crashed on a thread's frame (a read at
// a small address). Stepping with unw_step falls back to the frame chain
// only with that check, so a bad frame ends the stack instead.
struct Unwinder {
  int (*getcontext)(unw_context_t*);
  int (*init_local)(unw_cursor_t*, unw_context_t*);
  int (*step)(unw_cursor_t*);
  int (*get_reg)(unw_cursor_t*, unw_regnum_t, unw_word_t*);
};
Unwinder g_unw;

// t_unwinder_mask is the mask libunwind believes it sets (UnwinderSigprocmask):
// signals 1 to 64, a sigset_t's first word, all the kernel reads and writes
// of one (glibc passes it 8 bytes).
__thread unsigned long t_unwinder_mask;
static_assert(NSIG - 1 <= 8 * sizeof(t_unwinder_mask), "a mask's signals fit in its first word");

// g_block_signals: the program loaded libunwind itself, so a handler of its
// may unwind with it and wait on the lock an interrupted unwind of ours
// holds; unwinds then run with the signals blocked (see InsideLibunwind).
bool g_block_signals = false;

// BlockAllButFaults blocks every signal in this thread but those a fault
// raises, which must stay deliverable; *old keeps the mask it had.
void BlockAllButFaults(sigset_t* old) {
  sigset_t block;
  sigfillset(&block);
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP}) sigdelset(&block, sig);
  pthread_sigmask(SIG_BLOCK, &block, old);
}

// InsideLibunwind marks this thread as inside libunwind for its scope
// (t_unwinding). Where libunwind is the shim's alone, it blocks no signal:
// the unblocking would be a system call in the program's thread, and one
// that makes the kernel hand this thread a signal pending for the process,
// which it had meant for a thread that was free to take it (a Python
// program's main thread, waiting on a lock for SIGINT, waits for ever).
class InsideLibunwind {
 public:
  InsideLibunwind() {
    if (__builtin_expect(g_block_signals, 0)) BlockAllButFaults(&old_);
    t_unwinding = true;
  }
  ~InsideLibunwind() {
    t_unwinding = false;
    if (__builtin_expect(g_block_signals, 0)) pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  InsideLibunwind(const InsideLibunwind&) = delete;
  InsideLibunwind& operator=(const InsideLibunwind&) = delete;

 private:
  ErrnoSaver errno_saver_;
  sigset_t old_;
};

// StepUnwind fills frames with the return addresses of its caller's stack,
// the caller's own first, as unw_backtrace does.
int StepUnwind(void** frames, int max) {
  InsideLibunwind inside;
  unw_context_t context;
  unw_cursor_t cursor;
  if (g_unw.getcontext(&context) != 0 || g_unw.init_local(&cursor, &context) != 0) return 0;
  int n = 0;
  while (n < max && g_unw.step(&cursor) > 0) {
    unw_word_t ip = 0;
    if (g_unw.get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0) break;
    frames[n++] = reinterpret_cast<void*>(ip);
  }
  return n;
}

uint64_t Mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

// ClaimStack finds or adds the stack; -1 when the table is full.
int ClaimStack(uint64_t key, const uintptr_t* frames, int depth) {
  for (uint32_t i = 0; i < kStackSlots; ++i) {
    StackSlot& slot = g_stacks[(key + i) % kStackSlots];
    uint64_t seen = slot.key.load(std::memory_order_acquire);
    if (seen == 0) {
      if (g_stack_count.load(std::memory_order_relaxed) >= kMaxStacks) return -1;
      if (slot.key.compare_exchange_strong(seen, key, std::memory_order_acq_rel)) {
        g_stack_count.fetch_add(1, std::memory_order_relaxed);
        memcpy(slot.frames, frames, sizeof(uintptr_t) * static_cast<size_t>(depth));
        slot.depth = static_cast<uint32_t>(depth);
        slot.ready.store(1, std::memory_order_release);
        const uint32_t index = (key + i) % kStackSlots;
        // Every claim takes one free slot of the table: the list never overflows.
        g_stack_order[g_stack_claims.fetch_add(1, std::memory_order_relaxed)].store(index + 1,
                                                                                    std::memory_order_release);
        return static_cast<int>(index);
      }
    }
    if (seen == key) return static_cast<int>((key + i) % kStackSlots);
  }
  return -1;
}

// SetEvery samples one write in every past a socket's first ones.
void SetEvery(uint64_t every) {
  g_every_now.store(every, std::memory_order_relaxed);
  if (every > g_every_max.load(std::memory_order_relaxed)) g_every_max.store(every, std::memory_order_relaxed);
  g_call_site_threshold.store(~uint64_t{0} / every, std::memory_order_relaxed);
  g_call_site_first.store(every >= kMaxEvery ? 0 : g_settings.first, std::memory_order_relaxed);
}

void Pace() {
  const uint64_t samples = g_window_samples.fetch_add(1, std::memory_order_relaxed) + 1;
  const uint64_t now = MonotonicNs();
  uint64_t start = g_window_start.load(std::memory_order_relaxed);
  const bool ended = now - start >= kWindowNs;
  if (!ended && samples <= kWindowBudget) return;
  if (!g_window_start.compare_exchange_strong(start, now, std::memory_order_relaxed)) return;
  g_window_samples.store(0, std::memory_order_relaxed);
  const uint64_t every = g_every_now.load(std::memory_order_relaxed);
  if (!ended) {
    g_slowdowns.fetch_add(1, std::memory_order_relaxed);
    if (every < kMaxEvery) SetEvery(every * 2);
  } else if (samples < kWindowBudget / 4 && every > g_settings.every) {
    SetEvery(every / 2);
  }
}

// RecordSize counts one write of bytes in the stack's sizes.
void RecordSize(StackSlot& s, uint64_t bytes) {
  for (uint64_t seen = s.min_inverted.load(std::memory_order_relaxed); ~bytes > seen;) {
    if (s.min_inverted.compare_exchange_weak(seen, ~bytes, std::memory_order_relaxed)) break;
  }
  for (uint64_t seen = s.max.load(std::memory_order_relaxed); bytes > seen;) {
    if (s.max.compare_exchange_weak(seen, bytes, std::memory_order_relaxed)) break;
  }
  const uint32_t key = static_cast<uint32_t>(HistogramBucketOf(bytes)) + 1;
  for (SizeBucket& b : s.sizes) {
    uint32_t seen = b.key.load(std::memory_order_acquire);
    if (seen == 0 && b.key.compare_exchange_strong(seen, key, std::memory_order_acq_rel)) seen = key;
    if (seen == key) {
      b.count.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  s.unbucketed.fetch_add(1, std::memory_order_relaxed);
}

// ClaimPair finds or adds the (cookie, stack) pair; nullptr when full.
PairSlot* ClaimPair(uint64_t cookie, uint32_t stack) {
  const uint64_t key = Mix(cookie * 0x9e3779b97f4a7c15ull + stack) | 1;
  const uint64_t home = Mix(cookie);
  uint32_t fresh = kMaxPairs;  // a pair taken for key, not yet published
  for (uint32_t i = 0; i < kPairSlots; ++i) {
    std::atomic<uint16_t>& slot = g_pair_index[(home + i) % kPairSlots];
    uint16_t seen = slot.load(std::memory_order_acquire);
    if (seen == 0) {
      if (fresh == kMaxPairs) {
        if (g_pairs_claimed.load(std::memory_order_relaxed) >= kMaxPairs) return nullptr;
        fresh = g_pairs_claimed.fetch_add(1, std::memory_order_relaxed);
        if (fresh >= kMaxPairs) return nullptr;
        PairSlot& p = g_pairs[fresh];
        p.key.store(key, std::memory_order_relaxed);
        p.cookie.store(cookie, std::memory_order_relaxed);
        p.stack.store(stack, std::memory_order_relaxed);
      }
      if (slot.compare_exchange_strong(seen, static_cast<uint16_t>(fresh + 1), std::memory_order_acq_rel)) {
        g_pair_count.fetch_add(1, std::memory_order_relaxed);
        g_pairs[fresh].ready.store(1, std::memory_order_release);
        return &g_pairs[fresh];
      }
      // Another thread published a pair here first: seen is its number.
    }
    const PairSlot& p = g_pairs[seen - 1];
    if (p.key.load(std::memory_order_acquire) == key && p.group.load(std::memory_order_relaxed) == nullptr) {
      return const_cast<PairSlot*>(&p);
    }
  }
  return nullptr;
}

const char* ModeName(CallSiteMode mode) {
  switch (mode) {
    case CallSiteMode::kOff:
      return "off";
    case CallSiteMode::kSample:
      return "sample";
    case CallSiteMode::kAll:
      return "all";
  }
  return "off";
}

// FindSelf finds the shim's own executable segment.
int FindSelf(dl_phdr_info* info, size_t, void*) {
  const uintptr_t self = reinterpret_cast<uintptr_t>(&SampleCallSite);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& p = info->dlpi_phdr[i];
    if (p.p_type != PT_LOAD) continue;
    const uintptr_t lo = info->dlpi_addr + p.p_vaddr, hi = lo + p.p_memsz;
    if (self >= lo && self < hi) {
      g_self_lo = lo;
      g_self_hi = hi;
      return 1;
    }
  }
  return 0;
}

// BuildId reads the module's NT_GNU_BUILD_ID note as hex, if it has one.
void BuildId(const Module& m, char* out) {
  out[0] = '\0';
  for (int i = 0; i < m.phnum; ++i) {
    const ElfW(Phdr)& p = m.phdr[i];
    if (p.p_type != PT_NOTE) continue;
    const char* at = reinterpret_cast<const char*>(m.base + p.p_vaddr);
    const char* end = at + p.p_memsz;
    while (at + sizeof(ElfW(Nhdr)) <= end) {
      const auto* note = reinterpret_cast<const ElfW(Nhdr)*>(at);
      const char* name = at + sizeof(ElfW(Nhdr));
      const char* desc = name + ((note->n_namesz + 3) & ~3u);
      const char* next = desc + ((note->n_descsz + 3) & ~3u);
      if (next > end) break;
      if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 && memcmp(name, "GNU", 4) == 0 &&
          note->n_descsz <= 20) {
        static const char kHex[] = "0123456789abcdef";
        for (uint32_t b = 0; b < note->n_descsz; ++b) {
          out[2 * b] = kHex[static_cast<unsigned char>(desc[b]) >> 4];
          out[2 * b + 1] = kHex[static_cast<unsigned char>(desc[b]) & 15];
        }
        out[2 * note->n_descsz] = '\0';
        return;
      }
      at = next;
    }
  }
}

int AddModule(dl_phdr_info* info, size_t, void*) {
  if (g_module_count >= kMaxModules) return 1;
  Module& m = g_modules[g_module_count];
  m.segments = 0;
  for (int i = 0; i < info->dlpi_phnum && m.segments < kMaxSegments; ++i) {
    const ElfW(Phdr)& p = info->dlpi_phdr[i];
    if (p.p_type != PT_LOAD || (p.p_flags & PF_X) == 0) continue;
    m.lo[m.segments] = info->dlpi_addr + p.p_vaddr;
    m.hi[m.segments] = m.lo[m.segments] + p.p_memsz;
    ++m.segments;
  }
  if (m.segments == 0) return 0;
  m.base = info->dlpi_addr;
  m.path[0] = '\0';
  if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0') {
    strncpy(m.path, info->dlpi_name, sizeof(m.path) - 1);
    m.path[sizeof(m.path) - 1] = '\0';
  } else if (g_module_count == 0) {  // the executable comes first, unnamed
    const ssize_t n = readlink("/proc/self/exe", m.path, sizeof(m.path) - 1);
    m.path[n > 0 ? n : 0] = '\0';
  }
  m.phdr = info->dlpi_phdr;
  m.phnum = info->dlpi_phnum;
  m.build_id[0] = '\0';
  ++g_module_count;
  return 0;
}

// g_modules holds the modules as they were when the loader's counts of
// loads and unloads were g_modules_adds and g_modules_subs.
bool g_modules_valid = false;
unsigned long long g_modules_adds = 0, g_modules_subs = 0;

// LoaderCounts reads the loader's counts of loads and unloads (the first
// module's dl_phdr_info carries them) and stops there.
int LoaderCounts(dl_phdr_info* info, size_t size, void* counts) {
  auto* out = static_cast<unsigned long long*>(counts);
  if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
    out[0] = info->dlpi_adds;
    out[1] = info->dlpi_subs;
  }
  return 1;
}

// TakeModuleSnapshot fills g_modules, unless no module was loaded or
// unloaded since it last did.
void TakeModuleSnapshot() {
  unsigned long long counts[2] = {~0ull, ~0ull};
  dl_iterate_phdr(LoaderCounts, counts);
  if (g_modules_valid && counts[0] == g_modules_adds && counts[1] == g_modules_subs && counts[0] != ~0ull) return;
  g_module_count = 0;
  dl_iterate_phdr(AddModule, nullptr);
  g_modules_adds = counts[0];
  g_modules_subs = counts[1];
  g_modules_valid = true;
}

// ModuleOf finds the module whose code holds pc; -1 when none does (JIT).
int ModuleOf(uintptr_t pc) {
  for (int i = 0; i < g_module_count; ++i) {
    for (int s = 0; s < g_modules[i].segments; ++s) {
      if (pc >= g_modules[i].lo[s] && pc < g_modules[i].hi[s]) return i;
    }
  }
  return -1;
}

void EmitCounts(JsonWriter* w, uint64_t writes, uint64_t bytes, uint64_t first, uint64_t estimated,
                uint64_t estimated_bytes) {
  w->Key("writes");
  w->Uint(writes);
  w->Key("bytes");
  w->Uint(bytes);
  w->Key("first_of_burst");
  w->Uint(first);
  w->Key("estimated_writes");
  w->Uint(estimated);
  w->Key("estimated_bytes");
  w->Uint(estimated_bytes);
}

// EmitSizes writes the stack's write sizes as a trace histogram (the
// indexed encoding of EmitHistogram, histogram.h), sizes in buckets it did
// not keep as unbucketed.
void EmitSizes(JsonWriter* w, const StackSlot& s) {
  uint64_t keys[kSizeBuckets], counts[kSizeBuckets];
  int n = 0;
  uint64_t count = s.unbucketed.load(std::memory_order_relaxed);
  for (const SizeBucket& b : s.sizes) {
    const uint32_t key = b.key.load(std::memory_order_acquire);
    const uint64_t c = b.count.load(std::memory_order_relaxed);
    if (key == 0 || c == 0) continue;
    int at = n++;
    for (; at > 0 && keys[at - 1] > key - 1; --at) {
      keys[at] = keys[at - 1];
      counts[at] = counts[at - 1];
    }
    keys[at] = key - 1;
    counts[at] = c;
    count += c;
  }
  w->Key("sizes");
  w->BeginObject();
  w->Key("unit");
  w->String("bytes");
  w->Key("count");
  w->Uint(count);
  w->Key("sum");
  w->Uint(s.bytes.load(std::memory_order_relaxed));
  w->Key("min");
  w->Uint(count == 0 ? 0 : ~s.min_inverted.load(std::memory_order_relaxed));
  w->Key("max");
  w->Uint(s.max.load(std::memory_order_relaxed));
  w->Key("sub_buckets");
  w->Uint(kHistogramSubBuckets);
  w->Key("scale");
  w->Double(1.0);
  if (s.unbucketed.load(std::memory_order_relaxed) != 0) {
    w->Key("unbucketed");
    w->Uint(s.unbucketed.load(std::memory_order_relaxed));
  }
  w->Key("buckets");
  w->BeginArray();
  for (int i = 0; i < n; ++i) {
    w->BeginArray();
    w->Uint(keys[i]);
    w->Uint(counts[i]);
    w->EndArray();
  }
  w->EndArray();
  w->EndObject();
}

void EmitPair(JsonWriter* w, const PairSlot& p) {
  const int32_t index = g_stack_index[p.stack.load(std::memory_order_relaxed) % kStackSlots] - 1;
  if (index < 0) return;
  w->BeginObject();
  w->Key("stack");
  w->Uint(static_cast<uint64_t>(index));
  EmitCounts(w, p.writes.load(std::memory_order_relaxed), p.bytes.load(std::memory_order_relaxed),
             p.first.load(std::memory_order_relaxed), p.estimated.load(std::memory_order_relaxed),
             p.estimated_bytes.load(std::memory_order_relaxed));
  w->EndObject();
}

}  // namespace

namespace {

// libunwind's imports that LoadUnwinder sends here (RedirectImports), and
// their former targets: a program that loads libunwind itself shares the
// shim's copy, and its calls outside the shim's unwinds keep going there.
ssize_t (*g_libunwind_read)(int, void*, size_t);
long (*g_libunwind_syscall)(long, ...);
int (*g_libunwind_pipe2)(int*, int);
int (*g_libunwind_sigprocmask)(int, const sigset_t*, sigset_t*);

// UnwinderRead: libunwind drains its pipe before each check of an address;
// it has none (UnwinderPipe2), and finds it empty.
ssize_t UnwinderRead(int fd, void* buf, size_t n) {
  if (!t_unwinding) return g_libunwind_read(fd, buf, n);
  errno = EAGAIN;
  return -1;
}

// UnwinderSyscall: libunwind checks an address by syscall(SYS_write) of its
// byte into the pipe; the kernel reads the byte, as that write would: not a
// load of ours, which a sanitizer's poisoned stack bytes would stop.
long UnwinderSyscall(long number, ...) {
  va_list ap;
  va_start(ap, number);
  long a[6];
  for (long& arg : a) arg = va_arg(ap, long);
  va_end(ap);
  if (!t_unwinding || number != SYS_write) return g_libunwind_syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
  if (a[2] == 0) return 0;
  char byte;
  iovec local = {&byte, 1};
  iovec remote = {reinterpret_cast<void*>(a[1]), 1};
  if (syscall(SYS_process_vm_readv, getpid(), &local, 1, &remote, 1, 0) != 1) {
    errno = EFAULT;
    return -1;
  }
  return 1;
}

// UnwinderPipe2 refuses libunwind its pipe: no fd of the program's numbers
// is ever libunwind's (a program that closes them all gets them back).
int UnwinderPipe2(int fds[2], int flags) {
  if (!t_unwinding) return g_libunwind_pipe2(fds, flags);
  errno = EMFILE;
  return -1;
}

// kGlibcInternalSignals are SIGCANCEL and SIGSETXID's bits, which glibc's
// sigdelset refuses to clear.
constexpr unsigned long kGlibcInternalSignals = 3ul << 31;

// UnwinderSigprocmask answers libunwind's sigprocmask, two a frame stepped
// (Debian's 1.6.2 locks its cache with every signal blocked, whatever the
// caching policy), from a mask of the thread's own that the kernel never
// sees, on the masks' first words as the kernel does (a whole sigset_t is
// 128 bytes to copy each way). The lock is never waited on by a handler:
// the shim unwinds nothing while this thread unwinds (SampleCallSite).
int UnwinderSigprocmask(int how, const sigset_t* set, sigset_t* old) {
  if (!t_unwinding) return g_libunwind_sigprocmask(how, set, old);
  unsigned long next = t_unwinder_mask;
  if (set != nullptr) {
    switch (how) {
      case SIG_BLOCK:
        next |= set->__val[0];
        break;
      case SIG_UNBLOCK:
        // Like sigdelset, leaves glibc's internal signals alone.
        next &= ~(set->__val[0] & ~kGlibcInternalSignals);
        break;
      case SIG_SETMASK:
        next = set->__val[0];
        break;
      default:
        errno = EINVAL;
        return -1;
    }
  }
  if (old != nullptr) old->__val[0] = t_unwinder_mask;
  t_unwinder_mask = next;
  return 0;
}

}  // namespace

CallSiteSettings ParseCallSiteSettings(const char* mode, const char* first, const char* every, const char** warning) {
  CallSiteSettings s;
  if (mode != nullptr && mode[0] != '\0') {
    if (strcmp(mode, "off") == 0) {
      s.mode = CallSiteMode::kOff;
    } else if (strcmp(mode, "sample") == 0) {
      s.mode = CallSiteMode::kSample;
    } else if (strcmp(mode, "all") == 0) {
      s.mode = CallSiteMode::kAll;
    } else {
      *warning = "TCPADVISE_CALL_SITES must be off, sample or all; using sample";
    }
  }
  if (first != nullptr && first[0] != '\0' && !ParseCount(first, 1u << 20, &s.first)) {
    *warning = "TCPADVISE_CALL_SITES_FIRST must be a count from 0 to 1048576; using 4";
  }
  if (every != nullptr && every[0] != '\0' && !ParsePowerOfTwo(every, 1u << 20, &s.every)) {
    *warning = "TCPADVISE_CALL_SITES_EVERY must be a power of two from 1 to 1048576; using 1024";
  }
  return s;
}

void CallSitesConfigure(const CallSiteSettings& settings, UnwindFn unwind) {
  g_settings = settings;
  g_every_max.store(0, std::memory_order_relaxed);
  g_slowdowns.store(0, std::memory_order_relaxed);
  g_window_start.store(MonotonicNs(), std::memory_order_relaxed);
  g_window_samples.store(0, std::memory_order_relaxed);
  if (unwind == nullptr || settings.mode == CallSiteMode::kOff) {
    g_settings.mode = CallSiteMode::kOff;
    g_every_now.store(0, std::memory_order_relaxed);
    g_call_site_first.store(0, std::memory_order_relaxed);
    g_call_site_threshold.store(0, std::memory_order_relaxed);
  } else if (settings.mode == CallSiteMode::kAll || settings.every == 1) {
    g_settings.mode = CallSiteMode::kAll;
    g_every_now.store(1, std::memory_order_relaxed);
    g_call_site_first.store(0, std::memory_order_relaxed);
    g_call_site_threshold.store(~uint64_t{0}, std::memory_order_relaxed);
  } else {
    SetEvery(settings.every);
    if (g_sampling_pid == 0) g_sampling_pid = getpid();
  }
  g_unwind.store(unwind, std::memory_order_release);
  g_configured.store(true, std::memory_order_release);
}

namespace {

// The unwinder's start: wanted once CallSitesStart found sampling on;
// sampling starts with the first tracked socket (CallSitesOnSocketTracked),
// with LoadThenUnwind as the unwinder; the first write sampled loads
// libunwind (taken). A fork-per-connection server's parent, which accepts
// and never writes, then never maps it: libunwind's five segments, its
// zeroed data and the module snapshot's pages would cost every fork and
// exit of a child some 12 us (bench/fork_child_costs.c, vmas), where only
// the few children that sample need it (a service's first kTreeFirst, then
// one in every_now). A process that loaded it hands it to its children.
constexpr int kUnwinderNotWanted = 0;
constexpr int kUnwinderWanted = 1;
constexpr int kUnwinderStarted = 2;
constexpr int kUnwinderTaken = 3;
std::atomic<int> g_unwinder_state{kUnwinderNotWanted};
CallSiteSettings g_wanted_settings;

// LoadUnwinder loads libunwind; its unwinder, or nullptr.
UnwindFn LoadUnwinder() {
  // RTLD_LOCAL: libunwind's backtrace and _Unwind_* stay out of the
  // process's symbol scope (glibc's backtrace, libgcc's exceptions).
  void* loaded = dlopen("libunwind.so.8", RTLD_NOW | RTLD_NOLOAD);
  if (loaded != nullptr) dlclose(loaded);
  g_block_signals = loaded != nullptr;
  void* handle = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  // libunwind's own calls of these reach the shim's answers, not its hooks:
  // a signal handler that interrupts an unwind then makes its calls as itself.
  ImportRedirect redirects[] = {
      {"read", reinterpret_cast<void*>(UnwinderRead), reinterpret_cast<void**>(&g_libunwind_read)},
      {"syscall", reinterpret_cast<void*>(UnwinderSyscall), reinterpret_cast<void**>(&g_libunwind_syscall)},
      {"pipe2", reinterpret_cast<void*>(UnwinderPipe2), reinterpret_cast<void**>(&g_libunwind_pipe2)},
      {"sigprocmask", reinterpret_cast<void*>(UnwinderSigprocmask), reinterpret_cast<void**>(&g_libunwind_sigprocmask)},
  };
  if (handle != nullptr && RedirectImports(handle, redirects, sizeof(redirects) / sizeof(redirects[0]))) {
    g_unw.getcontext = reinterpret_cast<decltype(g_unw.getcontext)>(dlsym(handle, "_Ux86_64_getcontext"));
    g_unw.init_local = reinterpret_cast<decltype(g_unw.init_local)>(dlsym(handle, "_ULx86_64_init_local"));
    g_unw.step = reinterpret_cast<decltype(g_unw.step)>(dlsym(handle, "_ULx86_64_step"));
    g_unw.get_reg = reinterpret_cast<decltype(g_unw.get_reg)>(dlsym(handle, "_ULx86_64_get_reg"));
  }
  const bool found = g_unw.getcontext != nullptr && g_unw.init_local != nullptr && g_unw.step != nullptr &&
                     g_unw.get_reg != nullptr;
  if (!found) {
    if (handle != nullptr) dlclose(handle);
    return nullptr;
  }
  // A cache per thread where libunwind was built with them: the global one
  // takes a lock around each step, with every signal blocked (Debian's
  // 1.6.2 does that under either policy; UnwinderSigprocmask answers the
  // two sigprocmask calls a frame without the kernel).
  using SetCachingPolicy = int (*)(unw_addr_space_t, unw_caching_policy_t);
  auto set_caching_policy = reinterpret_cast<SetCachingPolicy>(dlsym(handle, "_ULx86_64_set_caching_policy"));
  auto* local_space = static_cast<unw_addr_space_t*>(dlsym(handle, "_ULx86_64_local_addr_space"));
  if (set_caching_policy != nullptr && local_space != nullptr) {
    InsideLibunwind inside;  // its set-up (the pipe) runs here
    set_caching_policy(*local_space, UNW_CACHE_PER_THREAD);
  }
  dl_iterate_phdr(FindSelf, nullptr);
  // The modules now, in the process that loads it: its fork children
  // inherit them, and reread them only when a module was loaded or unloaded
  // since (each module's headers are pages a child would otherwise fault in
  // to write its trace). The trace writer's lock keeps g_modules its own,
  // as when it writes (and keeps a fork from copying a snapshot half taken).
  LockTraceWriter();
  TakeModuleSnapshot();
  UnlockTraceWriter();
  return StepUnwind;
}

// LoadThenUnwind is the unwinder until libunwind is loaded: the first
// thread to sample loads it, under SampleCallSite's read lock (no fork
// copies a load half done) with every signal blocked (no handler of this
// thread forks or samples inside it), then publishes StepUnwind and takes
// its sample. libunwind sets itself up lazily on its first unwind, which is
// that thread's: the others drop their samples (-1) until it is published.
// A fork in another thread waits for the load in its prepare handler,
// holding glibc's fork-handler lock: neither libunwind nor liblzma
// registers fork handlers from a constructor, which would wait for it.
int LoadThenUnwind(void** frames, int max) {
  ErrnoSaver errno_saver;  // the loader's searches set errno
  int started = kUnwinderStarted;
  if (!g_unwinder_state.compare_exchange_strong(started, kUnwinderTaken, std::memory_order_acq_rel)) return -1;
  UnwindFn unwind;
  {
    sigset_t old;
    BlockAllButFaults(&old);
    unwind = LoadUnwinder();
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }
  if (unwind == nullptr) {
    g_call_site_first.store(0, std::memory_order_relaxed);
    g_call_site_threshold.store(0, std::memory_order_relaxed);
    LockTraceWriter();
    g_problem = "libunwind.so.8 could not be loaded, or its calls redirected; call sites were not sampled";
    UnlockTraceWriter();
    g_unwind.store(nullptr, std::memory_order_release);
    RawWarning("%s", g_problem);
    return -1;
  }
  g_unwind.store(unwind, std::memory_order_release);
  return unwind(frames, max);
}

}  // namespace

void CallSitesStart() {
  const char* warning = nullptr;
  const CallSiteSettings settings =
      ParseCallSiteSettings(secure_getenv("TCPADVISE_CALL_SITES"), secure_getenv("TCPADVISE_CALL_SITES_FIRST"),
                            secure_getenv("TCPADVISE_CALL_SITES_EVERY"), &warning);
  if (warning != nullptr) RawWarning("%s", warning);
  if (settings.mode == CallSiteMode::kOff) return;
  g_wanted_settings = settings;
  g_unwinder_state.store(kUnwinderWanted, std::memory_order_release);
}

void CallSitesOnSocketTracked(pid_t process) {
  int wanted = kUnwinderWanted;
  if (g_unwinder_state.load(std::memory_order_acquire) != kUnwinderWanted) return;
  // A vfork child shares its parent's memory (and is not the process the
  // runtime knows): the parent starts it.
  if (getpid() != process) return;
  if (!g_unwinder_state.compare_exchange_strong(wanted, kUnwinderStarted, std::memory_order_acq_rel)) return;
  CallSitesConfigure(g_wanted_settings, LoadThenUnwind);
}

void CallSitesShareTree(std::atomic<uint32_t>* counts) { g_tree_firsts = counts; }

void SampleCallSite(uint64_t cookie, uint32_t service, pid_t process, uint64_t write, uint64_t bytes, bool first) {
  const UnwindFn unwind = g_unwind.load(std::memory_order_acquire);
  // A write of a signal handler that interrupted this thread's unwind:
  // libunwind's lock may be held.
  if (unwind == nullptr || t_sampling) return;
  // A socket's first writes stand for themselves; the others, and first
  // writes taken for a process tree, for as many as the interval then.
  bool for_itself = write <= g_call_site_first.load(std::memory_order_relaxed);
  if (for_itself && g_tree_firsts != nullptr && g_settings.mode == CallSiteMode::kSample && process != g_sampling_pid) {
    const uint32_t slot = static_cast<uint32_t>(Mix(uint64_t{service} << 32 ^ write) % kTreeFirstSlots);
    const uint32_t before = g_tree_firsts[slot].fetch_add(1, std::memory_order_relaxed);
    if (before >= kTreeFirst) {
      if (uint64_t{before} * kCallSiteScramble > g_call_site_threshold.load(std::memory_order_relaxed)) {
        g_process_page.call_sites_left_to_tree.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      for_itself = false;
    }
  }
  g_sampled.fetch_add(1, std::memory_order_relaxed);
  if (!g_process_page.call_sites_sampled.load(std::memory_order_relaxed)) {
    g_process_page.call_sites_sampled.store(true, std::memory_order_relaxed);
  }
  if (g_settings.mode == CallSiteMode::kSample) Pace();
  const uint64_t weight = for_itself ? 1 : g_every_now.load(std::memory_order_relaxed);
  // A vfork child shares its parent's memory: it loads nothing into it (the
  // one system call only where the sample is taken, before the load). Nor
  // does a signal handler: it may have interrupted the shim (the trace
  // writer's lock may be this thread's) or the loader, whose lock the
  // unwinder takes. Asked here, before the fork lock's shim section.
  if (__builtin_expect(unwind == LoadThenUnwind, 0) &&
      (Reentered() || InApplicationSignalHandler() || getpid() != process)) {
    g_dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  void* raw[kMaxFrames + 8];
  int n;
  {
    // The fork lock is taken, held and given back inside a shim section: a
    // signal handler that forks on this thread anywhere in between (inside
    // pthread_rwlock_unlock too, where t_sampling no longer said so: CI's
    // sigfork hung there) finds it Reentered, and the runtime's fork handlers
    // then take nothing (runtime.cc, t_fork_inside_shim).
    ShimSection section;
    if (pthread_rwlock_tryrdlock(&g_process_page.call_sites_unwinding) != 0) {  // a fork is under way
      g_dropped.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    t_sampling = true;
    n = unwind(raw, kMaxFrames + 8);
    t_sampling = false;
    if (__builtin_expect(t_forked_while_sampling, 0)) {
      t_forked_while_sampling = false;  // a fork child's lock was never taken
    } else {
      pthread_rwlock_unlock(&g_process_page.call_sites_unwinding);
    }
  }
  if (n < 0) {  // another thread is loading libunwind, or it could not be loaded
    g_dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  int skip = 0;
  while (skip < n && reinterpret_cast<uintptr_t>(raw[skip]) >= g_self_lo &&
         reinterpret_cast<uintptr_t>(raw[skip]) < g_self_hi) {
    ++skip;
  }
  const int depth = n - skip < kMaxFrames ? n - skip : kMaxFrames;
  if (depth <= 0) {
    g_unwind_failed.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  uintptr_t frames[kMaxFrames];
  uint64_t key = 0x84222325cbf29ce4ull;
  for (int i = 0; i < depth; ++i) {
    frames[i] = reinterpret_cast<uintptr_t>(raw[skip + i]);
    key = Mix(key ^ frames[i]);
  }
  key |= 1;
  const int stack = ClaimStack(key, frames, depth);
  if (stack < 0) {
    g_dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  StackSlot& s = g_stacks[stack];
  s.writes.fetch_add(1, std::memory_order_relaxed);
  s.bytes.fetch_add(bytes, std::memory_order_relaxed);
  s.estimated.fetch_add(weight, std::memory_order_relaxed);
  s.estimated_bytes.fetch_add(weight * bytes, std::memory_order_relaxed);
  if (first) s.first.fetch_add(1, std::memory_order_relaxed);
  RecordSize(s, bytes);
  LastSample& last = g_last[Mix(cookie) % kLastSlots];
  last.cookie.store(cookie, std::memory_order_relaxed);
  last.stack.store(static_cast<uint32_t>(stack), std::memory_order_relaxed);
  last.write.store(write << 1 | (first ? 1 : 0), std::memory_order_release);
  PairSlot* p = ClaimPair(cookie, static_cast<uint32_t>(stack));
  if (p == nullptr) {
    g_dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  p->writes.fetch_add(1, std::memory_order_relaxed);
  p->bytes.fetch_add(bytes, std::memory_order_relaxed);
  p->estimated.fetch_add(weight, std::memory_order_relaxed);
  p->estimated_bytes.fetch_add(weight * bytes, std::memory_order_relaxed);
  if (first) p->first.fetch_add(1, std::memory_order_relaxed);
}

void CallSitesBeforeFork() {
  if (g_fork_lock_unusable) return;
  // A signal handler forks inside this thread's unwind, which holds the lock
  // shared: waiting for it would be for ever. The child, which another
  // thread's unwind may leave holding libunwind's locks, samples nothing.
  // (The runtime's handlers do not come here then: the unwind is a shim
  // section. These are for a caller that registers them alone.)
  if (t_sampling) {
    t_forked_while_sampling = true;
    return;
  }
  pthread_rwlock_wrlock(&g_process_page.call_sites_unwinding);
}

void CallSitesAfterForkInParent() {
  if (g_fork_lock_unusable) return;
  if (t_forked_while_sampling) {
    t_forked_while_sampling = false;
    return;
  }
  pthread_rwlock_unlock(&g_process_page.call_sites_unwinding);
}

void CallSitesAfterForkInChild() {
  if (!t_forked_while_sampling) return;
  g_problem = "the process forked from a signal handler inside an unwind; call sites were not sampled after";
  g_unwind.store(nullptr, std::memory_order_release);
}

void CallSitesAfterForkInsideShim() {
  g_problem = "the process forked from a signal handler inside the shim; call sites were not sampled after";
  g_unwind.store(nullptr, std::memory_order_release);
  g_fork_lock_unusable = true;
}

void CallSiteBurstEnded(uint64_t cookie, uint64_t write) {
  // A process that sampled no write (a fork child that left its first
  // writes to its tree) has no last sample of its own to look up.
  if (!g_process_page.call_sites_sampled.load(std::memory_order_relaxed)) return;
  LastSample& last = g_last[Mix(cookie) % kLastSlots];
  const uint64_t seen = last.write.load(std::memory_order_acquire);
  if (seen >> 1 != write || last.cookie.load(std::memory_order_relaxed) != cookie) return;
  StackSlot& s = g_stacks[last.stack.load(std::memory_order_relaxed) % kStackSlots];
  s.last.fetch_add(1, std::memory_order_relaxed);
  if ((seen & 1) != 0) s.alone.fetch_add(1, std::memory_order_relaxed);
}

void CallSitesFold(uint64_t cookie, const SocketState* group) {
  if (g_pair_count.load(std::memory_order_relaxed) == 0 || cookie == 0) return;
  const uint64_t home = Mix(cookie);
  for (uint32_t i = 0; i < kPairSlots; ++i) {
    const uint16_t number = g_pair_index[(home + i) % kPairSlots].load(std::memory_order_acquire);
    if (number == 0) return;
    PairSlot& slot = g_pairs[number - 1];
    if (slot.ready.load(std::memory_order_acquire) != 0 && slot.cookie.load(std::memory_order_relaxed) == cookie &&
        slot.group.load(std::memory_order_relaxed) == nullptr) {
      slot.group.store(group, std::memory_order_relaxed);
    }
  }
}

void CallSitesPrepare() {
  if (g_stack_count.load(std::memory_order_relaxed) == 0) return;
  TakeModuleSnapshot();
}

// EmitStacks writes the modules and stacks of the first `claims` slots claimed;
// out of line: its tables (5 KiB of stack) would reach a stack page that a
// fork child which sampled nothing (most PostgreSQL backends) never touched.
[[gnu::noinline]] static void EmitStacks(JsonWriter* w, uint32_t claims) {
  // Only the entries in use are reset, here where they are used: a forked
  // server's child that sampled nothing writes no page of these tables.
  for (int i = 0; i < g_module_count; ++i) g_module_used[i] = false;
  // The slots claimed so far, in claim order; one still being written is left out.
  uint32_t claimed[kStackSlots];
  uint32_t n_claimed = 0;
  for (uint32_t c = 0; c < claims && c < kStackSlots; ++c) {
    const uint32_t entry = g_stack_order[c].load(std::memory_order_acquire);
    if (entry != 0) g_stack_index[entry - 1] = 0;  // numbered by the last trace, perhaps not listed now
    if (entry == 0 || g_stacks[entry - 1].ready.load(std::memory_order_acquire) == 0) continue;
    claimed[n_claimed++] = entry - 1;
    const StackSlot& s = g_stacks[entry - 1];
    for (uint32_t f = 0; f < s.depth; ++f) {
      const int m = ModuleOf(s.frames[f]);
      if (m >= 0) g_module_used[m] = true;
    }
  }
  int32_t module_index[kMaxModules];
  w->Key("modules");
  w->BeginArray();
  int32_t next = 0;
  for (int i = 0; i < g_module_count; ++i) {
    module_index[i] = -1;
    if (!g_module_used[i]) continue;
    module_index[i] = next++;
    BuildId(g_modules[i], g_modules[i].build_id);
    w->BeginObject();
    w->Key("path");
    w->String(g_modules[i].path);
    if (g_modules[i].build_id[0] != '\0') {
      w->Key("build_id");
      w->String(g_modules[i].build_id);
    }
    w->Key("base");
    w->Uint(g_modules[i].base);
    w->EndObject();
  }
  w->EndArray();
  w->Key("stacks");
  w->BeginArray();
  int32_t stacks = 0;
  for (uint32_t c = 0; c < n_claimed; ++c) {
    const uint32_t i = claimed[c];
    const StackSlot& s = g_stacks[i];
    g_stack_index[i] = ++stacks;
    w->BeginObject();
    // frames: [module index, offset from its load base] each, the caller
    // of the write first; [-1, address] where no module holds the code.
    w->Key("frames");
    w->BeginArray();
    for (uint32_t f = 0; f < s.depth; ++f) {
      const int m = ModuleOf(s.frames[f]);
      w->BeginArray();
      w->Int(m >= 0 ? module_index[m] : -1);
      w->Uint(m >= 0 ? s.frames[f] - g_modules[m].base : s.frames[f]);
      w->EndArray();
    }
    w->EndArray();
    EmitCounts(w, s.writes.load(std::memory_order_relaxed), s.bytes.load(std::memory_order_relaxed),
               s.first.load(std::memory_order_relaxed), s.estimated.load(std::memory_order_relaxed),
               s.estimated_bytes.load(std::memory_order_relaxed));
    w->Key("last_of_burst");
    w->Uint(s.last.load(std::memory_order_relaxed));
    w->Key("alone_in_burst");
    w->Uint(s.alone.load(std::memory_order_relaxed));
    EmitSizes(w, s);
    w->EndObject();
  }
  w->EndArray();
}

void EmitCallSites(JsonWriter* w) {
  if (!g_configured.load(std::memory_order_acquire) || (g_settings.mode == CallSiteMode::kOff && g_problem == nullptr)) {
    w->Key("call_sites");
    w->BeginObject();
    w->Key("mode");
    w->String("off");
    w->EndObject();
    return;
  }
  const uint32_t claims = g_stack_claims.load(std::memory_order_relaxed);
  w->Key("call_sites");
  w->BeginObject();
  w->Key("mode");
  w->String(ModeName(g_settings.mode));
  w->Key("first");
  w->Uint(g_settings.mode == CallSiteMode::kSample ? g_settings.first : 0);
  w->Key("every");
  w->Uint(g_settings.mode == CallSiteMode::kSample ? g_settings.every : 1);
  w->Key("every_max");
  w->Uint(g_settings.mode == CallSiteMode::kSample ? g_every_max.load(std::memory_order_relaxed) : 1);
  w->Key("every_now");
  w->Uint(g_settings.mode == CallSiteMode::kSample ? g_every_now.load(std::memory_order_relaxed) : 1);
  w->Key("slowdowns");
  w->Uint(g_slowdowns.load(std::memory_order_relaxed));
  w->Key("budget_per_second");
  w->Uint(kWindowBudget * (1000000000 / kWindowNs));
  w->Key("unwinder");
  w->String("libunwind");
  if (g_problem != nullptr) {
    w->Key("problem");
    w->String(g_problem);
  }
  w->Key("sampled_writes");
  w->Uint(g_sampled.load(std::memory_order_relaxed));
  w->Key("dropped_writes");
  w->Uint(g_dropped.load(std::memory_order_relaxed));
  w->Key("unwind_failures");
  w->Uint(g_unwind_failed.load(std::memory_order_relaxed));
  w->Key("left_to_tree");
  w->Uint(g_process_page.call_sites_left_to_tree.load(std::memory_order_relaxed));
  w->Key("max_stacks");
  w->Uint(kMaxStacks);
  w->Key("memory_bytes");
  w->Uint(sizeof(g_stacks) + sizeof(g_pairs) + sizeof(g_pair_index) + sizeof(g_last));
  w->Key("stack_bytes");
  w->Uint(sizeof(StackSlot));
  if (claims == 0) {
    w->Key("modules");
    w->BeginArray();
    w->EndArray();
    w->Key("stacks");
    w->BeginArray();
    w->EndArray();
  } else {
    EmitStacks(w, claims);
  }
  w->EndObject();
}

void EmitSocketCallSites(JsonWriter* w, const SocketState& s, bool open) {
  if (g_pair_count.load(std::memory_order_relaxed) == 0) return;
  bool any = false;
  auto emit = [&](const PairSlot& p) {
    if (!any) {
      w->Key("call_sites");
      w->BeginArray();
      any = true;
    }
    EmitPair(w, p);
  };
  if (open) {
    const uint64_t home = Mix(s.id.cookie);
    for (uint32_t i = 0; i < kPairSlots; ++i) {
      const uint16_t number = g_pair_index[(home + i) % kPairSlots].load(std::memory_order_acquire);
      if (number == 0) break;
      const PairSlot& p = g_pairs[number - 1];
      if (p.ready.load(std::memory_order_acquire) != 0 && p.cookie.load(std::memory_order_relaxed) == s.id.cookie &&
          p.group.load(std::memory_order_relaxed) == nullptr) {
        emit(p);
      }
    }
  } else {
    const uint32_t claimed = std::min(g_pairs_claimed.load(std::memory_order_relaxed), kMaxPairs);
    for (uint32_t i = 0; i < claimed; ++i) {
      const PairSlot& p = g_pairs[i];
      if (p.ready.load(std::memory_order_acquire) != 0 && p.group.load(std::memory_order_relaxed) == &s) emit(p);
    }
  }
  if (any) w->EndArray();
}

void CallSitesResetForTest() {
  for (StackSlot& s : g_stacks) {
    s.key.store(0);
    s.ready.store(0);
    s.writes.store(0);
    s.bytes.store(0);
    s.first.store(0);
    s.estimated.store(0);
    s.estimated_bytes.store(0);
    s.last.store(0);
    s.alone.store(0);
    s.min_inverted.store(0);
    s.max.store(0);
    s.unbucketed.store(0);
    for (SizeBucket& b : s.sizes) {
      b.key.store(0);
      b.count.store(0);
    }
  }
  for (LastSample& l : g_last) {
    l.cookie.store(0);
    l.write.store(0);
  }
  // Only the pairs handed out were written.
  for (uint32_t i = 0; i < std::min(g_pairs_claimed.load(), kMaxPairs); ++i) {
    PairSlot& p = g_pairs[i];
    p.key.store(0);
    p.ready.store(0);
    p.group.store(nullptr);
    p.writes.store(0);
    p.bytes.store(0);
    p.first.store(0);
    p.estimated.store(0);
    p.estimated_bytes.store(0);
  }
  for (std::atomic<uint16_t>& number : g_pair_index) number.store(0);
  g_pairs_claimed.store(0);
  for (auto& entry : g_stack_order) entry.store(0);
  for (int32_t& index : g_stack_index) index = 0;
  g_stack_claims.store(0);
  g_stack_count.store(0);
  g_pair_count.store(0);
  g_sampled.store(0);
  g_dropped.store(0);
  g_unwind_failed.store(0);
  g_process_page.call_sites_left_to_tree.store(0);
  g_process_page.call_sites_sampled.store(false);
  g_sampling_pid = getpid();
  if (g_tree_firsts != nullptr) {
    for (uint32_t slot = 0; slot < kTreeFirstSlots; ++slot) g_tree_firsts[slot].store(0);
  }
}

}  // namespace tcpadvise
