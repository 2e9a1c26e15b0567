// conform: the driver of the byte-exactness conformance suite. Each
// subcommand is one case: it connects to conform_peer, does what a real
// program does around small (holdable) writes, and prints one JSON object:
//
//   connections  per connection: its local port, the bytes the program meant
//                to send (what the send calls reported as accepted) and their
//                SHA-256, or the records' digest when their order is unknowable
//   results      return values, errnos and signal counts that are the same on
//                every run: the tests compare them with the unpreloaded run
//   info         timings and counts that vary from run to run
//
//   conform CASE --port P --seed S [--OPTION VALUE]...
//
// The bytes are a pure function of (seed, connection, offset), so a forked,
// spawned or exec'd process can send its part and the parent can account for
// it. Every loop is bounded in count and time.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "conform_common.h"
#include "sha256.h"

extern char** environ;

namespace conform {
namespace {

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = 1024 * kKiB;
// Small enough for any coalescing policy to hold.
constexpr size_t kSmallPiece = 64;

class Args {
 public:
  Args(int argc, char** argv) {
    for (int i = 2; i + 1 < argc; i += 2) {
      if (strncmp(argv[i], "--", 2) != 0) Usage();
      values_[argv[i] + 2] = argv[i + 1];
    }
    if (argc % 2 != 0) Usage();
  }
  std::string Str(const char* name, const char* fallback = nullptr) const {
    auto it = values_.find(name);
    if (it != values_.end()) return it->second;
    if (fallback == nullptr) {
      fprintf(stderr, "conform: --%s is required\n", name);
      exit(2);
    }
    return fallback;
  }
  long long Int(const char* name, long long fallback) const {
    auto it = values_.find(name);
    return it == values_.end() ? fallback : strtoll(it->second.c_str(), nullptr, 0);
  }
  long long Int(const char* name) const { return strtoll(Str(name).c_str(), nullptr, 0); }

  [[noreturn]] static void Usage() {
    fprintf(stderr, "usage: conform CASE --port P --seed S [--OPTION VALUE]...\n");
    exit(2);
  }

 private:
  std::map<std::string, std::string> values_;
};

// What main prints at the end (or a case, just before it exits on its own).
struct Report {
  std::string case_name;
  unsigned long long seed = 0;
  std::vector<std::string> connections;
  JsonObject results;
  JsonObject info;
  bool silent = false;  // a helper process: its parent reports

