// burst: the project's own TCP client and server that talk in bursts of small
// writes, the pattern tcpadvise exists to find. The server answers each
// request (writes * size bytes) with a reply; the client sends every request
// as `writes` separate writes through the chosen API and waits for the reply.
// The client prints what it did as JSON, so tests can compare the trace with
// the truth.
//
//   burst server [--port P] [--reply R] [--request BYTES]
//   burst client --port P [--rounds N] [--writes W] [--size S] [--reply R]
//                [--api write|writev|send|sendto|sendmsg] [--single-writev]
//                [--nodelay] [--cork] [--threads T] [--fork-rounds N]
//                [--close-all] [--think-us US] [--connections K] [--host ADDR]
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

namespace {

struct Options {
  std::string mode;
  std::string host = "127.0.0.1";
  int port = 0;
  long rounds = 100;
  int writes = 15;
  int size = 2;
  int reply = 2;
  long request = -1;  // server: bytes per request; default writes * size
  std::string api = "write";
  bool single_writev = false;
  bool nodelay = false;
  bool cork = false;
  int threads = 1;
  long fork_rounds = 0;
  bool close_all = false;
  long think_us = 0;  // client: pause between a request and reading its reply
  int connections = 1;  // client: connections one after another, each doing --rounds
};

[[noreturn]] void Die(const char* what) {
  perror(what);
  exit(1);
}

[[noreturn]] void Usage() {
  fprintf(stderr,
          "usage: burst server [--port P] [--reply R] [--request BYTES] [--writes W --size S]\n"
          "       burst client --port P [--rounds N] [--writes W] [--size S] [--reply R]\n"
          "                    [--api write|writev|send|sendto|sendmsg] [--single-writev]\n"
          "                    [--nodelay] [--cork] [--threads T] [--fork-rounds N] [--close-all]\n"
          "                    [--think-us US] [--connections K]\n");
  exit(2);
}

Options Parse(int argc, char** argv) {
  if (argc < 2) Usage();
  Options o;
  o.mode = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) Usage();
      return argv[++i];
    };
    if (a == "--port") o.port = atoi(next());
    else if (a == "--host") o.host = next();
    else if (a == "--rounds") o.rounds = atol(next());
    else if (a == "--writes") o.writes = atoi(next());
    else if (a == "--size") o.size = atoi(next());
    else if (a == "--reply") o.reply = atoi(next());
    else if (a == "--request") o.request = atol(next());
    else if (a == "--api") o.api = next();
    else if (a == "--single-writev") o.single_writev = true;
    else if (a == "--nodelay") o.nodelay = true;
    else if (a == "--cork") o.cork = true;
    else if (a == "--threads") o.threads = atoi(next());
    else if (a == "--fork-rounds") o.fork_rounds = atol(next());
    else if (a == "--close-all") o.close_all = true;
    else if (a == "--think-us") o.think_us = atol(next());
    else if (a == "--connections") o.connections = atoi(next());
    else Usage();
  }
  if (o.request < 0) o.request = static_cast<long>(o.writes) * o.size;
  if (o.mode != "server" && o.mode != "client") Usage();
  return o;
}

double NowUs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

bool ReadExactly(int fd, char* buf, long n) {
  while (n > 0) {
    ssize_t r = read(fd, buf, static_cast<size_t>(n));
    if (r <= 0) return false;
    buf += r;
    n -= r;
  }
  return true;
}

bool WriteAll(int fd, const char* buf, long n) {
  while (n > 0) {
    ssize_t w = write(fd, buf, static_cast<size_t>(n));
    if (w <= 0) return false;
    buf += w;
    n -= w;
  }
  return true;
}

// ---- server ----

struct ServerConn {
  int fd;
  const Options* o;
};

void* ServeConnection(void* arg) {
  ServerConn* c = static_cast<ServerConn*>(arg);
  std::vector<char> request(static_cast<size_t>(std::max(c->o->request, 1L)));
  std::vector<char> reply(static_cast<size_t>(std::max(c->o->reply, 1)), 'r');
  while (ReadExactly(c->fd, request.data(), c->o->request)) {
    if (!WriteAll(c->fd, reply.data(), c->o->reply)) break;
  }
  close(c->fd);
  delete c;
  return nullptr;
}

volatile sig_atomic_t g_stop = 0;

void OnStopSignal(int) { g_stop = 1; }

// StopOnSignals makes SIGTERM and SIGINT interrupt accept (no SA_RESTART), so
// that the server exits through exit() like a well-behaved daemon.
void StopOnSignals() {
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

int RunServer(const Options& o) {
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  if (lfd < 0) Die("socket");
  int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(o.port));
  inet_pton(AF_INET, o.host.c_str(), &addr.sin_addr);
  if (bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) Die("bind");
  if (listen(lfd, 128) != 0) Die("listen");
  socklen_t len = sizeof(addr);
  getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len);
  printf("listening %d\n", ntohs(addr.sin_port));
  fflush(stdout);
  signal(SIGPIPE, SIG_IGN);
  StopOnSignals();
  while (!g_stop) {
    int fd = accept(lfd, nullptr, nullptr);
    if (fd < 0) continue;
    pthread_t t;
    pthread_create(&t, nullptr, ServeConnection, new ServerConn{fd, &o});
    pthread_detach(t);
  }
  return 0;
}

// ---- client ----

struct ClientResult {
  long rounds = 0;
  long writes = 0;
  long bytes = 0;
  std::vector<double> round_us;
};

