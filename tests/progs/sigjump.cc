// sigjump: a program that leaves its signal handlers with siglongjmp, as
// shells and interpreters do, then writes in bursts of several writes on a
// loopback connection to itself. Argument "info" installs the handler with
// SA_SIGINFO. Prints "handler <name>" for what sigaction reads back, then
// "done <bytes>" once the server side has read every byte in order.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "progs.h"

namespace {

sigjmp_buf g_env;
volatile sig_atomic_t g_jumps = 0;

void JumpOut(int) {
  g_jumps = g_jumps + 1;
  siglongjmp(g_env, 1);
}

void JumpOutInfo(int sig, siginfo_t* info, void*) {
  if (info->si_signo != sig) _exit(3);
  JumpOut(sig);
}

bool ReadFull(int fd, char* buf, size_t size) {
  for (size_t got = 0; got < size;) {
    const ssize_t n = read(fd, buf + got, size - got);
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const bool info = argc > 1 && strcmp(argv[1], "info") == 0;
  sockaddr_in addr;
  const int listener = ListenOnLoopback(&addr, 1);
  if (listener < 0) return 2;
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return 2;
  const int server = accept(listener, nullptr, nullptr);
  if (server < 0) return 2;

  struct sigaction sa {};
  if (info) {
    sa.sa_sigaction = JumpOutInfo;
    sa.sa_flags = SA_SIGINFO;
  } else {
    sa.sa_handler = JumpOut;
  }
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGUSR1, &sa, nullptr) != 0) return 2;
  struct sigaction now {};
  sigaction(SIGUSR1, nullptr, &now);
  const bool same = info ? now.sa_sigaction == JumpOutInfo && (now.sa_flags & SA_SIGINFO) : now.sa_handler == JumpOut;
  printf("handler %s\n", same ? "own" : "other");
  // Twice out of the handler before the first write, which a policy acts on.
  for (int i = 0; i < 2; ++i) {
    if (sigsetjmp(g_env, 1) == 0) raise(SIGUSR1);
  }
  if (g_jumps != 2) return 4;

  constexpr int kRounds = 50;
  constexpr int kWrites = 4;
  long long total = 0;
  for (int round = 0; round < kRounds; ++round) {
    char burst[kWrites * 2];
    for (int w = 0; w < kWrites; ++w) {
      char piece[2] = {static_cast<char>('a' + round % 26), static_cast<char>('0' + w)};
      if (write(client, piece, 2) != 2) return 5;
    }
    if (!ReadFull(server, burst, sizeof(burst))) return 6;
    for (int w = 0; w < kWrites; ++w) {
      if (burst[2 * w] != 'a' + round % 26 || burst[2 * w + 1] != '0' + w) return 7;
    }
    total += sizeof(burst);
    char reply = 'r';
    if (write(server, &reply, 1) != 1 || !ReadFull(client, &reply, 1)) return 8;
  }
  printf("done %lld\n", total);
  return 0;
}