  void Emit() {
    printf("{\"case\": %s, \"seed\": %llu, \"pid\": %d, \"connections\": %s, \"results\": %s, \"info\": %s}\n",
           JsonString(case_name).c_str(), seed, getpid(), JsonArray(connections).c_str(), results.Str().c_str(),
           info.Str().c_str());
    fflush(stdout);
  }
};

Report g_report;

// ---- sending ----

// Every write-family call a program can make on a stream socket. sendmmsg
// comes last: it is one send per message, so a request sent with it meets
// Nagle's algorithm, on a non-blocking socket a short message followed by a
// sent one would leave a hole in the stream, and a policy passes it through
// rather than hold it. kOneSendApis leaves it out.
enum class Api { kWrite, kWritev, kSend, kSendto, kSendmsg, kSendmmsg };
constexpr uint64_t kApiCount = 6;
constexpr uint64_t kOneSendApis = kApiCount - 1;

Api RandomApi(Rng& rng, uint64_t count = kApiCount) { return static_cast<Api>(rng.Below(count)); }

// Cuts p[0..n) into up to `most` consecutive pieces at random places.
size_t Cut(const uint8_t* p, size_t n, size_t most, Rng& rng, iovec* pieces) {
  const size_t count = std::min<size_t>(1 + rng.Below(most), std::max<size_t>(n, 1));
  size_t at = 0;
  for (size_t i = 0; i < count; ++i) {
    const size_t left_for_rest = count - i - 1;
    const size_t take = i + 1 == count ? n - at : rng.Between(1, n - at - left_for_rest);
    pieces[i] = iovec{const_cast<uint8_t*>(p + at), take};
    at += take;
  }
  return count;
}

// One call of api for p[0..n): the bytes it accepted, or -1. The vector
// APIs get the bytes cut into up to eight iovecs (sendmmsg: messages).
// flags apply to the send family.
ssize_t SendVia(int fd, Api api, const uint8_t* p, size_t n, int flags, Rng& rng) {
  switch (api) {
    case Api::kWrite:
      return write(fd, p, n);
    case Api::kSend:
      return send(fd, p, n, flags);
    case Api::kSendto:
      return sendto(fd, p, n, flags, nullptr, 0);
    default:
      break;
  }
  iovec pieces[8];
  const size_t count = Cut(p, n, 8, rng, pieces);
  if (api == Api::kWritev) return writev(fd, pieces, static_cast<int>(count));
  if (api == Api::kSendmsg) {
    msghdr msg{};
    msg.msg_iov = pieces;
    msg.msg_iovlen = count;
    return sendmsg(fd, &msg, flags);
  }
  mmsghdr msgs[8] = {};
  for (size_t i = 0; i < count; ++i) {
    msgs[i].msg_hdr.msg_iov = &pieces[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  const int sent_messages = sendmmsg(fd, msgs, static_cast<unsigned>(count), flags);
  if (sent_messages < 0) return -1;
  ssize_t bytes = 0;
  for (int i = 0; i < sent_messages; ++i) bytes += msgs[i].msg_len;
  return bytes;
}

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) DieErrno("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) DieErrno("connect");
  return fd;
}

// A connection and the record of what the program meant to send on it.
class Conn {
 public:
  Conn(int socket_fd, uint64_t stream) : fd(socket_fd), stream_(stream), port_(LocalPort(socket_fd)) {}
  static Conn Open(int port, uint64_t stream) { return Conn(Connect(port), stream); }

  int fd;

  uint64_t sent() const { return sent_; }

  // The stream's next n bytes, in a buffer valid until the next call.
  uint8_t* Next(size_t n) {
    next_.resize(n);
    FillStream(stream_, sent_, next_.data(), n);
    return next_.data();
  }

  // One send call; what it accepted counts as sent.
  ssize_t SendOnce(int via_fd, Api api, const uint8_t* p, size_t n, Rng& rng, int flags = 0) {
    const ssize_t r = SendVia(via_fd, api, p, n, flags, rng);
    if (r > 0) Account(p, static_cast<size_t>(r));
    return r;
  }

  // p[0..n) in as many calls as it takes; false (errno set) on an error.
  bool SendAll(int via_fd, Api api, const uint8_t* p, size_t n, Rng& rng, int flags = 0,
               long* short_writes = nullptr) {
    while (n > 0) {
      const ssize_t r = SendOnce(via_fd, api, p, n, rng, flags);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      p += r;
      n -= static_cast<size_t>(r);
      if (n > 0 && short_writes) ++*short_writes;
    }
    return true;
  }

  // total stream bytes as small writes of 1..kSmallPiece bytes through
  // random APIs that a policy may hold, each through the next descriptor of
  // via (default: fd). Any error ends the program: a case's own small writes
  // never fail.
  void SendSmall(size_t total, Rng& rng, const std::vector<int>& via = {}) {
    for (size_t done = 0, i = 0; done < total; ++i) {
      const size_t n = std::min(rng.Between(1, kSmallPiece), total - done);
      const int via_fd = via.empty() ? fd : via[i % via.size()];
      if (!SendAll(via_fd, RandomApi(rng, kOneSendApis), Next(n), n, rng)) DieErrno("small write");
      done += n;
    }
  }

  // The stream's next n bytes were sent by another process or by sendfile.
  void AssumeSent(size_t n) { Account(Next(n), n); }

  std::string Json() const {
    return JsonObject()
        .Add("port", port_)
        .Add("bytes", static_cast<long long>(sent_))
        .Add("sha256", hash_.HexDigest())
        .Str();
  }

 private:
  void Account(const uint8_t* p, size_t n) {
    hash_.Update(p, n);
    sent_ += n;
  }

  uint64_t stream_;
  int port_;
  uint64_t sent_ = 0;
  Sha256 hash_;
  std::vector<uint8_t> next_;
};

int SetIntOption(int fd, int level, int name, int value) {
  return setsockopt(fd, level, name, &value, sizeof(value));
}

void OnSignal(int sig, void (*handler)(int)) {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(sig, &sa, nullptr) != 0) DieErrno("sigaction");
}

std::string StatusText(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

std::string WaitChild(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) DieErrno("waitpid");
  return StatusText(status);
}

// Small writes that a coalescing shim would still hold when the program
// forks, execs, exits or closes.
constexpr size_t kHeldBytes = 300;
constexpr size_t kChildBytes = 500;
constexpr size_t kTailBytes = 400;
// More than any coalescing buffer (one MSS: 64 KB on loopback).
constexpr size_t kUnholdable = 128 * kKiB;

// Holds small writes for the case's next step (fork, exec, exit, close...);
// returns when the hold began. Writes before it set the policy up (its
// buffer, its deadline thread) and a wait lets them go, so that the hold is
// young at that step: a deadline flush rarely comes first and hides a step
// that forgets to flush.
double HoldSmallWrites(Conn& c, Rng& rng) {
  c.SendSmall(kHeldBytes, rng);
  pollfd pfd = {c.fd, POLLOUT, 0};
  poll(&pfd, 1, 0);
  const double held_since = NowUs();
  c.SendSmall(kHeldBytes, rng);
  return held_since;
}

// ---- a: random mixes of every write call, 1 byte to 1 MB ----

// Past this many bytes per connection only small writes follow, so that the
// case stays quick while 1 MB writes still come up.
constexpr uint64_t kMixBudget = 3 * kMiB;

struct MixOutcome {
  std::string connection;
  long short_writes = 0;
};

void MixOnOwnConnection(int port, uint64_t stream, long long ops, MixOutcome* out) {
  Conn c = Conn::Open(port, stream);
  Rng rng(stream);
  for (long long i = 0; i < ops; ++i) {
    size_t n = rng.LogSize(kMiB);
    if (c.sent() + n > kMixBudget) n = rng.Between(1, kSmallPiece);
    if (!c.SendAll(c.fd, RandomApi(rng), c.Next(n), n, rng, 0, &out->short_writes)) DieErrno("mix write");
  }
  if (close(c.fd) != 0) DieErrno("close");
  out->connection = c.Json();
}

void CaseMix(const Args& a) {
  const long long threads = a.Int("threads", 1);
  const long long ops = a.Int("ops", 100);
  std::vector<MixOutcome> outcomes(static_cast<size_t>(threads));
  if (threads == 1) {
    // On the main thread: the shim keeps a single-threaded program single-threaded.
    MixOnOwnConnection(static_cast<int>(a.Int("port")), StreamId(g_report.seed, 0), ops, &outcomes[0]);
  } else {
    std::vector<std::thread> workers;
    for (size_t t = 0; t < outcomes.size(); ++t) {
      workers.emplace_back(MixOnOwnConnection, static_cast<int>(a.Int("port")), StreamId(g_report.seed, t), ops,
                           &outcomes[t]);
    }
    for (std::thread& w : workers) w.join();
  }
  long short_writes = 0;
  for (const MixOutcome& o : outcomes) {
    g_report.connections.push_back(o.connection);
    short_writes += o.short_writes;
  }
  // Blocking sockets and no signals: every call takes all it is given.
  g_report.results.Add("short_writes", short_writes);
}

// ---- b: non-blocking socket, tiny send buffer, slow reader ----

void CaseNonblocking(const Args& a) {
  const uint64_t total = static_cast<uint64_t>(a.Int("bytes", 512 * kKiB));
  Conn c = Conn::Open(static_cast<int>(a.Int("port")), StreamId(g_report.seed, 0));
  Rng rng(g_report.seed);
  g_report.results.Add("sndbuf", CallResult(SetIntOption(c.fd, SOL_SOCKET, SO_SNDBUF, 4096)));
  g_report.results.Add("nonblock", CallResult(fcntl(c.fd, F_SETFL, fcntl(c.fd, F_GETFL) | O_NONBLOCK)));
  long eagain = 0, short_writes = 0, poll_timeouts = 0;
  const double give_up_us = NowUs() + 20e6;
  // An event loop: write what the socket takes, wait for POLLOUT when it
  // takes nothing. The stream goes on from what was accepted.
  while (c.sent() < total && NowUs() < give_up_us) {
    const size_t n = std::min<uint64_t>(rng.LogSize(64 * kKiB), total - c.sent());
    const ssize_t r = c.SendOnce(c.fd, RandomApi(rng, kOneSendApis), c.Next(n), n, rng);
    if (r > 0) {
      if (static_cast<size_t>(r) < n) ++short_writes;
    } else if (r < 0 && errno == EAGAIN) {
      ++eagain;
      pollfd pfd = {c.fd, POLLOUT, 0};
      if (poll(&pfd, 1, 2000) == 0) ++poll_timeouts;
    } else {
      DieErrno("non-blocking write");
    }
  }
  if (close(c.fd) != 0) DieErrno("close");
  g_report.connections.push_back(c.Json());
  g_report.results.Add("bytes_accepted", static_cast<long long>(c.sent())).Add("poll_timeouts", poll_timeouts);
  g_report.info.Add("eagain", eagain).Add("short_writes", short_writes);
}

// ---- c: request/response, blocking for the reply in each wait call ----

// Blocks until the reply can be read, through one of the calls a program
// waits in. read and recv block in the read itself (bounded by SO_RCVTIMEO).
class ReplyWaiter {
 public:
  ReplyWaiter(int fd, const std::string& how) : fd_(fd), how_(how) {
    static const char* const kKnown[] = {"read", "recv", "poll", "ppoll", "select", "epoll_wait", "epoll_pwait2"};
    if (std::find(std::begin(kKnown), std::end(kKnown), how) == std::end(kKnown)) Args::Usage();
    if (how_ == "epoll_wait" || how_ == "epoll_pwait2") {
      epoll_ = epoll_create1(EPOLL_CLOEXEC);
      epoll_event ev = {};
      ev.events = EPOLLIN;
      ev.data.fd = fd;
      if (epoll_ < 0 || epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev) != 0) DieErrno("epoll");
    }
  }
  ~ReplyWaiter() {
    if (epoll_ >= 0) close(epoll_);
  }

