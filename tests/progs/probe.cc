// probe: runs a fixed script of socket and file calls, including the error
// cases, and prints each call's return value and errno. Run once plainly and
// once under the shim, the two outputs must be identical: the shim returns
// what libc returns. Built with _FORTIFY_SOURCE so that read and recv go
// through glibc's __read_chk family. Prints no fd numbers, ports or times.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

namespace {

int g_tcp_sockets = 0;
// Hidden from the compiler so that it does not reject the deliberate misuse.
void* volatile g_bad_pointer = reinterpret_cast<void*>(1);
volatile int g_negative = -1;
// Lengths unknown at compile time make glibc route read, recv and recvfrom
// through __read_chk, __recv_chk and __recvfrom_chk.
volatile size_t g_len100 = 100, g_len60 = 60, g_len7 = 7;

void Report(const char* name, long result) {
  const int e = result < 0 ? errno : 0;
  printf("%-28s %ld %s\n", name, result, e ? strerrorname_np(e) : "-");
}

// Normalized reports a descriptor-returning call as ok or its error, so that
// fd numbers (which may differ) never reach the output.
void ReportFd(const char* name, int fd) { Report(name, fd >= 0 ? 0 : fd); }

int TcpSocket(int flags = 0) {
  ++g_tcp_sockets;
  return socket(AF_INET, SOCK_STREAM | flags, 0);
}

int Listener(sockaddr_in* addr) {
  int fd = TcpSocket();
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  *addr = sockaddr_in{};
  addr->sin_family = AF_INET;
  addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(addr), sizeof(*addr));
  listen(fd, 16);
  socklen_t len = sizeof(*addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(addr), &len);
  return fd;
}

// Pair connects a client to the listener and accepts it.
void Pair(int lfd, const sockaddr_in& addr, int* client, int* server) {
  *client = TcpSocket();
  connect(*client, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  *server = accept(lfd, nullptr, nullptr);
}

}  // namespace

