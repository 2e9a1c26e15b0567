// fork_child_costs: what a fork child pays for the pages it writes and for
// the trace file it creates (session 10, issue 16: a fork-per-connection
// server's backend under the shim). Two measurements, medians of many:
//   pages: the time a fork child takes for its first write to one page of a
//     private region its parent wrote (copied on write), to one page of a
//     region the kernel gives children zeroed (MADV_WIPEONFORK: no copy, but
//     the child's first fault there sets the region up), and to two copied
//     pages;
//   files DIR: creating a 4,000-byte file in DIR the way the shim writes a
//     trace (getrandom, open O_EXCL|O_NOFOLLOW 0600 under a temporary name,
//     write, close, rename), each call timed, and with O_TMPFILE and a linkat
//     through /proc/self/fd instead.
//   build/bench/fork_child_costs pages
//   build/bench/fork_child_costs files /dev/shm/somewhere-empty
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { kRuns = 1000, kRegion = 1 << 20 };

static long Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000L + t.tv_nsec;
}

static int Compare(const void* a, const void* b) {
  const long x = *(const long*)a, y = *(const long*)b;
  return x < y ? -1 : x > y;
}

static long Median(long* v, int n) {
  qsort(v, (size_t)n, sizeof(long), Compare);
  return v[n / 2];
}

static int Pages(void) {
  char* copied = mmap(NULL, kRegion, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  char* wiped = mmap(NULL, kRegion, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  int fds[2];
  if (copied == MAP_FAILED || wiped == MAP_FAILED || pipe(fds) != 0) return 1;
  memset(copied, 1, kRegion);
  memset(wiped, 1, kRegion);
  if (madvise(wiped, kRegion, MADV_WIPEONFORK) != 0) {
    perror("madvise(MADV_WIPEONFORK)");
    return 1;
  }
  static long times[3][kRuns];
  static const char* const kNames[3] = {"a copied page", "a wipe-on-fork page", "two copied pages"};
  for (int kind = 0; kind < 3; ++kind) {
    for (int i = 0; i < kRuns; ++i) {
      const pid_t child = fork();
      if (child == 0) {
        const long start = Now();
        if (kind == 1) {
          wiped[3 * 4096] = 2;
        } else {
          copied[3 * 4096] = 2;
          if (kind == 2) copied[9 * 4096] = 2;
        }
        const long took = Now() - start;
        _exit(write(fds[1], &took, sizeof(took)) == sizeof(took) ? 0 : 1);
      }
      if (child < 0 || read(fds[0], &times[kind][i], sizeof(long)) != sizeof(long)) return 1;
      waitpid(child, NULL, 0);
    }
    printf("a fork child's first write to %s: %ld ns (median of %d)\n", kNames[kind], Median(times[kind], kRuns), kRuns);
  }
  return 0;
}

static int Files(const char* dir) {
  char data[4000], path[4096], temp[4096], link[64];
  memset(data, 'x', sizeof(data));
  static long calls[5][kRuns], tmpfile[kRuns];
  for (int i = 0; i < kRuns; ++i) {
    unsigned long long nonce = 0;
    long t[6];
    t[0] = Now();
    if (getrandom(&nonce, sizeof(nonce), GRND_NONBLOCK) != sizeof(nonce)) return 1;
    t[1] = Now();
    snprintf(temp, sizeof(temp), "%s/.a.%d.%016llx.json.tmp", dir, i, nonce);
    snprintf(path, sizeof(path), "%s/a.%d.json", dir, i);
    const int fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    t[2] = Now();
    if (fd < 0 || write(fd, data, sizeof(data)) != sizeof(data)) return 1;
    t[3] = Now();
    close(fd);
    t[4] = Now();
    if (rename(temp, path) != 0) return 1;
    t[5] = Now();
    for (int k = 0; k < 5; ++k) calls[k][i] = t[k + 1] - t[k];
  }
  for (int i = 0; i < kRuns; ++i) {
    const long start = Now();
    snprintf(path, sizeof(path), "%s/b.%d.json", dir, i);
    const int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, data, sizeof(data)) != sizeof(data)) return 1;
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    if (linkat(AT_FDCWD, link, AT_FDCWD, path, AT_SYMLINK_FOLLOW) != 0) return 1;
    close(fd);
    tmpfile[i] = Now() - start;
  }
  static const char* const kCalls[5] = {"getrandom", "open", "write", "close", "rename"};
  long total = 0;
  for (int k = 0; k < 5; ++k) {
    const long median = Median(calls[k], kRuns);
    total += median;
    printf("%s %ld ns, ", kCalls[k], median);
  }
  printf("together %ld ns; O_TMPFILE, write, linkat, close %ld ns (medians of %d files)\n", total,
         Median(tmpfile, kRuns), kRuns);
  for (int i = 0; i < kRuns; ++i) {
    snprintf(path, sizeof(path), "%s/a.%d.json", dir, i);
    unlink(path);
    snprintf(path, sizeof(path), "%s/b.%d.json", dir, i);
    unlink(path);
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "pages") == 0) return Pages();
  if (argc == 3 && strcmp(argv[1], "files") == 0) return Files(argv[2]);
  fprintf(stderr, "usage: fork_child_costs pages | files DIR (an empty directory, e.g. on /dev/shm)\n");
  return 2;
}