  // false when nothing came within timeout_ms.
  bool Wait(int timeout_ms) {
    pollfd pfd = {fd_, POLLIN, 0};
    timespec ts = {timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
    // nfds_ is not a constant: a fortified build checks it (__poll_chk).
    if (how_ == "poll") return poll(&pfd, nfds_, timeout_ms) > 0;
    if (how_ == "ppoll") return ppoll(&pfd, nfds_, &ts, nullptr) > 0;
    if (how_ == "select") {
      fd_set readable;
      FD_ZERO(&readable);
      FD_SET(fd_, &readable);
      timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000L};
      return select(fd_ + 1, &readable, nullptr, nullptr, &tv) > 0;
    }
    if (how_ == "epoll_wait") {
      epoll_event ev;
      return epoll_wait(epoll_, &ev, 1, timeout_ms) > 0;
    }
    if (how_ == "epoll_pwait2") {
      epoll_event ev;
      return epoll_pwait2(epoll_, &ev, 1, &ts, nullptr) > 0;
    }
    return true;
  }

  ssize_t Read(uint8_t* buf, size_t n) { return how_ == "recv" ? recv(fd_, buf, n, 0) : read(fd_, buf, n); }

 private:
  int fd_;
  nfds_t nfds_ = 1;
  std::string how_;
  int epoll_ = -1;
};

constexpr int kReplyTimeoutMs = 1000;

void CaseRequestReply(const Args& a) {
  const long long rounds = a.Int("rounds", 50);
  Conn c = Conn::Open(static_cast<int>(a.Int("port")), StreamId(g_report.seed, 0));
  Rng rng(g_report.seed);
  const timeval rcvtimeo = {kReplyTimeoutMs / 1000, 0};
  if (setsockopt(c.fd, SOL_SOCKET, SO_RCVTIMEO, &rcvtimeo, sizeof(rcvtimeo)) != 0) DieErrno("SO_RCVTIMEO");
  ReplyWaiter waiter(c.fd, a.Str("wait"));
  long long done = 0, bad_replies = 0, timeouts = 0;
  std::vector<double> round_us;
  for (long long round = 0; round < rounds; ++round) {
    const double start = NowUs();
    // One small request in one call: no Nagle stall without the shim.
    const size_t body = rng.Between(1, 512);
    uint8_t* request = c.Next(4 + body);
    for (int i = 0; i < 4; ++i) request[i] = static_cast<uint8_t>(body >> (8 * i));
    if (!c.SendAll(c.fd, RandomApi(rng, kOneSendApis), request, 4 + body, rng)) DieErrno("request");
    uint8_t reply[kReplySize];
    for (size_t got = 0; got < kReplySize;) {
      const ssize_t r = waiter.Wait(kReplyTimeoutMs) ? waiter.Read(reply + got, kReplySize - got) : -1;
      if (r <= 0) {
        ++timeouts;
        break;
      }
      got += static_cast<size_t>(r);
    }
    if (timeouts) break;
    // The peer says how many bytes it had and which request this answers.
    if (Le64(reply) != c.sent() || Le64(reply + 8) != static_cast<uint64_t>(round)) ++bad_replies;
    round_us.push_back(NowUs() - start);
    ++done;
  }
  if (close(c.fd) != 0) DieErrno("close");
  g_report.connections.push_back(c.Json());
  g_report.results.Add("rounds", done).Add("bad_replies", bad_replies).Add("timeouts", timeouts);
  std::sort(round_us.begin(), round_us.end());
  g_report.info.AddDouble("max_round_us", round_us.empty() ? 0 : round_us.back())
      .AddDouble("median_round_us", round_us.empty() ? 0 : round_us[round_us.size() / 2]);
}

// ---- d: fork after a held write ----

void CaseFork(const Args& a) {
  Conn c = Conn::Open(static_cast<int>(a.Int("port")), StreamId(g_report.seed, 0));
  Rng rng(g_report.seed);
  const double held_since = HoldSmallWrites(c, rng);
  fflush(stdout);
  const pid_t pid = fork();
  if (pid < 0) DieErrno("fork");
  // The bytes' age once fork returned: the most they can have been held when
  // its handlers ran (before it returned, after a sanitizer's own fork work).
  if (pid > 0) g_report.info.AddDouble("hold_age_us", NowUs() - held_since);
  if (pid == 0) {
    // Too big to hold, this write goes out at once: it would overtake what
    // the parent still held had the fork not flushed it.
    if (!c.SendAll(c.fd, Api::kWrite, c.Next(kUnholdable), kUnholdable, rng)) DieErrno("child write");
    c.SendSmall(kChildBytes, rng);
    _exit(0);
  }
  g_report.results.Add("child", WaitChild(pid));
  c.AssumeSent(kUnholdable + kChildBytes);
  c.SendSmall(kTailBytes, rng);
  if (close(c.fd) != 0) DieErrno("close");
  g_report.connections.push_back(c.Json());
}

// ---- e: execve and posix_spawn with held data ----

// exec-tail: the program exec'd with a connection it did not open. It sends
// the stream's bytes [offset, offset + bytes) on the inherited descriptor and,
// when it replaced the program (execve), reports the whole connection.
void CaseExecTail(const Args& a) {
  Conn c(static_cast<int>(a.Int("fd")), StreamId(g_report.seed, 0));
  Rng rng(Mix(g_report.seed));
  c.AssumeSent(static_cast<size_t>(a.Int("offset")));
  c.SendSmall(static_cast<size_t>(a.Int("bytes")), rng);
  g_report.silent = !a.Int("report", 0);
  g_report.case_name = "exec";
  g_report.connections.push_back(c.Json());
  g_report.results.Add("tail", "ran");
}

void CaseExec(const Args& a) {
  const std::string how = a.Str("how");
  if (how != "execve" && how != "posix_spawn") Args::Usage();
  Conn c = Conn::Open(static_cast<int>(a.Int("port")), StreamId(g_report.seed, 0));
  Rng rng(g_report.seed);
  const double held_since = HoldSmallWrites(c, rng);
  const bool replace = how == "execve";
  std::vector<std::string> args = {"conform",          "exec-tail",
                                   "--fd",             std::to_string(c.fd),
                                   "--seed",           std::to_string(g_report.seed),
                                   "--offset",         std::to_string(c.sent()),
                                   "--bytes",          std::to_string(kChildBytes),
                                   "--report",         replace ? "1" : "0"};
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(&arg[0]);
  argv.push_back(nullptr);
  fflush(stdout);
  if (replace) {
    execve("/proc/self/exe", argv.data(), environ);
    DieErrno("execve");
  }
  pid_t pid;
  const int err = posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), environ);
  if (err != 0) {
    errno = err;
    DieErrno("posix_spawn");
  }
  g_report.info.AddDouble("hold_age_us", NowUs() - held_since);  // as CaseFork's
  g_report.results.Add("child", WaitChild(pid));
  c.AssumeSent(kChildBytes);
  c.SendSmall(kTailBytes, rng);
  if (close(c.fd) != 0) DieErrno("close");
  g_report.connections.push_back(c.Json());
}

