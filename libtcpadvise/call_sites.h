// CallSites: which code in the program writes to each socket. A tracked
// socket's first writes, then one in a power of two, have their call stack
// taken with libunwind's local unwinder; stacks are deduplicated by the hash
// of their return addresses and counted (writes, bytes, how many opened a
// burst) per stack and per socket. The trace names each frame by module
// (path, build-id, load base) and offset, for the CLI to symbolise offline.
//
// Nothing here locks or allocates: both tables are fixed arrays claimed with
// compare-and-swap, so a signal handler's write can be sampled too, and a
// full table only counts what it drops. libunwind is dlopen'ed RTLD_LOCAL
// (Debian's static archive is not PIC, so it cannot be linked into the
// shim; loaded globally its _Unwind_* and backtrace symbols would replace
// libgcc's and glibc's for the whole process). Without it call sites are
// off, with one warning in the trace.
#ifndef TCPADVISE_CALL_SITES_H_
#define TCPADVISE_CALL_SITES_H_

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <atomic>

namespace tcpadvise {

class JsonWriter;
struct SocketState;

enum class CallSiteMode : uint8_t { kOff, kSample, kAll };

// CallSiteSettings come from TCPADVISE_CALL_SITES (off, sample, all),
// TCPADVISE_CALL_SITES_FIRST (writes always sampled per socket) and
// TCPADVISE_CALL_SITES_EVERY (then one write in this many, a power of two).
struct CallSiteSettings {
  CallSiteMode mode = CallSiteMode::kSample;
  // A sampled write costs some 2-3 us with libunwind's caches warm (nginx's
  // writev, 24 frames: 16.6k instructions, 14.6k of them libunwind's;
  // every write sampled cost nginx 2.3 us a request more), more when cold.
  // One in 1024 past a socket's first 4 costs a one-write server under 0.05%
  // of its CPU; one in 256 cost nginx 65 instructions a request, a fifth of
  // the shim's own.
  uint64_t first = 4;
  uint64_t every = 1024;
};

// t_unwinding is set while this thread is inside libunwind. libunwind 1.6.2
// checks each address it reads along a chain of frame pointers by writing
// one byte from it into a pipe of its own (pipe2 once, then read and
// syscall(SYS_write) per check), and blocks every signal around each frame
// it steps (sigprocmask). A program that closes every fd (closefrom) gets
// the pipe's numbers back for its own files and sockets, and the masks would
// be system calls in the program's threads. So libunwind's own calls of
// these four go to the shim's answers (call_sites.cc, LoadUnwinder), which
// touch no fd and no mask while the flag is set: pipe2 fails (EMFILE), so
// libunwind has no pipe; read finds it empty (EAGAIN); the write tells
// whether the byte is readable (process_vm_readv), as the kernel would;
// sigprocmask works on a mask of the thread's own. Calls of the program's,
// a signal handler's among them, reach the hooks as ever.
extern __thread bool t_unwinding;

// ParseCallSiteSettings reads the environment's values (nullptr when unset);
// a bad value keeps its default and sets *warning.
CallSiteSettings ParseCallSiteSettings(const char* mode, const char* first, const char* every, const char** warning);

// g_call_site_first and g_call_site_threshold decide on the hot path: the
// n-th write of a socket (n from 1) is sampled when n <= first, or when
// n * kCallSiteScramble <= threshold (2^64 / every - 1): one write in every,
// spread so that no period of the program's own (header, body, header...)
// is always the one sampled, as n % every would be. Off: first 0,
// threshold 0 (never: n * an odd number is not 0). In sample mode both
// move with the pace of sampling (call_sites.cc: Pace), so they are atomic
// (relaxed: a plain load on the hot path).
extern std::atomic<uint64_t> g_call_site_first;
extern std::atomic<uint64_t> g_call_site_threshold;
constexpr uint64_t kCallSiteScramble = 0x9e3779b97f4a7c15ull;

// CallSiteDue is the hot path's test, on the socket's write count.
[[gnu::always_inline]] inline bool CallSiteDue(uint64_t write_calls) {
  return __builtin_expect(write_calls <= g_call_site_first.load(std::memory_order_relaxed) ||
                              write_calls * kCallSiteScramble <= g_call_site_threshold.load(std::memory_order_relaxed),
                          0);
}

// CallSitesStart reads the settings. Sampling starts with the first tracked
// socket (CallSitesOnSocketTracked) and libunwind is loaded only at the
// first write sampled: a process that never opens a socket, a shell loop's
// or a CGI's, does not pay for it (a dlopen of libunwind, and a first
// unwind), nor does a fork-per-connection server's parent, which never
// writes, pay for its mappings at each fork. On failure call sites stay off
// and the trace says why.
void CallSitesStart();

// CallSitesOnSocketTracked starts sampling the first time a socket is
// tracked in process (the runtime's pid: a vfork child, which is not, leaves
// it to its parent); later calls return at once.
void CallSitesOnSocketTracked(pid_t process);

// CallSitesConfigure applies settings with a given unwinder (tests pass
// their own); unwind nullptr turns sampling off.
using UnwindFn = int (*)(void** frames, int max);
void CallSitesConfigure(const CallSiteSettings& settings, UnwindFn unwind);

// kTreeFirstSlots: the counts a process tree's fork children share of the
// first writes they sampled (CallSitesShareTree).
constexpr uint32_t kTreeFirstSlots = 256;

// CallSitesShareTree hands the fork children to come the kTreeFirstSlots
// counts their tree shares (memory mapped shared, which they inherit: the
// trace spool's header); nullptr: none, each child samples its own first
// writes.
void CallSitesShareTree(std::atomic<uint32_t>* counts);

// SampleCallSite records the stack of the calling write, the socket's
// write-th, on the socket with cookie; bytes were written; first tells the
// write opened a burst. A process other than the one that started sampling
// (its fork children) takes a socket's first writes as its process tree's
// count for the socket's service (role and service port) allows.
[[gnu::noinline]] void SampleCallSite(uint64_t cookie, uint32_t service, pid_t process, uint64_t write, uint64_t bytes,
                                      bool first);

// CallSitesBeforeFork waits for the unwinds under way and keeps new ones
// from starting until CallSitesAfterForkInParent: libunwind takes locks of
// its own inside an unwind, which a fork child would inherit held by a
// thread it does not have, and wait for forever at its first unwind. An
// unwind never waits for a fork: a write sampled meanwhile is dropped. The
// child's lock is free (process_page.h). A signal handler that forks inside
// its own thread's unwind takes no lock, and the child samples nothing more
// (CallSitesAfterForkInChild).
void CallSitesBeforeFork();
void CallSitesAfterForkInParent();
void CallSitesAfterForkInChild();

// CallSitesAfterForkInsideShim is the fork child's handler when the fork
// came from a signal handler that interrupted the shim (the runtime's
// handlers took nothing): the child samples no more, and its forks take no
// fork lock.
void CallSitesAfterForkInsideShim();

// CallSiteBurstEnded tells that the socket's write-th write (a sampled one:
// CallSiteDue(write)) was the last of its burst: the next one opened a burst.
[[gnu::noinline]] void CallSiteBurstEnded(uint64_t cookie, uint64_t write);

// CallSitesFold moves a closed socket's counts to the group it is folded
// into (group: that group's entry, which lives as long as the process).
void CallSitesFold(uint64_t cookie, const SocketState* group);

// CallSitesPrepare snapshots the loaded modules (dl_iterate_phdr) for the
// next EmitCallSites, unless none was loaded or unloaded since the last
// snapshot (taken first when sampling starts, inherited by fork children);
// called with the trace writer's lock and without the socket table's lock, which a
// thread inside dlopen may wait for.
void CallSitesPrepare();

// EmitCallSites writes the trace's top-level "call_sites" object: how it
// was sampled, the modules and the distinct stacks.
void EmitCallSites(JsonWriter* w);

// EmitSocketCallSites writes a socket's (or group's) "call_sites" list:
// stack index, writes, bytes, first_of_burst. Nothing when it has none.
void EmitSocketCallSites(JsonWriter* w, const SocketState& s, bool open);

// CallSitesResetForTest empties the tables.
void CallSitesResetForTest();

}  // namespace tcpadvise

#endif  // TCPADVISE_CALL_SITES_H_
