#include "cork.h"

#include <netinet/in.h>
#include <netinet/tcp.h>

#include "clock.h"
#include "errno_saver.h"
#include "held_set.h"
#include "real_libc.h"

namespace tcpadvise {
namespace {

int SetCork(int fd, int value) { return Real(g_real.setsockopt)(fd, IPPROTO_TCP, TCP_CORK, &value, sizeof(value)); }

}  // namespace

void StartCork(PolicyState* p, int fd) {
  if (p->corked.load(std::memory_order_relaxed) || p->app_corks || !HeldSetHasRoom(p)) return;
  ErrnoSaver errno_saver;
  if (SetCork(fd, 1) != 0) return;
  p->cork_start = ReadTicks();
  p->corked.store(true, std::memory_order_relaxed);
  CountersOf(p).corks.Increment();
  AddToHeldSet(p);
}

void Uncork(PolicyState* p, int fd, FlushCause cause) {
  ErrnoSaver errno_saver;
  // A corked burst's later writes skip the policy: the adaptive rule learns
  // their number here, before the read that ends the burst.
  const uint64_t burst_writes = p->socket->stats.burst_open_writes.Get();
  if (burst_writes > p->shape.burst_writes) p->shape.burst_writes = static_cast<uint32_t>(burst_writes);
  SetCork(fd, 0);
  p->corked.store(false, std::memory_order_relaxed);
  NoteReleased(p, cause, p->cork_start);
}

}  // namespace tcpadvise