// ---- f: exit(), _exit() and return from main with held data ----

void CaseExit(const Args& a) {
  const std::string how = a.Str("how");
  if (how != "exit" && how != "_exit" && how != "return") Args::Usage();
  Conn c = Conn::Open(static_cast<int>(a.Int("port")), StreamId(g_report.seed, 0));
  Rng rng(g_report.seed);
  HoldSmallWrites(c, rng);
  // The socket stays open: the process's end closes it.
  g_report.connections.push_back(c.Json());
  if (how == "return") return;
  g_report.Emit();
  if (how == "exit") exit(0);
  _exit(0);
}

// ---- g: close, close_range, shutdown, dup2 and dup3 onto the fd with held data ----

void CaseCloseHeld(const Args& a) {
  const std::string how = a.Str("how");
  const int port = static_cast<int>(a.Int("port"));
  Conn c = Conn::Open(port, StreamId(g_report.seed, 0));
  Rng rng(g_report.seed);
  HoldSmallWrites(c, rng);
  JsonObject& results = g_report.results;
  if (how == "close") {
    results.Add("close", CallResult(close(c.fd)));
  } else if (how == "close_range") {
    results.Add("close_range", CallResult(close_range(static_cast<unsigned>(c.fd), static_cast<unsigned>(c.fd), 0)));
  } else if (how == "shutdown") {
    results.Add("shutdown", CallResult(shutdown(c.fd, SHUT_WR)));
    results.Add("send_after_shutdown", CallResult(send(c.fd, "x", 1, MSG_NOSIGNAL)));
    // The peer closes when it sees the end of the stream.
    char byte;
    results.Add("read_after_shutdown", CallResult(read(c.fd, &byte, 1)));
    results.Add("close", CallResult(close(c.fd)));
  } else if (how == "dup2" || how == "dup3") {
    // A second connection, with bytes of its own held, replaces the first at
    // the first's descriptor number: the first ends with exactly its bytes,
    // and none of them may follow the number onto the second.
    Conn d = Conn::Open(port, StreamId(g_report.seed, 1));
    d.SendSmall(kHeldBytes, rng);
    const int target = c.fd;
    const int r = how == "dup2" ? dup2(d.fd, target) : dup3(d.fd, target, O_CLOEXEC);
    results.Add("dup", r == target ? "target" : CallResult(r));
    results.Add("close_original", CallResult(close(d.fd)));
    d.fd = target;
    d.SendSmall(kTailBytes, rng);
    results.Add("close", CallResult(close(d.fd)));
    g_report.connections.push_back(d.Json());
  } else {
    Args::Usage();
  }
  g_report.connections.insert(g_report.connections.begin(), c.Json());
}

// ---- n: closes the shim used not to see, then the number reused ----

// A close made where an LD_PRELOAD shim may not look for it.
int CloseUnseen(const std::string& how, int fd) {
  if (how == "syscall") return static_cast<int>(syscall(SYS_close, fd));
  if (how == "close_range_syscall") return static_cast<int>(syscall(SYS_close_range, fd, fd, 0));
  if (how == "closefrom") {
    closefrom(fd);
    return 0;
  }
  if (how == "fclose") {
    FILE* f = fdopen(fd, "w");
    if (f == nullptr) DieErrno("fdopen");
    return fclose(f);
  }
  if (how == "dup2_file" || how == "dup3_file") {
    // A regular file replaces the socket at its number.
    const int file = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (file < 0) DieErrno("open");
    const int r = how == "dup2_file" ? static_cast<int>(syscall(SYS_dup2, file, fd))
                                     : static_cast<int>(syscall(SYS_dup3, file, fd, O_CLOEXEC));
    close(file);
    return r == fd ? 0 : -1;
  }
  Args::Usage();
}