int Connect(const Options& o) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) Die("socket");
  if (o.nodelay) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(o.port));
  inet_pton(AF_INET, o.host.c_str(), &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) Die("connect");
  return fd;
}

void SetCork(int fd, int on) { setsockopt(fd, IPPROTO_TCP, TCP_CORK, &on, sizeof(on)); }

// SendPiece sends one small write through the API under test.
ssize_t SendPiece(int fd, const Options& o, const char* buf, size_t n) {
  if (o.api == "write") return write(fd, buf, n);
  if (o.api == "send") return send(fd, buf, n, 0);
  if (o.api == "sendto") return sendto(fd, buf, n, 0, nullptr, 0);
  iovec iov{const_cast<char*>(buf), n};
  if (o.api == "writev") return writev(fd, &iov, 1);
  if (o.api == "sendmsg") {
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    return sendmsg(fd, &msg, 0);
  }
  fprintf(stderr, "burst: unknown --api %s\n", o.api.c_str());
  exit(2);
}

void RunRounds(int fd, const Options& o, long rounds, ClientResult* r) {
  std::vector<char> piece(static_cast<size_t>(o.size), 'q');
  std::vector<iovec> iov(static_cast<size_t>(o.writes), iovec{piece.data(), piece.size()});
  std::vector<char> reply(static_cast<size_t>(std::max(o.reply, 1)));
  for (long i = 0; i < rounds; ++i) {
    const double start = NowUs();
    if (o.cork) SetCork(fd, 1);
    if (o.single_writev) {
      // Small requests only: a short writev would need a resend loop.
      if (writev(fd, iov.data(), o.writes) != static_cast<ssize_t>(o.writes) * o.size) Die("writev");
      r->writes += 1;
    } else {
      for (int w = 0; w < o.writes; ++w) {
        if (SendPiece(fd, o, piece.data(), piece.size()) != o.size) Die("write");
      }
      r->writes += o.writes;
    }
    if (o.cork) SetCork(fd, 0);
    if (o.think_us > 0) usleep(static_cast<useconds_t>(o.think_us));
    r->bytes += static_cast<long>(o.writes) * o.size;
    if (!ReadExactly(fd, reply.data(), o.reply)) Die("read reply");
    r->round_us.push_back(NowUs() - start);
    r->rounds += 1;
  }
}

struct ThreadJob {
  const Options* o;
  ClientResult result;
};

void* ClientThread(void* arg) {
  ThreadJob* job = static_cast<ThreadJob*>(arg);
  int fd = Connect(*job->o);
  RunRounds(fd, *job->o, job->o->rounds, &job->result);
  close(fd);
  return nullptr;
}

void CloseAllFds() {
  // What daemons do: close every descriptor above stderr, then once more
  // with close_range.
  for (int fd = 3; fd < 1024; ++fd) close(fd);
  syscall(436 /* close_range */, 3u, ~0u, 0);
}

int RunClient(const Options& o) {
  if (o.close_all) CloseAllFds();
  ClientResult total;
  double start = NowUs();
  if (o.threads > 1) {
    std::vector<ThreadJob> jobs(static_cast<size_t>(o.threads));
    std::vector<pthread_t> ids(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
      jobs[i].o = &o;
      pthread_create(&ids[i], nullptr, ClientThread, &jobs[i]);
    }
    for (size_t i = 0; i < jobs.size(); ++i) {
      pthread_join(ids[i], nullptr);
      total.rounds += jobs[i].result.rounds;
      total.writes += jobs[i].result.writes;
      total.bytes += jobs[i].result.bytes;
      total.round_us.insert(total.round_us.end(), jobs[i].result.round_us.begin(), jobs[i].result.round_us.end());
    }
  } else {
    int fd = Connect(o);
    if (o.fork_rounds > 0) {
      // The child takes over the connection for fork_rounds rounds, then
      // the parent finishes its own rounds on it.
      RunRounds(fd, o, o.rounds / 2, &total);
      fflush(stdout);
      pid_t child = fork();
      if (child < 0) Die("fork");
      if (child == 0) {
        ClientResult mine;
        RunRounds(fd, o, o.fork_rounds, &mine);
        printf("{\"child_rounds\": %ld, \"child_writes\": %ld, \"child_bytes\": %ld, \"child_pid\": %d}\n",
               mine.rounds, mine.writes, mine.bytes, getpid());
        exit(0);
      }
      int status = 0;
      waitpid(child, &status, 0);
      RunRounds(fd, o, o.rounds - o.rounds / 2, &total);
    } else {
      RunRounds(fd, o, o.rounds, &total);
    }
    close(fd);
    for (int c = 1; c < o.connections; ++c) {
      fd = Connect(o);
      RunRounds(fd, o, o.rounds, &total);
      close(fd);
    }
  }
  double elapsed = NowUs() - start;
  std::sort(total.round_us.begin(), total.round_us.end());
  double median = total.round_us.empty() ? 0 : total.round_us[total.round_us.size() / 2];
  printf("{\"rounds\": %ld, \"writes\": %ld, \"bytes\": %ld, \"reply_bytes\": %ld, \"elapsed_us\": %.1f, "
         "\"round_us_median\": %.2f, \"pid\": %d}\n",
         total.rounds, total.writes, total.bytes, total.rounds * o.reply, elapsed, median, getpid());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = Parse(argc, argv);
  return o.mode == "server" ? RunServer(o) : RunClient(o);
}
