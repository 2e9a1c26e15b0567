// ProcessPage: the shim's state that belongs to one process and that a fork
// child starts afresh (the locks held across a fork, the trace's flags, the
// heap's user count, the process's token), in a page the kernel gives each
// fork child zeroed (MADV_WIPEONFORK). A fork child's handler then writes
// none of it to reset it, and the parent's writes after a fork (unlocking,
// closing its copy of the child's connection) copy nothing: a page shared
// with a living child is copied at the first write on either side. Zero is
// each field's fresh state (glibc's PTHREAD_MUTEX_INITIALIZER and
// PTHREAD_RWLOCK_INITIALIZER are zeros).
#ifndef TCPADVISE_PROCESS_PAGE_H_
#define TCPADVISE_PROCESS_PAGE_H_

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <atomic>

namespace tcpadvise {

struct alignas(4096) ProcessPage {
  // The socket table's lock (socket_table.h), one for the process.
  pthread_mutex_t table_mutex;
  std::atomic<int> table_waiting;  // threads in Lock, not yet holding the mutex
  std::atomic<uint64_t> table_acquired;  // times Lock took the mutex
  // Whether the table's per-process part holds a group (socket_table.h:
  // Local): a fork child, whose part starts empty, reads none of it to
  // find its groups.
  bool table_grouped;
  // The trace writer's lock, whether it wrote the final trace, warned, or
  // wrote a trace file (a fork child's final trace then replaces it rather
  // than going to the spool).
  pthread_mutex_t trace_mutex;
  bool trace_final_written;
  bool trace_warned;
  bool trace_file_written;
  // The temporary names this process drew for its traces (trace_writer.cc).
  uint64_t trace_names;
  // The private heap's set-up lock and the threads that entered the heap
  // (private_alloc.cc).
  pthread_mutex_t heap_start;
  unsigned heap_users;
  // Call sites (call_sites.cc): the first writes this process left to its
  // fork tree's samples, and whether it sampled a write itself.
  std::atomic<uint64_t> call_sites_left_to_tree;
  std::atomic<bool> call_sites_sampled;
  // Taken shared by each unwind and exclusively by a fork (call_sites.h:
  // CallSitesBeforeFork): a child never inherits libunwind's locks held.
  pthread_rwlock_t call_sites_unwinding;
  // token names this process among those that share its memory image
  // (ProcessToken); 0 in a fork child until its handler sets it.
  uint64_t token;
  // The snapshot thread's start (runtime.h: OnConnectionTracked): this
  // process's forks, how many it had made at its last accept, whether it
  // listens, and whether it closed, unused, a connection it accepted
  // before a fork (handed it to a fork child, as a PostgreSQL postmaster
  // does). Here, where the parent's writes after a fork copy no page, and a
  // fork child starts with none of them.
  uint32_t forks;
  uint32_t forks_at_accept;
  bool listens;
  bool hands_off_connections;
  // The first bytes of each trace the trace writer renders (under
  // trace_mutex; trace_writer.cc), the rest of this page: a fork child's
  // trace (a PostgreSQL backend's, some 3 KB) goes to a page the child
  // already wrote, not to one more zeroed page of its own.
  char trace_start[3696];
};
// One page, as MADV_WIPEONFORK and the child's fault count assume: a field
// added above takes its room from trace_start.
static_assert(sizeof(ProcessPage) == 4096, "ProcessPage outgrew its page");

extern ProcessPage g_process_page;

// StartProcessPage gives the process its token; called once at start-up.
void StartProcessPage(int pid, uint64_t start);

// AvoidHugePagesInZeroedData asks the kernel for no transparent huge pages
// in the shim's zeroed data (its .bss up to the wiped part, one mapping): where
// it makes every large anonymous mapping's 2 MiB ranges huge pages
// ("always"), the private heap's radix tree (2 MiB there) would make one
// resident in every process under a policy that holds bytes. Once, with the
// first tracked socket; fork children inherit it. Nothing in a build without
// preload/child_layout.ld, which marks the mapping's ends.
void AvoidHugePagesInZeroedData();

// WipeProcessPageOnFork asks the kernel to zero the page in every fork
// child, from the first tracked socket on (a process that tracks none makes
// no call for it); until then, or without MADV_WIPEONFORK (Linux before
// 4.14), the child's handler zeroes it (ResetProcessPageInChild).
void WipeProcessPageOnFork();

// ProcessPageWipedByKernel tells whether the kernel zeroes the page in fork
// children (MADV_WIPEONFORK took).
bool ProcessPageWipedByKernel();

// KeepWipedOnFork has the kernel copy [start, start + length), which it
// zeroes in fork children while *wiped, into the next one, and
// WipeAgainAfterFork has it zeroed again: a fork from a signal handler that
// interrupted the shim, whose child goes on with the section the handler
// interrupted and must find the memory that section was changing as it
// was. KeepWipedOnFork runs before that fork (false: the memory was not
// wiped, or another thread's such fork keeps it), WipeAgainAfterFork on
// both sides after it with what it returned. Meanwhile *wiped is false: a
// child that another thread's fork made zeroes the memory itself.
bool KeepWipedOnFork(std::atomic<bool>* wiped, void* start, size_t length);
void WipeAgainAfterFork(std::atomic<bool>* wiped, bool kept, void* start, size_t length);

// KeepProcessPageOnFork and WipeProcessPageAgainAfterFork do so for the
// process page.
bool KeepProcessPageOnFork();
void WipeProcessPageAgainAfterFork(bool kept);

// HeldByThread tells whether thread tid holds m: glibc records a mutex's
// owner for every kind of mutex (in a fork child, the owner's id in the
// parent).
inline bool HeldByThread(const pthread_mutex_t& m, pid_t tid) { return m.__data.__lock != 0 && m.__data.__owner == tid; }

// ReleaseOtherThreadsLocksInChild, in the child of such a fork, frees the
// page's locks that a thread other than tid (the forking thread's id in
// the parent) held: only the forking thread lives on in the child, and it
// gives back the locks it holds as its section ends.
void ReleaseOtherThreadsLocksInChild(pid_t tid);

// ResetProcessPageInChild runs first in a fork child's handler: the page is
// zero (by the kernel, or here), and the child's token is set (from its pid
// and its start: a time, or a tick count).
void ResetProcessPageInChild(int pid, uint64_t start);

// ProcessToken is this process's token: a socket entry tracked under another
// one was inherited through fork (SocketState::owner).
inline uint64_t ProcessToken() { return g_process_page.token; }

}  // namespace tcpadvise

#endif  // TCPADVISE_PROCESS_PAGE_H_