// The first connection holds small writes and is closed unseen; the number
// is then reused by a new connection (its bytes must be its own) or a file
// (its content must be exactly what was written to it).
void CaseUnseenClose(const Args& a) {
  const std::string how = a.Str("how"), reuse = a.Str("reuse");
  const int port = static_cast<int>(a.Int("port"));
  Conn c = Conn::Open(port, StreamId(g_report.seed, 0));
  Rng rng(g_report.seed);
  HoldSmallWrites(c, rng);
  const int number = c.fd;
  g_report.results.Add("close", CallResult(CloseUnseen(how, number)));
  g_report.connections.push_back(c.Json());
  if (how == "dup2_file" || how == "dup3_file") close(number);
  if (reuse == "socket") {
    Conn d = Conn::Open(port, StreamId(g_report.seed, 1));
    g_report.results.AddBool("reused", d.fd == number);
    d.SendSmall(kHeldBytes, rng);
    SleepUs(1000);  // past any deadline: a stale flush would have come by now
    d.SendSmall(kTailBytes, rng);
    g_report.results.Add("close_new", CallResult(close(d.fd)));
    g_report.connections.push_back(d.Json());
  } else if (reuse == "file" || reuse == "mkstemp") {
    char path[] = "/tmp/conform-reuse-XXXXXX";
    const int file = reuse == "mkstemp" ? mkstemp(path) : open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (file < 0) DieErrno("file");
    unlink(path);
    g_report.results.AddBool("reused", file == number);
    std::string written;
    for (int i = 0; i < 40; ++i) {
      const std::string line = "line " + std::to_string(i) + "\n";
      if (write(file, line.data(), line.size()) != static_cast<ssize_t>(line.size())) DieErrno("file write");
      written += line;
    }
    SleepUs(1000);
    std::string back(written.size() + 64, '\0');
    const ssize_t n = pread(file, &back[0], back.size(), 0);
    back.resize(n < 0 ? 0 : static_cast<size_t>(n));
    g_report.results.Add("file", back == written ? "intact" : "changed: " + std::to_string(back.size()) + " bytes");
    close(file);
  } else {
    Args::Usage();
  }
}

// ---- o: one thread blocked writing to a peer that does not read ----

// The writer holds small writes, then blocks on a write far bigger than the
// socket buffers (the peer stalls its first connection). Meanwhile other
// threads read, poll, wait in epoll, fork and exit, each on its own; all
// must finish long before the peer reads again.
void CaseBlockedWriter(const Args& a) {
  const int port = static_cast<int>(a.Int("port"));
  const long stall_ms = a.Int("stall-ms", 2500);
  Conn c = Conn::Open(port, StreamId(g_report.seed, 0));
  const size_t big = 16 * kMiB;
  std::thread writer([&] {
    // Held bytes right before the big write: it blocks with them, so the
    // socket stays in the policy's held set meanwhile.
    // The bytes are made first: making them takes longer than a deadline.
    Rng wrng(g_report.seed + 1);
    std::vector<uint8_t> bytes(kHeldBytes + big);
    FillStream(StreamId(g_report.seed, 0), c.sent(), bytes.data(), bytes.size());
    for (size_t at = 0; at < kHeldBytes; at += kSmallPiece / 2) {
      if (!c.SendAll(c.fd, Api::kSend, bytes.data() + at, std::min(kSmallPiece / 2, kHeldBytes - at), wrng)) {
        DieErrno("small write");
      }
    }
    if (!c.SendAll(c.fd, Api::kWrite, bytes.data() + kHeldBytes, big, wrng)) DieErrno("big write");
  });
  SleepUs(300000);  // the writer is in the kernel by now
  // Another connection, with small writes held while the others wait.
  Conn d = Conn::Open(port, StreamId(g_report.seed, 2));
  const double start = NowUs();
  std::atomic<int> done{0};
  std::vector<std::thread> others;
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) DieErrno("pipe");
  others.emplace_back([&] {  // reads
    char byte;
    if (write(pipe_fds[1], "x", 1) != 1 || read(pipe_fds[0], &byte, 1) != 1) DieErrno("pipe");
    ++done;
  });
  others.emplace_back([&] {  // polls
    pollfd pfd = {d.fd, POLLOUT, 0};
    poll(&pfd, 1, 100);
    ++done;
  });
  others.emplace_back([&] {  // waits in epoll
    const int ep = epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev = {};
    ev.events = EPOLLOUT;
    epoll_ctl(ep, EPOLL_CTL_ADD, d.fd, &ev);
    epoll_wait(ep, &ev, 1, 100);
    close(ep);
    ++done;
  });
  others.emplace_back([&] {  // forks; the child exits
    if (!a.Int("fork", 1)) {
      ++done;
      return;
    }
    const pid_t pid = fork();
    if (pid == 0) _exit(0);
    if (pid < 0) DieErrno("fork");
    if (WaitChild(pid) == "exit 0") ++done;
  });
  others.emplace_back([&] {  // exits its thread
    ++done;
  });
  Rng drng(g_report.seed + 2);
  d.SendSmall(kHeldBytes, drng);
  for (auto& t : others) t.join();
  const double others_ms = (NowUs() - start) / 1000;
  g_report.results.Add("others_done", done.load());
  g_report.results.AddBool("others_before_the_peer_read", others_ms < stall_ms / 2.0);
  g_report.info.AddDouble("others_ms", others_ms);
  writer.join();
  g_report.results.Add("close_new", CallResult(close(d.fd)));
  g_report.results.Add("close", CallResult(close(c.fd)));
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  g_report.connections.push_back(c.Json());
  g_report.connections.push_back(d.Json());
}

// ---- p: bad buffers get EFAULT, as without the shim ----

