#include "tcp_info.h"

#include <linux/tcp.h>
#include <netinet/in.h>
#include <stddef.h>
#include <string.h>
#include <linux/sockios.h>
#include <linux/sock_diag.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "errno_saver.h"

namespace tcpadvise {

void TcpInfoSummary::MergeFrom(const TcpInfoSummary& other) {
  if (other.samples == 0) return;
  samples += other.samples;
  rtt_us_sum += other.rtt_us_sum;
  rttvar_us_sum += other.rttvar_us_sum;
  total_retrans += other.total_retrans;
  segs_out += other.segs_out;
  data_segs_out += other.data_segs_out;
  busy_time_us += other.busy_time_us;
  rwnd_limited_us += other.rwnd_limited_us;
  sndbuf_limited_us += other.sndbuf_limited_us;
  snd_mss = other.snd_mss;
  snd_cwnd = other.snd_cwnd;
  delivery_rate = other.delivery_rate;
  notsent_bytes = other.notsent_bytes;
  outq_bytes = other.outq_bytes;
}

// Has tells whether the kernel filled a field: older kernels return a
// shorter struct tcp_info.
#define TCPADVISE_HAS(len, field) ((len) >= offsetof(struct tcp_info, field) + sizeof(((struct tcp_info*)0)->field))

// SendQueueMayHoldBytes tells whether SIOCOUTQ could read more than 0 (the
// bytes written and not yet acknowledged, write_seq - snd_una): not on a
// listener (the ioctl fails), and not on a connection whose retransmit queue
// is empty (tcpi_unacked, packets_out: nothing sent is unacknowledged) with
// nothing left to send (tcpi_notsent_bytes, write_seq - snd_nxt), in the
// states where the kernel keeps that queue (a reset connection's counters
// stay behind as it empties it). A connection at rest, a server's at its
// exit, then costs one system call less.
static bool SendQueueMayHoldBytes(const struct tcp_info& info, socklen_t len) {
  // The kernel's states (net/tcp_states.h; linux/tcp.h has no names for them).
  constexpr uint8_t kEstablished = 1, kFinWait2 = 5, kCloseWait = 8, kListen = 10;
  if (info.tcpi_state == kListen) return false;
  if (!TCPADVISE_HAS(len, tcpi_notsent_bytes)) return true;
  const bool live = info.tcpi_state == kEstablished || info.tcpi_state == kCloseWait || info.tcpi_state == kFinWait2;
  return !live || info.tcpi_unacked != 0 || info.tcpi_notsent_bytes != 0;
}

bool ReadTcpInfo(int fd, TcpInfoSummary* out) {
  ErrnoSaver errno_saver;
  struct tcp_info info;
  memset(&info, 0, sizeof(info));
  socklen_t len = sizeof(info);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return false;
  *out = TcpInfoSummary();
  out->samples = 1;
  out->rtt_us_sum = info.tcpi_rtt;
  out->rttvar_us_sum = info.tcpi_rttvar;
  out->total_retrans = info.tcpi_total_retrans;
  out->snd_mss = info.tcpi_snd_mss;
  out->snd_cwnd = info.tcpi_snd_cwnd;
  if (TCPADVISE_HAS(len, tcpi_segs_out)) out->segs_out = info.tcpi_segs_out;
  if (TCPADVISE_HAS(len, tcpi_data_segs_out)) out->data_segs_out = info.tcpi_data_segs_out;
  if (TCPADVISE_HAS(len, tcpi_busy_time)) out->busy_time_us = info.tcpi_busy_time;
  if (TCPADVISE_HAS(len, tcpi_rwnd_limited)) out->rwnd_limited_us = info.tcpi_rwnd_limited;
  if (TCPADVISE_HAS(len, tcpi_sndbuf_limited)) out->sndbuf_limited_us = info.tcpi_sndbuf_limited;
  if (TCPADVISE_HAS(len, tcpi_delivery_rate)) out->delivery_rate = info.tcpi_delivery_rate;
  if (TCPADVISE_HAS(len, tcpi_notsent_bytes)) out->notsent_bytes = info.tcpi_notsent_bytes;
  if (SendQueueMayHoldBytes(info, len)) {
    // The system call itself: ioctl is wrapped.
    int outq = 0;
    if (syscall(SYS_ioctl, fd, SIOCOUTQ, &outq) == 0 && outq > 0) out->outq_bytes = static_cast<uint32_t>(outq);
  }
  return true;
}

#undef TCPADVISE_HAS

static bool ReadIntOption(int fd, int level, int name, int* value) {
  socklen_t len = sizeof(*value);
  return getsockopt(fd, level, name, value, &len) == 0;
}

// ReadBuffers reads the socket's SO_SNDBUF and SO_RCVBUF in one call when
// the kernel has SO_MEMINFO (4.12 on): the same sk_sndbuf and sk_rcvbuf.
static bool ReadBuffers(int fd, int* sndbuf, int* rcvbuf) {
  uint32_t meminfo[SK_MEMINFO_VARS] = {};
  socklen_t len = sizeof(meminfo);
  if (getsockopt(fd, SOL_SOCKET, SO_MEMINFO, meminfo, &len) == 0 && len > SK_MEMINFO_SNDBUF * sizeof(uint32_t)) {
    *sndbuf = static_cast<int>(meminfo[SK_MEMINFO_SNDBUF]);
    *rcvbuf = static_cast<int>(meminfo[SK_MEMINFO_RCVBUF]);
    return true;
  }
  return ReadIntOption(fd, SOL_SOCKET, SO_SNDBUF, sndbuf) && ReadIntOption(fd, SOL_SOCKET, SO_RCVBUF, rcvbuf);
}

bool ReadKernelOptions(int fd, KernelOptions* out) {
  ErrnoSaver errno_saver;
  int nodelay = 0, cork = 0;
  KernelOptions o;
  o.valid = ReadIntOption(fd, IPPROTO_TCP, TCP_NODELAY, &nodelay) &&
            ReadIntOption(fd, IPPROTO_TCP, TCP_CORK, &cork) && ReadBuffers(fd, &o.sndbuf, &o.rcvbuf);
  if (!o.valid) return false;
  o.nodelay = nodelay != 0;
  o.cork = cork != 0;
  *out = o;
  return true;
}

}  // namespace tcpadvise
