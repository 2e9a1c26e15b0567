#include "trace_writer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/random.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <charconv>

#include "address.h"
#include "call_sites.h"
#include "errno_saver.h"
#include "experiment.h"
#include "json_writer.h"
#include "policy.h"
#include "process_page.h"
#include "raw_log.h"
#include "reentry.h"
#include "real_libc.h"
#include "runtime.h"
#include "socket_table.h"
#include "trace_spool.h"
#include "utf8.h"

namespace tcpadvise {
namespace {

// g_trace_buffer holds a trace while it is written (under g_writer_mutex)
// once it outgrows the process page's room (ProcessPage::trace_start):
// most traces fit, and are written without the private heap. A forked
// child's trace would otherwise take a large block from the heap, which
// writes a dozen pages of jemalloc's metadata, copied, in every child, and
// the snapshot thread stays out of the heap (private_alloc.cc: a fork skips
// jemalloc's fork handlers while one thread uses it). Untouched, it costs a
// process address space only. Page-aligned: a trace of up to 4 KiB writes
// one page of it, not two.
alignas(4096) char g_trace_buffer[16384];

const char* RoleName(Role role) {
  switch (role) {
    case Role::kClient:
      return "client";
    case Role::kServer:
      return "server";
    default:
      return "unknown";
  }
}

// EmitErrnoCounts writes errno slots as {"EPIPE": n, ...}; slot 0, and
// failures the shim had no memory to sort by errno, as "other".
void EmitErrnoCounts(JsonWriter* w, const char* key, const ErrnoCounts& slots) {
  auto name = [](int e) { return e == 0 ? nullptr : strerrorname_np(e); };
  uint64_t other = slots.lost();
  slots.ForEach([&](int e, uint64_t n) { other += name(e) == nullptr ? n : 0; });
  w->KeyString(key);
  w->BeginObject();
  slots.ForEach([&](int e, uint64_t n) {
    if (name(e) == nullptr) return;
    w->KeyString(name(e));
    w->Uint(n);
  });
  if (other != 0) {
    w->Key("other");
    w->Uint(other);
  }
  w->EndObject();
}

// FormatIpv4 writes an IPv4 address in dotted decimal, as inet_ntop does
// through sprintf (a few hundred instructions an address, each trace).
void FormatIpv4(const in_addr& addr, char* out) {
  const unsigned char* b = reinterpret_cast<const unsigned char*>(&addr);
  for (int i = 0; i < 4; ++i) {
    out = std::to_chars(out, out + 3, b[i]).ptr;
    *out++ = i < 3 ? '.' : '\0';
  }
}

void EmitEndpoint(JsonWriter* w, const char* key, const SocketAddress& a) {
  char text[INET6_ADDRSTRLEN] = "";
  if (a.ss_family == AF_INET) {
    FormatIpv4(reinterpret_cast<const sockaddr_in&>(a).sin_addr, text);
  } else if (a.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(a).sin6_addr, text, sizeof(text));
  }
  const uint16_t port = PortOf(a);
  w->KeyString(key);
  w->BeginObject();
  w->Key("addr");
  w->String(text);
  w->Key("port");
  w->Uint(port);
  w->EndObject();
}

// EmitApiCounts writes calls by API (calls(api), kApis of them); calls
// whose API found no room (memory ran out) are "unrecorded".
template <typename Calls>
void EmitApiCounts(JsonWriter* w, int apis, Calls calls, uint64_t lost, const char* (*name)(int)) {
  w->Key("by_api");
  w->BeginObject();
  for (int api = 0; api < apis; ++api) {
    if (const uint64_t n = calls(api); n != 0) {
      w->KeyString(name(api));
      w->Uint(n);
    }
  }
  if (lost != 0) {
    w->Key("unrecorded");
    w->Uint(lost);
  }
  w->EndObject();
}

const char* WriteApiNameAt(int i) { return WriteApiName(static_cast<WriteApi>(i)); }
const char* ReadApiNameAt(int i) { return ReadApiName(static_cast<ReadApi>(i)); }

void EmitTcpInfo(JsonWriter* w, const TcpInfoSummary& t) {
  if (t.samples == 0) return;
  const double n = static_cast<double>(t.samples);
  w->Key("tcp_info");
  w->BeginObject();
  w->Key("samples");
  w->Uint(t.samples);
  w->Key("rtt_us");
  w->Double(static_cast<double>(t.rtt_us_sum) / n);
  w->Key("rttvar_us");
  w->Double(static_cast<double>(t.rttvar_us_sum) / n);
  w->Key("snd_mss");
  w->Uint(t.snd_mss);
  w->Key("snd_cwnd");
  w->Uint(t.snd_cwnd);
  w->Key("total_retrans");
  w->Uint(t.total_retrans);
  w->Key("segs_out");
  w->Uint(t.segs_out);
  w->Key("data_segs_out");
  w->Uint(t.data_segs_out);
  w->Key("busy_time_us");
  w->Uint(t.busy_time_us);
  w->Key("rwnd_limited_us");
  w->Uint(t.rwnd_limited_us);
  w->Key("sndbuf_limited_us");
  w->Uint(t.sndbuf_limited_us);
  w->Key("delivery_rate");
  w->Uint(t.delivery_rate);
  w->Key("notsent_bytes");
  w->Uint(t.notsent_bytes);
  w->Key("outq_bytes");
  w->Uint(t.outq_bytes);
  w->EndObject();
}

// EmitAdaptive writes a cork or coalesce policy's adaptive rule settings.
void EmitAdaptive(JsonWriter* w, const PolicySettings& p) {
  w->Key("adaptive");
  w->Bool(p.adaptive);
  if (!p.adaptive) return;
  w->Key("enter_bursts");
  w->Uint(p.adapt_enter_bursts);
  w->Key("leave_bursts");
  w->Uint(p.adapt_leave_bursts);
}

void EmitPolicy(JsonWriter* w, const SocketState& s, double ns_per_tick) {
  if (s.id.rule < 0 || g_policy_config == nullptr) return;
  const PolicyRule& rule = g_policy_config->rules[s.id.rule];
  const PolicySettings& p = rule.settings;
  // A rule's socket has its counters (AttachPolicy); a group whose counters
  // found no memory reports none.
  static const PolicyCounters kNoCounters;
  const PolicyCounters& c = s.stats.policy_counters() ? *s.stats.policy_counters() : kNoCounters;
  w->Key("policy");
  w->BeginObject();
  w->Key("rule");
  w->String(rule.name);
  w->Key("settings");
  w->BeginObject();
  w->Key("nodelay");
  w->Bool(p.nodelay);
  w->Key("quickack");
  w->Bool(p.quickack);
  if (p.sndbuf) {
    w->Key("sndbuf");
    w->Int(p.sndbuf);
  }
  if (p.rcvbuf) {
    w->Key("rcvbuf");
    w->Int(p.rcvbuf);
  }
  if (p.cork) {
    w->Key("cork");
    w->BeginObject();
    w->Key("max_delay_us");
    w->Uint(p.cork_delay_us);
    EmitAdaptive(w, p);
    w->EndObject();
  }
  if (p.coalesce) {
    w->Key("coalesce");
    w->BeginObject();
    w->Key("max_bytes");
    w->Uint(p.coalesce_max_bytes);
    w->Key("max_delay_us");
    w->Uint(p.coalesce_delay_us);
    EmitAdaptive(w, p);
    w->EndObject();
  }
  w->EndObject();
  w->Key("counters");
  w->BeginObject();
  w->Key("flushes");
  w->BeginObject();
  for (int i = 0; i < static_cast<int>(FlushCause::kCount); ++i) {
    if (c.flushes[i].Get() == 0) continue;
    w->KeyString(FlushCauseName(static_cast<FlushCause>(i)));
    w->Uint(c.flushes[i].Get());
  }
  w->EndObject();
  w->Key("bytes_held");
  w->Uint(c.bytes_held.Get());
  w->Key("max_bytes_held");
  w->Uint(c.max_bytes_held.Get());
  w->Key("longest_hold_ns");
  w->Whole(static_cast<double>(c.longest_hold_ticks.Get()) * ns_per_tick);
  w->Key("corks");
  w->Uint(c.corks.Get());
  if (p.adaptive && (p.cork || p.coalesce)) {
    // How the adaptive rule (adapt.h) treated this socket's bursts.
    w->Key("adaptive");
    w->BeginObject();
    w->Key("bursts_passed_single_write");
    w->Uint(BurstsPassed(s));
    w->Key("bursts_held_multi_write");
    w->Uint(c.bursts_held.Get());
    w->Key("bursts_held_from_second_write");
    w->Uint(c.bursts_pieces.Get());
    w->Key("switches");
    w->Uint(c.adapt_switches.Get());
    w->EndObject();
  }
  EmitErrnoCounts(w, "deferred_errors", c.deferred_errors);
  w->EndObject();
  w->Key("conflicts");
  w->BeginArray();
  const uint64_t conflicts = c.conflicts.Get();
  if (conflicts & kConflictNodelay) w->String("the application set TCP_NODELAY itself; its value stands");
  if (conflicts & kConflictCork) w->String("the application set TCP_CORK itself; its value stands and a cork policy stops corking");
  if (conflicts & kConflictSndbuf) w->String("the application set SO_SNDBUF itself; its value stands");
  if (conflicts & kConflictRcvbuf) w->String("the application set SO_RCVBUF itself; its value stands");
  w->EndArray();
  w->EndObject();
}

// EmitSocket writes one live socket (open) or one group of closed ones.
// now is the trace's time in ticks. A live socket's unfinished burst is
// counted as a burst (a copy of its histograms takes it; the socket's own
// state goes on untouched): a stream still open at exit has one burst.
void EmitSocket(JsonWriter* w, const SocketState& s, bool open, uint64_t now, double ns_per_tick) {
  const SocketStats& st = s.stats;
  w->BeginObject();
  w->Key("kind");
  w->String(open ? "socket" : "group");
  w->Key("connections");
  w->Uint(s.connections);
  w->Key("open");
  w->Bool(open);
  w->Key("cookie");
  w->Uint(s.id.cookie);
  w->Key("inherited");
  w->Bool(s.Inherited());
  w->Key("used");
  w->Bool(st.Active());
  w->Key("shape");
  w->String(ShapeKindName(KindOfShape(open ? ShapeOf(st) : s.id.shape)));
  w->Key("duration_ns");
  w->Whole(static_cast<double>(open ? now - s.opened_ticks : s.lifetime_ticks) * ns_per_tick);
  w->Key("role");
  w->String(RoleName(s.id.role));
  w->Key("family");
  w->String(s.id.local.ss_family == AF_INET6 ? "ipv6" : "ipv4");
  EmitEndpoint(w, "local", s.id.local);
  EmitEndpoint(w, "peer", s.id.peer);
  EmitSocketCallSites(w, s, open);
  w->Key("service_port");
  w->Uint(s.id.ServicePort());

  w->Key("options_set");
  w->BeginObject();
  for (int i = 0; i < static_cast<int>(AppOption::kCount); ++i) {
    if ((s.options_set_mask & (1u << i)) == 0) continue;
    w->KeyString(AppOptionName(static_cast<AppOption>(i)));
    w->Int(s.options_set[i]);
  }
  w->EndObject();
  w->Key("options");
  w->BeginObject();
  w->Key("nonblocking");
  w->Bool(s.nonblocking.load(std::memory_order_relaxed));
  if (s.kernel_options.valid) {
    w->Key("nodelay");
    w->Bool(s.kernel_options.nodelay);
    w->Key("cork");
    w->Bool(s.kernel_options.cork);
    w->Key("sndbuf");
    w->Int(s.kernel_options.sndbuf);
    w->Key("rcvbuf");
    w->Int(s.kernel_options.rcvbuf);
  }
  w->EndObject();

  w->Key("writes");
  w->BeginObject();
  w->Key("calls");
  w->Uint(st.write_calls.Get());
  w->Key("bytes");
  w->Uint(st.write_bytes.Get());
  w->Key("partial");
  w->Uint(st.partial_writes.Get());
  w->Key("eagain");
  w->Uint(st.write_eagain.Get());
  EmitApiCounts(w, static_cast<int>(WriteApi::kCount), [&st](int api) { return st.WriteApiCalls(api); },
                st.write_by_api.lost(), WriteApiNameAt);
  const uint64_t successful_writes = st.write_size.count();
  EmitHistogram(w, "size", "bytes", st.write_size);
  EmitHistogram(w, "iovcnt", "count", st.write_iovcnt, 1.0, successful_writes - st.write_iovcnt.count());
  EmitHistogram(w, "syscall_ns", "ns", st.write_ticks, ns_per_tick);
  // The sampled call times scaled to every call: time spent inside write
  // calls, blocked on a full send buffer for the most part when it is large.
  const HistogramSummary sampled = st.write_ticks.Summary();
  w->Key("syscall_ns_total_est");
  w->Whole(sampled.count == 0 ? 0.0
                              : static_cast<double>(sampled.sum) * ns_per_tick *
                                    static_cast<double>(st.write_calls.Get()) / static_cast<double>(sampled.count));
  EmitHistogram(w, "gap_ns", "ns", st.gap_ticks, ns_per_tick);
  w->EndObject();

  // A live socket's unfinished burst counts as one more burst (with its
  // period's weight: none if not recorded), added as the histograms are
  // written: the socket's own state stays as it is.
  const uint64_t open_writes = open ? st.burst_open_writes.Get() : 0;
  const uint64_t open_burst = open_writes != 0 ? st.PeriodWeight() : 0;
  w->Key("bursts");
  w->BeginObject();
  w->Key("count");
  w->Uint(st.BurstCount() + open_burst);
  w->Key("open");
  w->Bool(open_burst != 0);
  EmitBurstWrites(w, st, open_burst != 0 ? open_writes : 0);
  if (const Histogram& burst_buckets = st.BurstBytesBuckets(); &burst_buckets == &st.burst_bytes) {
    EmitHistogram(w, "bytes", "bytes", st.burst_bytes, 1.0, open_burst, st.burst_open_bytes.Get());
  } else {  // write_size's buckets, which hold the open burst's one write
    EmitHistogramOver(w, "bytes", "bytes", st.burst_bytes, burst_buckets, 1.0, open_burst, st.burst_open_bytes.Get());
  }
  w->EndObject();

  w->Key("turns");
  w->BeginObject();
  w->Key("count");
  const uint64_t turns = st.Turns();
  w->Uint(turns);
  if (const uint64_t recorded = s.turns_recorded.Get(); recorded != turns) {
    // Sampling started (TurnSampling): the histograms hold these turns'
    // periods, weighted.
    w->Key("sampled");
    w->BeginObject();
    w->Key("recorded");
    w->Uint(recorded);
    w->EndObject();
  }
  EmitHistogram(w, "ns", "ns", st.turn_ticks, ns_per_tick);
  EmitHistogramOver(w, "sent_to_reply_ns", "ns", st.sent_to_reply_ticks, st.SentToReplyBuckets(), ns_per_tick);
  w->EndObject();

  w->Key("reads");
  w->BeginObject();
  w->Key("calls");
  w->Uint(st.read_calls.Get());
  w->Key("bytes");
  w->Uint(st.read_bytes.Get());
  EmitApiCounts(w, static_cast<int>(ReadApi::kCount), [&st](int api) { return st.ReadApiCalls(api); },
                st.read_by_api.lost(), ReadApiNameAt);
  EmitHistogram(w, "size", "bytes", st.read_size);
  w->Key("eof");
  w->Uint(st.read_eof.Get());
  w->EndObject();

  EmitErrnoCounts(w, "errors", st.errors);
  EmitTcpInfo(w, s.tcp_info);
  EmitPolicy(w, s, ns_per_tick);
  w->EndObject();
}

// kFileNameProgramBytes bounds the program's part of a trace's file name,
// so that the temporary name (".<program>.<pid>.<nonce>.json.tmp") stays
// well within NAME_MAX (255 bytes) whatever argv[0] holds.
constexpr size_t kFileNameProgramBytes = 64;

// ProgramFileName is the program's name made safe for a file name: ASCII
// letters, digits, "-_.+@" and valid UTF-8 characters from U+00A0 up as
// they are, any other byte as '_' (a '/', a leading '.', spaces, control
// characters, bytes of no valid character), at most kFileNameProgramBytes
// bytes, cut on a character boundary. The trace's "program" holds the name
// itself.
void ProgramFileName(char* out) {
  const unsigned char* name = reinterpret_cast<const unsigned char*>(g_runtime.program);
  if (name[0] == '\0') name = reinterpret_cast<const unsigned char*>("unknown");
  size_t n = 0;
  while (*name != '\0') {
    const unsigned char c = *name;
    size_t length = c >= 0x80 ? Utf8SequenceLength(name, 4) : 1;
    const bool keep = c >= 0x80 ? length > 1 && !(c == 0xc2 && name[1] < 0xa0)
                                : (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                      strchr("-_.+@", c) != nullptr;
    if (!keep) length = 1;
    if (n + length > kFileNameProgramBytes) break;
    if (keep && !(n == 0 && c == '.')) {
      memcpy(out + n, name, length);
    } else {
      out[n] = '_';
    }
    n += keep ? length : 1;
    name += length;
  }
  out[n] = '\0';
}

bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = LibcWrite(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// NameNonce is the nonce of a temporary name: keyed by the process tree's
// secret (NoteNameKey), over what sets this name apart from every other the
// key served (the pid, the process's start, its count of names), else drawn
// for this name alone.
uint64_t NameNonce(pid_t pid) {
  if (g_runtime.name_key_drawn) {
    const uint64_t words[3] = {static_cast<uint64_t>(static_cast<unsigned>(pid)), StartUnixNs(),
                               g_process_page.trace_names++};
    return SipHash24(g_runtime.name_key, words, 3);
  }
  uint64_t nonce = 0;
  if (getrandom(&nonce, sizeof(nonce), GRND_NONBLOCK) != sizeof(nonce)) {
    nonce = RealtimeNs() * 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(pid) << 32;
  }
  return nonce;
}

// kPathBytes holds a trace's path: the directory (under PATH_MAX), the
// program's name (kFileNameProgramBytes), the pid, the nonce and the suffix.
constexpr size_t kPathBytes = PATH_MAX + 300;

// g_spool: the spool this process's fork children write their final traces
// to (trace_spool.h), and the pid of the process that mapped it, whose own
// traces are files; failed: a spool could not be made, and no more are tried
// (one warning, and a line of each trace's shim_warnings). Written by
// SpoolBeforeFork in the parent only: a child reads it, with what else a
// child reads (preload/child_layout.ld).
struct {
  SpoolHeader* header;
  int owner_pid;
  bool failed;
} g_spool;

// g_spool_file: what the process that maps a spool keeps of it to allocate
// its room (SpoolReserve), as do its children that fork in turn.
struct SpoolFile {
  char path[kPathBytes];
  uint64_t dev, ino;
} g_spool_file;

// TraceName writes dir/<dot>program.pid[.nonce]suffix to out (kPathBytes),
// the nonce in 16 hex digits: what snprintf wrote, without the format's
// parse (some 5,000 instructions a trace, which a forked server's child
// pays at each exit).
void TraceName(char* out, const char* dir, bool dot, const char* program, pid_t pid, const uint64_t* nonce,
               const char* suffix) {
  char* p = stpcpy(out, dir);
  *p++ = '/';
  if (dot) *p++ = '.';
  p = stpcpy(p, program);
  *p++ = '.';
  p = std::to_chars(p, p + 16, static_cast<int>(pid)).ptr;
  if (nonce != nullptr) {
    *p++ = '.';
    for (int shift = 60; shift >= 0; shift -= 4) *p++ = "0123456789abcdef"[(*nonce >> shift) & 15];
  }
  strcpy(p, suffix);
}

// CreateTemporary creates a new file for the trace in dir, 0600 (a trace
// names peers and program arguments), under a name nobody can guess and
// plant a symlink at: never one that already exists, never through a
// symlink. Its name goes to temp; returns the fd or -1.
int CreateTemporary(char* temp, const char* dir, const char* program, pid_t pid) {
  for (int attempt = 0; attempt < 8; ++attempt) {
    const uint64_t nonce = NameNonce(pid);
    TraceName(temp, dir, /*dot=*/true, program, pid, &nonce, ".json.tmp");
    const int fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  return -1;
}

void WarnOnce(const char* what, const char* path) {
  if (g_process_page.trace_warned) return;
  g_process_page.trace_warned = true;
  RawWarning("cannot write trace %s: %s (%s); the program goes on unchanged", path, what, strerror(errno));
}

}  // namespace

void NoteNameKey() {
  if (getrandom(g_runtime.name_key, sizeof(g_runtime.name_key), GRND_NONBLOCK) == sizeof(g_runtime.name_key)) {
    g_runtime.name_key_drawn = true;
  }
}

static inline uint64_t Rotl(uint64_t x, int b) { return x << b | x >> (64 - b); }

static inline void SipRound(uint64_t& v0, uint64_t& v1, uint64_t& v2, uint64_t& v3) {
  v0 += v1, v1 = Rotl(v1, 13), v1 ^= v0, v0 = Rotl(v0, 32);
  v2 += v3, v3 = Rotl(v3, 16), v3 ^= v2;
  v0 += v3, v3 = Rotl(v3, 21), v3 ^= v0;
  v2 += v1, v1 = Rotl(v1, 17), v1 ^= v2, v2 = Rotl(v2, 32);
}

uint64_t SipHash24(const uint64_t key[2], const uint64_t* words, int count) {
  uint64_t v0 = key[0] ^ 0x736f6d6570736575ull, v1 = key[1] ^ 0x646f72616e646f6dull;
  uint64_t v2 = key[0] ^ 0x6c7967656e657261ull, v3 = key[1] ^ 0x7465646279746573ull;
  for (int i = 0; i < count; ++i) {
    v3 ^= words[i];
    SipRound(v0, v1, v2, v3);
    SipRound(v0, v1, v2, v3);
    v0 ^= words[i];
  }
  const uint64_t last = static_cast<uint64_t>(count * 8) << 56;  // the length in bytes, no bytes left over
  v3 ^= last;
  SipRound(v0, v1, v2, v3);
  SipRound(v0, v1, v2, v3);
  v0 ^= last;
  v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) SipRound(v0, v1, v2, v3);
  return v0 ^ v1 ^ v2 ^ v3;
}

// The host name is uname's nodename (the UTS namespace's host name, what
// gethostname returns) with bytes outside printable ASCII replaced by '?', so
// the trace stays valid UTF-8 whatever the name holds.
void NoteHostName() {
  static_assert(sizeof(g_runtime.host) == sizeof(utsname::nodename), "a whole nodename");
  struct utsname uts;
  const char* name = uname(&uts) == 0 && uts.nodename[0] != '\0' ? uts.nodename : "unknown";
  char* out = g_runtime.host;
  size_t i = 0;
  for (; name[i] != '\0' && i + 1 < sizeof(g_runtime.host); ++i) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    out[i] = c > 0x20 && c < 0x7f ? static_cast<char>(c) : '?';
  }
  out[i] = '\0';
}

bool SerializeTrace(JsonWriter* w, bool final, uint32_t represents) {
  // Nothing to report (a fork child that holds no socket of its parent's):
  // not even the clock is read (a child's page of libc and the vDSO's).
  bool any = false;
  g_table.ForEachLive([&](int, SocketState* s) { any = any || s->WorthReporting(); });
  g_table.ForEachGroup([&](SocketState*) { any = true; });
  if (!any) return false;
  // The clock's rate to the Hz, ns per tick to 15 significant digits: far
  // finer than the rate is measured, and each written as it is, without
  // printf (FormatDouble).
  const double measured_hz = g_runtime.tick_rate.TicksPerSecond();
  const double tsc_hz = measured_hz >= 1 ? static_cast<double>(static_cast<uint64_t>(measured_hz + 0.5)) : measured_hz;
  const double ns_per_tick = RoundToFifteenDigits(1e9 / tsc_hz);

  w->BeginObject();
  w->Key("schema");
  w->String("https://tcpadvise.dev/schemas/trace/1");
  w->Key("program");
  w->String(g_runtime.program[0] != '\0' ? g_runtime.program : "unknown");
  // The host, pid and parent as the runtime knows them: a fork child's exit
  // asks the kernel none of them.
  if (g_runtime.host[0] == '\0') NoteHostName();
  w->Key("host");
  w->String(g_runtime.host);
  w->Key("pid");
  w->Int(g_runtime.pid);
  w->Key("ppid");
  w->Int(g_runtime.ppid != 0 ? g_runtime.ppid : getppid());
  w->Key("start_unix_ns");
  w->Uint(StartUnixNs());
  w->Key("written_unix_ns");
  w->Uint(RealtimeNs());
  w->Key("final");
  w->Bool(final);
  if (represents > 1) {
    w->Key("represents");
    w->Uint(represents);
  }
  if (final && g_runtime.stop_signal != 0) {
    w->Key("stop_signal");
    w->String(sigabbrev_np(g_runtime.stop_signal));
  }
  w->Key("tsc_hz");
  w->Double(tsc_hz);
  w->Key("groups_dropped");
  w->Uint(g_table.groups_dropped());
  w->Key("shim_warnings");
  w->BeginArray();
  const uint32_t warnings = ShimWarnings();
  if (warnings & kWarnFdBeyondTable) w->String("some sockets had fds above the shim's table size and were not tracked");
  if (warnings & kWarnOutOfMemory) w->String("the shim ran out of memory for its tables; some sockets were not tracked");
  if (warnings & kWarnSignalHandlerSocket) {
    w->String("some sockets a signal handler opened while it interrupted the shim were not tracked");
  }
  if (g_spool.failed) w->String("the shim could not create its trace spool; fork children wrote trace files");
  w->EndArray();
  if (const char* fail_open = PolicyFailOpenReason()) {
    w->Key("policy_fail_open");
    w->String(fail_open);
  }
  EmitCallSites(w);
  w->Key("turn_sampling");
  w->BeginObject();
  w->Key("first");
  w->Uint(g_runtime.settings.turns.first);
  w->Key("every");
  w->Uint(uint64_t{1} << g_runtime.settings.turns.every_shift);
  w->EndObject();
  w->Key("sockets");
  w->BeginArray();
  // Groups first, then the live sockets. Every kSocketsPerHold sockets a
  // snapshot lets the threads waiting for the table's lock have it, so that
  // a server with 10k open connections is not kept from accepting or
  // closing for the whole snapshot (tens of microseconds a socket). A
  // socket that closes meanwhile is folded into a group already written: it
  // is in this snapshot at most once (live if its turn came first, else in
  // the next snapshot). The final trace holds the lock throughout.
  constexpr int kSocketsPerHold = 64;
  const uint64_t now = ReadTicks();
  g_table.ForEachGroup([&](SocketState* g) { EmitSocket(w, *g, /*open=*/false, now, ns_per_tick); });
  int emitted = 0;
  g_table.ForEachLive([&](int fd, SocketState* s) {
    if (!s->WorthReporting()) return;
    s->ReadKernelState(fd);
    EmitSocket(w, *s, /*open=*/true, now, ns_per_tick);
    if (!final && ++emitted % kSocketsPerHold == 0) g_table.LetWaitersIn();
  });
  w->EndArray();
  if (g_policy_config != nullptr && g_policy_config->experiment.enabled) {
    EmitExperiment(w, g_policy_config->experiment, ns_per_tick);
  }
  w->EndObject();
  return true;
}

void EmitBurstWrites(JsonWriter* w, const SocketStats& st, uint64_t open_writes) {
  // While every burst is one write (the open one too, then), burst_writes
  // holds none of them: a 1 each, beside the open burst's writes (with its
  // period's weight).
  const uint64_t implied = st.ImpliedOneWriteBursts();
  const uint64_t open_burst = open_writes != 0 ? st.PeriodWeight() : 0;
  EmitHistogram(w, "writes", "count", st.burst_writes, 1.0, implied + open_burst, implied != 0 ? 1 : open_writes);
}

// WriteTraceFile writes a rendered trace under a temporary name, then
// renames it; false when it could not. Out of line: its two paths (8 KiB
// of stack) sat in WriteTrace's frame, below which the rendering then ran, some 14 KiB deep
// in all, reaching stack pages a fork child had not touched (one more fault
// in a PostgreSQL backend, depending on where its stack starts); now the
// rendering and the file are as deep as the deeper of the two.
[[gnu::noinline]] static bool WriteTraceFile(const JsonWriter& w) {
  char program[kFileNameProgramBytes + 1], path[kPathBytes], temp[kPathBytes];
  ProgramFileName(program);
  const char* dir = g_runtime.settings.out_dir;
  const pid_t pid = g_runtime.pid;
  TraceName(path, dir, /*dot=*/false, program, pid, nullptr, ".json");
  const int fd = CreateTemporary(temp, dir, program, pid);
  if (fd < 0) {
    WarnOnce("open failed", temp);
    return false;
  }
  const bool written = WriteAll(fd, w.data(), w.size());
  if (g_real.close(fd) != 0 || !written) {
    WarnOnce("write failed", temp);
    unlink(temp);
    return false;
  }
  if (rename(temp, path) != 0) {
    WarnOnce("rename failed", path);
    unlink(temp);
    return false;
  }
  g_process_page.trace_file_written = true;
  return true;
}

// SpoolTakesTrace: whether this process is a fork child whose final trace
// goes to the spool its parent mapped. Not a child that already wrote a
// snapshot file (its final trace replaces that file, which would otherwise
// stay beside its record).
static bool SpoolTakesTrace() {
  return g_spool.header != nullptr && g_spool.owner_pid != g_runtime.pid && !g_process_page.trace_file_written;
}

// InSpool puts a fork child's final trace in the spool: no system call.
// False past the spool's room (the trace goes to a file).
static bool InSpool(const JsonWriter& w) {
  return SpoolTakesTrace() && SpoolAppend(g_spool.header, w.data(), w.size(), g_runtime.pid);
}

static_assert(static_cast<int>(Role::kClient) == 1 && static_cast<int>(Role::kServer) == 2 &&
                  static_cast<int>(Role::kListener) == 3,
              "a sample slot's key names the role by these numbers (trace_spool.h)");

// ChildRepresents: the fork children a final trace going to the spool
// stands for (SpoolSampleChild; 0: this one writes none), and in *slot its
// service's sample slot (nullptr: not sampled) for SpoolSampleWritten once
// the trace is written. Sampled: a child
// of one connection (one socket item, of one connection: a
// fork-per-connection server's backend), whose trace is its service's
// siblings' shape and holds nothing else. Written in full: a child with a
// warning, one that runs an experiment (each of its connections is an
// outcome), one that held more than one connection. The table's lock is
// taken here.
static uint32_t ChildRepresents(SpoolSampleSlot** slot) {
  if (ShimWarnings() != 0 || PolicyFailOpenReason() != nullptr) return 1;
  if (g_policy_config != nullptr && g_policy_config->experiment.enabled) return 1;
  int items = 0;
  const SocketState* only = nullptr;
  g_table.Lock();
  g_table.ForEachGroup([&](SocketState* g) {
    ++items;
    only = g;
  });
  g_table.ForEachLive([&](int, SocketState* s) {
    if (!s->WorthReporting()) return;
    ++items;
    only = s;
  });
  const bool one_connection = items == 1 && only->connections == 1;
  const uint32_t key = one_connection ? only->id.ServiceKey() : 0;
  g_table.Unlock();
  if (!one_connection) return 1;
  *slot = SpoolSampleSlotOf(g_spool.header, key);
  return *slot != nullptr ? SpoolSampleChild(*slot, g_runtime.settings.child_traces) : 1;
}

// CreateSpool maps a new spool, <out>/<program>.<pid>.<nonce>.spool, for
// the children forked from now on, and unmaps the one it replaces (the
// children forked before keep theirs). On failure the old one stays, and
// no other is tried.
[[gnu::cold]] [[gnu::noinline]] static void CreateSpool() {
  char program[kFileNameProgramBytes + 1];
  ProgramFileName(program);
  const pid_t pid = g_runtime.pid;
  SpoolHeader* spool = nullptr;
  for (int attempt = 0; attempt < 8 && spool == nullptr; ++attempt) {
    const uint64_t nonce = NameNonce(pid);
    TraceName(g_spool_file.path, g_runtime.settings.out_dir, /*dot=*/false, program, pid, &nonce, ".spool");
    spool = MapSpool(g_spool_file.path, kSpoolCapacity, pid, RealtimeNs(), &g_spool_file.dev, &g_spool_file.ino);
    if (spool == nullptr && errno != EEXIST) break;
  }
  if (spool == nullptr) {
    // One warning for the process: the same cause (a directory that is
    // not there) fails its trace's file too.
    g_spool.failed = true;
    g_process_page.trace_warned = true;
    RawWarning("cannot create the trace spool %s: %s; fork children write trace files", g_spool_file.path,
               strerror(errno));
    return;
  }
  static_assert(kSpoolTreeCounts == kTreeFirstSlots, "the spool has room for the call sites' tree");
  CallSitesShareTree(spool->tree_counts);
  if (g_spool.header != nullptr) UnmapSpool(g_spool.header);
  g_spool.header = spool;
  g_spool.owner_pid = pid;
}

void SpoolBeforeFork() {
  if (g_spool.failed) return;
  ErrnoSaver errno_saver;
  SpoolHeader* spool = g_spool.header;
  if (spool == nullptr || SpoolHalfFull(spool)) {
    CreateSpool();
  } else if (SpoolNeedsReserve(spool)) {
    SpoolReserve(spool, g_spool_file.path, g_spool_file.dev, g_spool_file.ino);
  }
}

void WriteTrace(bool final) {
  ErrnoSaver errno_saver;
  LockTraceWriter();
  if (g_process_page.trace_final_written) {
    UnlockTraceWriter();
    return;
  }
  SpoolSampleSlot* sample_slot = nullptr;
  const uint32_t represents = final && SpoolTakesTrace() ? ChildRepresents(&sample_slot) : 1;
  if (represents == 0) {
    g_process_page.trace_final_written = true;
    UnlockTraceWriter();
    return;
  }
  JsonWriter w(g_process_page.trace_start, sizeof(g_process_page.trace_start), g_trace_buffer, sizeof(g_trace_buffer));
  CallSitesPrepare();
  g_table.Lock();
  const bool any = SerializeTrace(&w, final, represents);
  g_table.Unlock();
  if (final) g_process_page.trace_final_written = true;
  if (any && !w.failed()) {
    const bool written = (final && InSpool(w)) || WriteTraceFile(w);
    if (written && sample_slot != nullptr) SpoolSampleWritten(sample_slot, represents);
  } else if (w.failed()) {
    RawWarning("out of memory while writing the trace; this trace is skipped");
  }
  UnlockTraceWriter();
}

// The trace writer's mutex is held inside a shim section: a stop signal that
// interrupts its holder must not write the trace on that thread (signals.h).
// It and the writer's flags are the process page's: a fork child starts with
// them free and clear.
void LockTraceWriter() {
  EnterShimSection();
  pthread_mutex_lock(&g_process_page.trace_mutex);
}

void UnlockTraceWriter() {
  pthread_mutex_unlock(&g_process_page.trace_mutex);
  LeaveShimSection();
}

}  // namespace tcpadvise