void CaseBadBuffer(const Args& a) {
  Conn c = Conn::Open(static_cast<int>(a.Int("port")), StreamId(g_report.seed, 0));
  Rng rng(g_report.seed);
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) DieErrno("mmap");
  munmap(page, 4096);  // an address that was good, then unmapped
  void* none = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  const struct {
    const char* name;
    void* p;
  } kBad[] = {{"null", nullptr}, {"low", reinterpret_cast<void*>(16)}, {"unmapped", page}, {"prot_none", none}};
  JsonObject& results = g_report.results;
  for (const auto& bad : kBad) {
    HoldSmallWrites(c, rng);
    const std::string k = std::string(bad.name) + "_";
    results.Add((k + "write").c_str(), CallResult(write(c.fd, bad.p, 10)));
    results.Add((k + "send").c_str(), CallResult(send(c.fd, bad.p, 10, MSG_NOSIGNAL)));
    iovec iov[2] = {{c.Next(0), 0}, {bad.p, 10}};
    results.Add((k + "writev").c_str(), CallResult(writev(c.fd, iov, 2)));
    results.Add((k + "writev_iov").c_str(), CallResult(writev(c.fd, static_cast<iovec*>(bad.p), 2)));
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = 2;
    results.Add((k + "sendmsg").c_str(), CallResult(sendmsg(c.fd, &msg, MSG_NOSIGNAL)));
    results.Add((k + "sendmsg_hdr").c_str(), CallResult(sendmsg(c.fd, static_cast<msghdr*>(bad.p), MSG_NOSIGNAL)));
  }
  c.SendSmall(kTailBytes, rng);
  results.Add("close", CallResult(close(c.fd)));
  munmap(none, 4096);
  g_report.connections.push_back(c.Json());
}

// ---- h: dup'd descriptors of one socket writing in turn ----

void CaseDupWriters(const Args& a) {
  Conn c = Conn::Open(static_cast<int>(a.Int("port")), StreamId(g_report.seed, 0));
  Rng rng(g_report.seed);
  const std::vector<int> fds = {c.fd, dup(c.fd), fcntl(c.fd, F_DUPFD_CLOEXEC, 0)};
  if (fds[1] < 0 || fds[2] < 0) DieErrno("dup");
  c.SendSmall(2000, rng, fds);
  g_report.results.Add("close_first", CallResult(close(fds[0])));
  c.SendSmall(1000, rng, {fds[1], fds[2]});
  g_report.results.Add("close_second", CallResult(close(fds[1])));
  c.SendSmall(kTailBytes, rng, {fds[2]});
  g_report.results.Add("close_last", CallResult(close(fds[2])));
  g_report.connections.push_back(c.Json());
}

// ---- i: the peer closes ----

std::atomic<int> g_sigpipes{0};

void CountSigpipe(int) { g_sigpipes.fetch_add(1, std::memory_order_relaxed); }

// The peer reads `prefix` bytes and closes. A byte written then succeeds and
// draws a reset; after a pause past every policy's deadline (when a deferred
// flush would meet the reset) writes go on until one fails. SIGPIPE is
// counted, not fatal, so that the counts can be compared.
void CasePeerClosed(const Args& a) {
  const std::string flags = a.Str("flags");
  if (flags != "nosignal" && flags != "signal") Args::Usage();
  const bool nosignal = flags == "nosignal";
  OnSignal(SIGPIPE, CountSigpipe);
  Conn c = Conn::Open(static_cast<int>(a.Int("port")), StreamId(g_report.seed, 0));
  Rng rng(g_report.seed);
  c.SendSmall(static_cast<size_t>(a.Int("prefix")), rng);
  JsonObject& results = g_report.results;
  char byte;
  results.Add("read_at_peer_close", CallResult(read(c.fd, &byte, 1)));
  auto write_one = [&] { return nosignal ? send(c.fd, "x", 1, MSG_NOSIGNAL) : write(c.fd, "x", 1); };
  results.Add("write_after_peer_close", CallResult(write_one()));
  SleepUs(20000);
  results.Add("sigpipes_while_idle", g_sigpipes.load());
  std::string first_error = "none";
  int writes_before_error = 0;
  // Under a policy a deferred error may surface a few calls late, but it must surface.
  for (; writes_before_error < 200; ++writes_before_error) {
    if (write_one() < 0) {
      first_error = ErrnoName(errno);
      break;
    }
    SleepUs(1000);
  }
  results.Add("first_error", first_error).Add("sigpipes", g_sigpipes.load());
  g_report.info.Add("writes_before_error", writes_before_error);
  results.Add("close", CallResult(close(c.fd)));
  g_report.connections.push_back(c.Json());
}

// ---- j: a SIGALRM handler writes records while the main loop writes too ----

namespace signal_writer {

constexpr uint64_t kHandlerTag = uint64_t{1} << 63;
constexpr long long kMaxMainRecords = 1 << 16;
constexpr long kMaxHandlerRecords = 4096;

int g_fd = -1;
bool g_log_order = false;
std::atomic<bool> g_armed{false};
std::atomic<long> g_handler_records{0};
std::atomic<long> g_handler_failures{0};
// The ids in the order they were written, when the main loop blocks SIGALRM
// around its own write and log entry (so the handler cannot come between).
uint64_t g_order[kMaxMainRecords + kMaxHandlerRecords];
std::atomic<size_t> g_order_len{0};

bool WriteRecord(uint64_t id) {
  uint8_t record[kRecordSize];
  MakeRecord(id, record);
  if (write(g_fd, record, sizeof(record)) != static_cast<ssize_t>(sizeof(record))) return false;
  if (g_log_order) g_order[g_order_len.fetch_add(1)] = id;
  return true;
}

void OnAlarm(int) {
  const int saved_errno = errno;
  const long n = g_handler_records.load();
  if (g_armed.load() && n < kMaxHandlerRecords) {
    if (WriteRecord(kHandlerTag | static_cast<uint64_t>(n))) {
      g_handler_records.store(n + 1);
    } else {
      g_handler_failures.fetch_add(1);
    }
  }
  errno = saved_errno;
}

void SetTimer(long interval_us) {
  const itimerval timer = {{0, interval_us}, {0, interval_us}};
  if (setitimer(ITIMER_REAL, &timer, nullptr) != 0) DieErrno("setitimer");
}

// The connection as the peer must see it: every record in order (blocked),
// or the multiset of records (free: a handler may run between a write and
// its log entry, so the order is not knowable).
std::string ExpectedConnection(int port, long long main_records, long handler_records) {
  JsonObject conn;
  conn.Add("port", port).Add("bytes", static_cast<long long>(kRecordSize) * (main_records + handler_records));
  if (g_log_order) {
    Sha256 hash;
    for (size_t i = 0; i < g_order_len.load(); ++i) {
      uint8_t record[kRecordSize];
      MakeRecord(g_order[i], record);
      hash.Update(record, sizeof(record));
    }
    return conn.Add("sha256", hash.HexDigest()).Str();
  }
  RecordTally tally;
  for (long long i = 0; i < main_records; ++i) tally.AddId(static_cast<uint64_t>(i));
  for (long h = 0; h < handler_records; ++h) tally.AddId(kHandlerTag | static_cast<uint64_t>(h));
  return conn.Add("records", static_cast<long long>(tally.count())).Add("record_digest", tally.HexDigest()).Str();
}

}  // namespace signal_writer