int main() {
  signal(SIGPIPE, SIG_IGN);
  char buf[4096];
  memset(buf, 'p', sizeof(buf));
  sockaddr_in addr;
  int lfd = Listener(&addr);
  int c, s;
  Pair(lfd, addr, &c, &s);

  // Writes through every API, then reads through every API.
  Report("write", write(c, buf, 100));
  iovec iov[3] = {{buf, 10}, {buf, 20}, {buf, 30}};
  Report("writev", writev(c, iov, 3));
  Report("send", send(c, buf, 7, 0));
  Report("sendto", sendto(c, buf, 8, 0, nullptr, 0));
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  Report("sendmsg", sendmsg(c, &msg, 0));
  mmsghdr mm[2] = {};
  mm[0].msg_hdr.msg_iov = &iov[0];
  mm[0].msg_hdr.msg_iovlen = 1;
  mm[1].msg_hdr.msg_iov = &iov[1];
  mm[1].msg_hdr.msg_iovlen = 1;
  Report("sendmmsg", sendmmsg(c, mm, 2, 0));
  usleep(20000);
  Report("read(fortified)", read(s, buf, g_len100));
  Report("recv(fortified)", recv(s, buf, g_len60, 0));
  Report("recv(peek)", recv(s, buf, 7, MSG_PEEK));
  Report("recvfrom(fortified)", recvfrom(s, buf, g_len7, 0, nullptr, nullptr));
  Report("readv", readv(s, iov, 1));
  msghdr rmsg{};
  iovec riov = {buf, 8};
  rmsg.msg_iov = &riov;
  rmsg.msg_iovlen = 1;
  Report("recvmsg", recvmsg(s, &rmsg, 0));
  char small[64];
  iovec rv[1] = {{small, sizeof(small)}};
  mmsghdr rm[1] = {};
  rm[0].msg_hdr.msg_iov = rv;
  rm[0].msg_hdr.msg_iovlen = 1;
  Report("recvmmsg", recvmmsg(s, rm, 1, MSG_DONTWAIT, nullptr));

  // Errors the kernel gives on tracked sockets.
  Report("recv(nonblocking,empty)", recv(s, buf, 10, MSG_DONTWAIT));
  Report("write(bad buffer)", write(c, g_bad_pointer, 10));
  Report("writev(bad iovcnt)", writev(c, iov, g_negative));
  int one = 1;
  Report("setsockopt(nodelay)", setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)));
  Report("setsockopt(short len)", setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, 1));
  Report("setsockopt(sndbuf)", setsockopt(c, SOL_SOCKET, SO_SNDBUF, &one, sizeof(one)));
  int unconnected = TcpSocket();
  Report("send(unconnected)", send(unconnected, buf, 10, MSG_NOSIGNAL));
  Report("recv(unconnected)", recv(unconnected, buf, 10, 0));
  close(unconnected);
  int refused = TcpSocket();
  sockaddr_in nowhere = addr;
  nowhere.sin_port = htons(1);
  Report("connect(refused)", connect(refused, reinterpret_cast<sockaddr*>(&nowhere), sizeof(nowhere)));
  close(refused);
  int nb = TcpSocket(SOCK_NONBLOCK);
  Report("connect(nonblocking)", connect(nb, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 ? 0 : -(errno != EINPROGRESS));
  int nbs = accept(lfd, nullptr, nullptr);
  close(nbs);
  close(nb);
  Report("fcntl(setfl nonblock)", fcntl(lfd, F_SETFL, O_NONBLOCK));
  int on = 1;
  Report("ioctl(fionbio)", ioctl(s, FIONBIO, &on));
  Report("ioctl(fionread)", ioctl(s, FIONREAD, &on));
  on = 0;
  Report("ioctl(fionbio off)", ioctl(s, FIONBIO, &on));
  ReportFd("accept(nothing pending)", accept(lfd, nullptr, nullptr));
  ReportFd("accept4(nothing pending)", accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC));

  // Descriptor games on tracked sockets.
  int d1 = dup(c);
  ReportFd("dup", d1);
  Report("write(dup)", write(d1, buf, 3));
  int d2 = fcntl(c, F_DUPFD_CLOEXEC, 100);
  ReportFd("fcntl(dupfd)", d2);
  Report("close(dup)", close(d1));
  Report("close(dupfd)", close(d2));
  int other_c, other_s;
  Pair(lfd, addr, &other_c, &other_s);
  ReportFd("dup2(onto tracked)", dup2(c, other_c));
  Report("write(dup2 target)", write(other_c, buf, 4));
  ReportFd("dup3(same fd)", dup3(c, c, 0));
  Report("close(dup2 target)", close(other_c));
  Report("close(other server)", close(other_s));
  Report("close(twice)", close(other_s));

  // Wait calls pass through.
  pollfd pfd = {s, POLLIN, 0};
  Report("poll", poll(&pfd, 1, 100));
  timespec ts = {0, 1000000};
  Report("ppoll", ppoll(&pfd, 1, &ts, nullptr));
  fd_set rs;
  FD_ZERO(&rs);
  FD_SET(s, &rs);
  timeval tv = {0, 1000};
  Report("select", select(s + 1, &rs, nullptr, nullptr, &tv));
  FD_ZERO(&rs);
  FD_SET(s, &rs);
  Report("pselect", pselect(s + 1, &rs, nullptr, nullptr, &ts, nullptr));
  int ep = epoll_create1(0);
  epoll_event ev = {};
  ev.events = EPOLLIN;
  epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev);
  epoll_event out[4];
  Report("epoll_wait", epoll_wait(ep, out, 4, 100));
  Report("epoll_pwait", epoll_pwait(ep, out, 4, 10, nullptr));
  close(ep);
  ssize_t drained = 0, r;
  while ((r = recv(s, buf, sizeof(buf), MSG_DONTWAIT)) > 0) drained += r;
  Report("drain", drained);

  // sendfile from a file to a tracked socket.
  char path[] = "/tmp/tcpadvise-probe-XXXXXX";
  int file = mkstemp(path);
  Report("write(file)", write(file, buf, 1000));
  off_t off = 0;
  Report("sendfile", sendfile(c, file, &off, 1000));
  usleep(20000);
  Report("read(sendfile data)", read(s, buf, sizeof(buf)));
  Report("lseek+read(file)", lseek(file, 0, SEEK_SET) + read(file, buf, 10));
  close(file);
  unlink(path);

  // Other kinds of descriptors stay untracked but behave the same.
  int p[2];
  Report("pipe", pipe(p));
  Report("write(pipe)", write(p[1], buf, 5));
  Report("read(pipe)", read(p[0], buf, 5));
  close(p[0]);
  close(p[1]);
  int udp = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in uaddr = addr;
  uaddr.sin_port = 0;
  bind(udp, reinterpret_cast<sockaddr*>(&uaddr), sizeof(uaddr));
  socklen_t ulen = sizeof(uaddr);
  getsockname(udp, reinterpret_cast<sockaddr*>(&uaddr), &ulen);
  Report("sendto(udp)", sendto(udp, buf, 9, 0, reinterpret_cast<sockaddr*>(&uaddr), sizeof(uaddr)));
  Report("recvfrom(udp)", recvfrom(udp, buf, sizeof(buf), 0, nullptr, nullptr));
  close(udp);
  int sp[2];
  Report("socketpair(unix)", socketpair(AF_UNIX, SOCK_STREAM, 0, sp));
  Report("write(unix)", write(sp[0], buf, 6));
  Report("read(unix)", read(sp[1], buf, 6));
  close(sp[0]);
  close(sp[1]);

  // The peer goes away.
  Report("shutdown(wr)", shutdown(c, SHUT_WR));
  Report("write(after shutdown)", write(c, buf, 10));
  Report("read(eof)", read(s, buf, 10));
  close(s);
  usleep(20000);
  Report("send(peer closed)", send(c, buf, 10, MSG_NOSIGNAL));
  usleep(20000);
  Report("send(peer reset)", send(c, buf, 10, MSG_NOSIGNAL));
  Report("close", close(c));
  Report("close(listener)", close(lfd));
  Report("read(closed fd)", read(c, buf, 1));
  Report("close_range", close_range(1000, 1010, 0));
  printf("tcp_sockets %d\n", g_tcp_sockets);
  return 0;
}
