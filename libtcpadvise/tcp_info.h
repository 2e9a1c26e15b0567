// TcpInfoSummary: the fields of the kernel's struct tcp_info that the advisor
// uses, read at close and at each snapshot, and summed over a group.
#ifndef TCPADVISE_TCP_INFO_H_
#define TCPADVISE_TCP_INFO_H_

#include <stdint.h>

namespace tcpadvise {

// TcpInfoSummary holds counters (summed when groups merge), rtt sums (averaged
// in the trace) and gauges (the last connection's value).
struct TcpInfoSummary {
  uint64_t samples = 0;
  uint64_t rtt_us_sum = 0;
  uint64_t rttvar_us_sum = 0;
  uint64_t total_retrans = 0;
  uint64_t segs_out = 0;
  uint64_t data_segs_out = 0;
  uint64_t busy_time_us = 0;
  uint64_t rwnd_limited_us = 0;
  uint64_t sndbuf_limited_us = 0;
  uint32_t snd_mss = 0;
  uint32_t snd_cwnd = 0;
  uint64_t delivery_rate = 0;
  uint32_t notsent_bytes = 0;
  // SIOCOUTQ: bytes in the send queue, sent but unacknowledged or not yet
  // sent, a gauge of the send buffer's occupancy.
  uint32_t outq_bytes = 0;

  // TcpInfoSummary::MergeFrom sums counters and keeps the newer gauges.
  void MergeFrom(const TcpInfoSummary& other);
};

// ReadTcpInfo fills a one-sample summary from getsockopt(TCP_INFO); false when
// the kernel refuses (the fd is gone or not TCP). errno is preserved.
bool ReadTcpInfo(int fd, TcpInfoSummary* out);

// KernelOptions are the effective socket options read back from the kernel.
struct KernelOptions {
  bool valid = false;
  bool nodelay = false;
  bool cork = false;
  int sndbuf = 0;
  int rcvbuf = 0;
};

// ReadKernelOptions reads TCP_NODELAY, TCP_CORK, SO_SNDBUF and SO_RCVBUF.
// errno is preserved.
bool ReadKernelOptions(int fd, KernelOptions* out);

}  // namespace tcpadvise

#endif  // TCPADVISE_TCP_INFO_H_