// The main loop writes a record, then waits for nothing (poll, timeout 0) as
// an event loop does: the handler lands in writes, in waits (where a policy
// flushes) and between them.
void CaseSignalWriter(const Args& a) {
  using namespace signal_writer;
  const long min_handler_records = static_cast<long>(a.Int("min-handler-records", 40));
  const std::string order = a.Str("order");
  if (order != "blocked" && order != "free") Args::Usage();
  g_log_order = order == "blocked";
  g_fd = Connect(static_cast<int>(a.Int("port")));
  const int port = LocalPort(g_fd);
  sigset_t alarm_set;
  sigemptyset(&alarm_set);
  sigaddset(&alarm_set, SIGALRM);
  OnSignal(SIGALRM, OnAlarm);
  g_armed.store(true);
  SetTimer(500);
  long long main_records = 0;
  long main_failures = 0;
  const double give_up_us = NowUs() + 5e6;
  for (long long i = 0; g_handler_records.load() < min_handler_records && NowUs() < give_up_us; ++i) {
    if (main_records < kMaxMainRecords) {
      if (g_log_order) sigprocmask(SIG_BLOCK, &alarm_set, nullptr);
      if (WriteRecord(static_cast<uint64_t>(main_records))) {
        ++main_records;
      } else {
        ++main_failures;
      }
      if (g_log_order) sigprocmask(SIG_UNBLOCK, &alarm_set, nullptr);
    }
    pollfd pfd = {g_fd, POLLOUT, 0};
    poll(&pfd, 1, 0);
    if (i % 64 == 63) SleepUs(20);
  }
  g_armed.store(false);
  SetTimer(0);
  const long handler_records = g_handler_records.load();
  if (close(g_fd) != 0) DieErrno("close");
  g_report.connections.push_back(ExpectedConnection(port, main_records, handler_records));
  g_report.results.Add("main_failures", main_failures)
      .Add("handler_failures", g_handler_failures.load())
      .AddBool("handler_wrote_enough", handler_records >= min_handler_records);
  g_report.info.Add("main_records", main_records).Add("handler_records", handler_records);
}

// ---- k: the program's own TCP_NODELAY and TCP_CORK around its writes ----

void CaseAppOptions(const Args& a) {
  Conn c = Conn::Open(static_cast<int>(a.Int("port")), StreamId(g_report.seed, 0));
  Rng rng(g_report.seed);
  std::vector<std::string> steps;
  auto note = [&](const std::string& what, const std::string& outcome) {
    steps.push_back(JsonString(what + ": " + outcome));
  };
  auto set = [&](const char* name, int option, int value) {
    note(std::string("set ") + name + " " + std::to_string(value),
         CallResult(SetIntOption(c.fd, IPPROTO_TCP, option, value)));
  };
  // The program must read back what it set, whatever a policy would prefer.
  auto get = [&](const char* name, int option) {
    int value = -1;
    socklen_t len = sizeof(value);
    const int r = getsockopt(c.fd, IPPROTO_TCP, option, &value, &len);
    note(std::string("get ") + name, r == 0 ? std::to_string(value) : CallResult(r));
  };
  set("TCP_CORK", TCP_CORK, 1);
  c.SendSmall(kHeldBytes, rng);
  get("TCP_CORK", TCP_CORK);
  // A wait would end an auto-cork; the program's own cork stays.
  pollfd pfd = {c.fd, POLLIN, 0};
  note("poll", CallResult(poll(&pfd, 1, 0)));
  get("TCP_CORK", TCP_CORK);
  set("TCP_CORK", TCP_CORK, 0);
  get("TCP_CORK", TCP_CORK);
  c.SendSmall(kHeldBytes, rng);
  set("TCP_NODELAY", TCP_NODELAY, 1);
  get("TCP_NODELAY", TCP_NODELAY);
  c.SendSmall(kHeldBytes, rng);
  set("TCP_NODELAY", TCP_NODELAY, 0);
  get("TCP_NODELAY", TCP_NODELAY);
  c.SendSmall(kHeldBytes, rng);
  set("TCP_CORK", TCP_CORK, 1);
  c.SendSmall(kHeldBytes, rng);
  set("TCP_CORK", TCP_CORK, 0);
  note("close", CallResult(close(c.fd)));
  g_report.results.AddRaw("steps", JsonArray(steps));
  g_report.connections.push_back(c.Json());
}

// ---- l: MSG_MORE, MSG_OOB and MSG_ZEROCOPY among small writes ----

// Zerocopy completions on the error queue, up to `expected` sends; the
// buffers must stay untouched until then.
long ZerocopyCompletions(int fd, long expected, bool* copied) {
  long completed = 0;
  const double give_up_us = NowUs() + 2e6;
  while (completed < expected && NowUs() < give_up_us) {
    pollfd pfd = {fd, 0, 0};  // POLLERR is always reported
    if (poll(&pfd, 1, 100) <= 0) continue;
    char control[128];
    msghdr msg{};
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    if (recvmsg(fd, &msg, MSG_ERRQUEUE) < 0) continue;
    for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
      sock_extended_err err;
      memcpy(&err, CMSG_DATA(cm), sizeof(err));
      if (err.ee_origin != SO_EE_ORIGIN_ZEROCOPY) continue;
      completed += static_cast<long>(err.ee_data - err.ee_info) + 1;
      if (err.ee_code & SO_EE_CODE_ZEROCOPY_COPIED) *copied = true;
    }
  }
  return completed;
}

void CaseSendFlags(const Args& a) {
  Conn c = Conn::Open(static_cast<int>(a.Int("port")), StreamId(g_report.seed, 0));
  Rng rng(g_report.seed);
  const int so_zerocopy = SetIntOption(c.fd, SOL_SOCKET, SO_ZEROCOPY, 1);
  g_report.results.Add("so_zerocopy", CallResult(so_zerocopy));
  std::vector<std::vector<uint8_t>> zerocopy_buffers;
  long zerocopy_sends = 0, zerocopy_refused = 0;
  for (int step = 0; step < 40; ++step) {
    switch (step % 4) {
      case 0:
        c.SendSmall(rng.Between(1, 200), rng);
        break;
      case 1: {
        const size_t n = rng.Between(1, kSmallPiece);
        const Api api = rng.Below(2) ? Api::kSend : Api::kSendmsg;
        if (!c.SendAll(c.fd, api, c.Next(n), n, rng, MSG_MORE)) DieErrno("MSG_MORE");
        break;
      }
      case 2: {
        const size_t n = rng.Between(1, 3);  // the last byte is the urgent one
        if (!c.SendAll(c.fd, Api::kSend, c.Next(n), n, rng, MSG_OOB)) DieErrno("MSG_OOB");
        break;
      }
      default: {
        const size_t n = rng.Between(4 * kKiB, 16 * kKiB);
        const uint8_t* next = c.Next(n);
        zerocopy_buffers.emplace_back(next, next + n);
        const uint8_t* p = zerocopy_buffers.back().data();
        int flags = so_zerocopy == 0 ? MSG_ZEROCOPY : 0;
        for (size_t done = 0; done < n;) {
          const ssize_t r = c.SendOnce(c.fd, Api::kSend, p + done, n - done, rng, flags);
          if (r < 0 && flags != 0 && errno == ENOBUFS) {
            // Out of option memory for the notifications: plain send, as a program would.
            flags = 0;
            ++zerocopy_refused;
            continue;
          }
          if (r <= 0) DieErrno("MSG_ZEROCOPY");
          done += static_cast<size_t>(r);
          if (flags != 0) ++zerocopy_sends;
        }
      }
    }
  }
  bool copied = false;
  const long completed = ZerocopyCompletions(c.fd, zerocopy_sends, &copied);
  g_report.results.AddBool("zerocopy_completions_match", completed == zerocopy_sends);
  g_report.info.Add("zerocopy", so_zerocopy == 0 ? "used" : "refused by SO_ZEROCOPY, plain sends instead")
      .Add("zerocopy_sends", zerocopy_sends)
      .Add("zerocopy_enobufs", zerocopy_refused)
      .AddBool("zerocopy_copied", copied);
  if (close(c.fd) != 0) DieErrno("close");
  g_report.connections.push_back(c.Json());
}

// ---- m: sendfile after held small writes ----

// n of the stream's next bytes, written to file at offset, go out through
// sendfile: at offset (an explicit offset) or at the file position (none).
long long SendfileNext(Conn& c, int file, off_t offset, size_t n, bool explicit_offset) {
  const uint8_t* bytes = c.Next(n);
  if (pwrite(file, bytes, n, offset) != static_cast<ssize_t>(n)) DieErrno("pwrite");
  if (!explicit_offset && lseek(file, offset, SEEK_SET) != offset) DieErrno("lseek");
  long long total = 0;
  off_t at = offset;
  for (int calls = 0; total < static_cast<long long>(n) && calls < 1000; ++calls) {
    const ssize_t r = sendfile(c.fd, file, explicit_offset ? &at : nullptr, n - static_cast<size_t>(total));
    if (r <= 0) DieErrno("sendfile");
    total += r;
  }
  c.AssumeSent(static_cast<size_t>(total));
  return total;
}

void CaseSendfile(const Args& a) {
  Conn c = Conn::Open(static_cast<int>(a.Int("port")), StreamId(g_report.seed, 0));
  Rng rng(g_report.seed);
  char path[] = "/tmp/conform-sendfile-XXXXXX";
  const int file = mkstemp(path);
  if (file < 0) DieErrno("mkstemp");
  unlink(path);
  const size_t kFileBytes = 128 * kKiB;
  c.SendSmall(kHeldBytes, rng);
  g_report.results.Add("sendfile_offset", SendfileNext(c, file, 0, kFileBytes, true));
  c.SendSmall(kHeldBytes, rng);
  g_report.results.Add("sendfile_position", SendfileNext(c, file, kFileBytes, kFileBytes, false));
  c.SendSmall(kHeldBytes, rng);
  close(file);
  if (close(c.fd) != 0) DieErrno("close");
  g_report.connections.push_back(c.Json());
}

}  // namespace
}  // namespace conform

int main(int argc, char** argv) {
  using namespace conform;
  if (argc < 2) Args::Usage();
  static const std::map<std::string, void (*)(const Args&)> kCases = {
      {"mix", CaseMix},
      {"nonblocking", CaseNonblocking},
      {"request-reply", CaseRequestReply},
      {"fork", CaseFork},
      {"exec", CaseExec},
      {"exec-tail", CaseExecTail},
      {"exit", CaseExit},
      {"close-held", CaseCloseHeld},
      {"dup-writers", CaseDupWriters},
      {"peer-closed", CasePeerClosed},
      {"signal-writer", CaseSignalWriter},
      {"app-options", CaseAppOptions},
      {"send-flags", CaseSendFlags},
      {"sendfile", CaseSendfile},
      {"unseen-close", CaseUnseenClose},
      {"blocked-writer", CaseBlockedWriter},
      {"bad-buffer", CaseBadBuffer},
  };
#ifdef CONFORM_BIG_TLS
  // 1 MiB of thread-local storage, as some programs have: every thread's
  // stack must make room for it (a small one cannot).
  static thread_local volatile char big_tls[1 << 20];
  big_tls[argc] = 1;
  if (big_tls[argc] != 1) return 3;
#endif
  const auto found = kCases.find(argv[1]);
  if (found == kCases.end()) Args::Usage();
  const Args args(argc, argv);
  g_report.case_name = argv[1];
  g_report.seed = static_cast<unsigned long long>(args.Int("seed", 1));
  found->second(args);
  if (!g_report.silent) g_report.Emit();
  return 0;
}
