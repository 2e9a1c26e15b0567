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
//   spool DIR: a fork child's 3,000-byte trace put in a spool its parent
//     mapped (session 15: a shared 64 MiB file in DIR, 4 MiB allocated; the
//     claim a compare-and-swap on the header's offset, the bytes copied, a
//     flag stored: libtcpadvise/trace_spool.cc's steps, its two first
//     touches of shared file pages) against the same child creating a file
//     (getrandom, open, write, close, rename), the arms alternating, each
//     timed in the child.
//   vmas: what fork and exit cost the kernel for the mappings a process has
//     (session 12: the shim adds 15 to a PostgreSQL postmaster's 251, with
//     80 written pages in them): the CPU time of a fork whose child exits at
//     once, parent and child together, with 16 more mappings of one written
//     page each, with 80 more written pages in one mapping, and with 5
//     read-only mappings of a file (a library's), each fork paired with one
//     without them.
//   build/bench/fork_child_costs pages
//   build/bench/fork_child_costs files /dev/shm/somewhere-empty
//   build/bench/fork_child_costs spool /dev/shm/somewhere-empty
//   build/bench/fork_child_costs vmas
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
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

// CpuNs is the CPU time of this process and its waited-for children.
static long CpuNs(void) {
  struct timespec self;
  struct rusage children;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &self);
  getrusage(RUSAGE_CHILDREN, &children);
  return self.tv_sec * 1000000000L + self.tv_nsec + children.ru_utime.tv_sec * 1000000000L +
         children.ru_utime.tv_usec * 1000L + children.ru_stime.tv_sec * 1000000000L + children.ru_stime.tv_usec * 1000L;
}

// ForkExitNs is the CPU time of one fork whose child exits at once, waited for.
static long ForkExitNs(void) {
  const long start = CpuNs();
  const pid_t child = fork();
  if (child == 0) _exit(0);
  if (child < 0) return -1;
  waitpid(child, NULL, 0);
  return CpuNs() - start;
}

// The arms' extra mappings: kMaps anonymous ones of one written page each, kPages written pages in
// one, kFiles read-only mappings of this program's file with one page read in each (a library's).
enum { kMaps = 16, kPages = 80, kFiles = 5 };
static char* g_mapped[kFiles];

static size_t ArmSize(int arm) { return arm == 0 ? 2 * kMaps * 4096 : arm == 1 ? kPages * 4096 : 4096; }

static int MapArm(int arm) {
  if (arm == 2) {
    const int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    for (int i = 0; i < kFiles; ++i) {
      g_mapped[i] = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
      if (g_mapped[i] == MAP_FAILED) return -1;
      (void)*(volatile char*)g_mapped[i];
    }
    close(fd);
    return 0;
  }
  char* region = mmap(NULL, ArmSize(arm), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (region == MAP_FAILED) return -1;
  g_mapped[0] = region;
  if (arm == 1) {
    memset(region, 1, ArmSize(arm));
    return 0;
  }
  // Every other page read-only: the kernel cannot merge them into one mapping.
  for (int i = 0; i < kMaps; ++i) {
    region[2 * i * 4096] = 1;
    if (mprotect(region + (2 * i + 1) * 4096, 4096, PROT_READ) != 0) return -1;
  }
  return 0;
}

static void UnmapArm(int arm) {
  for (int i = 0; i < (arm == 2 ? kFiles : 1); ++i) munmap(g_mapped[i], ArmSize(arm));
}

static int Vmas(void) {
  enum { kRounds = 4000 };
  static long base[3][kRounds], more[3][kRounds];
  for (int i = 0; i < kRounds; ++i) {
    for (int arm = 0; arm < 3; ++arm) {
      if (MapArm(arm) != 0) return 1;
      more[arm][i] = ForkExitNs();
      UnmapArm(arm);
      base[arm][i] = ForkExitNs();
    }
  }
  static const char* const kArms[3] = {"16 mappings of one written page", "80 written pages in one mapping",
                                       "5 read-only mappings of a file, one page read in each"};
  for (int arm = 0; arm < 3; ++arm) {
    static long paired[kRounds];
    for (int i = 0; i < kRounds; ++i) paired[i] = more[arm][i] - base[arm][i];
    const long b = Median(base[arm], kRounds), m = Median(more[arm], kRounds);
    printf("fork and exit, CPU: %ld ns without, %ld ns with %s; paired difference %ld ns (medians of %d)\n", b, m,
           kArms[arm], Median(paired, kRounds), kRounds);
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

// ChildTraceNs: a fork child's append of data to the spool at map (the
// first 64 bytes its header, the next claim's offset at byte 24), or, with
// map NULL, its file of data in dir, or with dir NULL too nothing (the
// timing's own cost in a new child); the child's time, through a pipe.
static long ChildTraceNs(char* map, const char* dir, const char* data, size_t size, int i) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    const long start = Now();
    if (map != NULL) {
      unsigned long long* offset = (unsigned long long*)(map + 24);
      const unsigned long long need = (16 + size + 7) & ~7ull;
      unsigned long long claimed = __atomic_load_n(offset, __ATOMIC_RELAXED), at;
      do {
        at = claimed;
        if ((at & 4095) + need > 4096) at = (at + 4095) & ~4095ull;
      } while (!__atomic_compare_exchange_n(offset, &claimed, at + need, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
      unsigned* record = (unsigned*)(map + at);
      record[0] = 0x434552ff;
      record[1] = (unsigned)size;
      record[3] = (unsigned)getpid();
      memcpy(record + 4, data, size);
      __atomic_store_n(&record[2], 0x54494d43u, __ATOMIC_RELEASE);
    } else if (dir != NULL) {
      char path[4096], temp[4096];
      unsigned long long nonce = 0;
      if (getrandom(&nonce, sizeof(nonce), GRND_NONBLOCK) != sizeof(nonce)) _exit(1);
      snprintf(temp, sizeof(temp), "%s/.c.%d.%016llx.json.tmp", dir, i, nonce);
      snprintf(path, sizeof(path), "%s/c.%d.json", dir, i);
      const int fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd < 0 || write(fd, data, size) != (ssize_t)size || close(fd) != 0 || rename(temp, path) != 0) _exit(1);
    }
    const long took = Now() - start;
    _exit(write(fds[1], &took, sizeof(took)) == sizeof(took) ? 0 : 1);
  }
  long took = -1;
  close(fds[1]);
  if (pid < 0 || read(fds[0], &took, sizeof(took)) != sizeof(took)) took = -1;
  close(fds[0]);
  int status;
  if (pid > 0) waitpid(pid, &status, 0);
  return took;
}

static int Spool(const char* dir) {
  char path[4096], data[3000];
  memset(data, 'x', sizeof(data));
  snprintf(path, sizeof(path), "%s/bench.spool", dir);
  const long capacity = 64L << 20;
  const int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 || ftruncate(fd, capacity) != 0 || fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 4L << 20) != 0) return 1;
  char* map = mmap(NULL, (size_t)capacity, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return 1;
  const unsigned long long first = 64;
  memcpy(map + 24, &first, sizeof(first));
  static long spooled[kRuns], filed[kRuns], nothing[kRuns];
  for (int i = 0; i < kRuns; ++i) {
    spooled[i] = ChildTraceNs(map, dir, data, sizeof(data), i);
    filed[i] = ChildTraceNs(NULL, dir, data, sizeof(data), i);
    nothing[i] = ChildTraceNs(NULL, NULL, data, sizeof(data), i);
    if (spooled[i] < 0 || filed[i] < 0 || nothing[i] < 0) return 1;
  }
  printf("a fork child's 3,000-byte trace: into the spool %ld ns, into a file of its own %ld ns; the timing alone %ld ns"
         " (medians of %d)\n", Median(spooled, kRuns), Median(filed, kRuns), Median(nothing, kRuns), kRuns);
  munmap(map, (size_t)capacity);
  unlink(path);
  for (int i = 0; i < kRuns; ++i) {
    snprintf(path, sizeof(path), "%s/c.%d.json", dir, i);
    unlink(path);
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "pages") == 0) return Pages();
  if (argc == 3 && strcmp(argv[1], "files") == 0) return Files(argv[2]);
  if (argc == 2 && strcmp(argv[1], "vmas") == 0) return Vmas();
  if (argc == 3 && strcmp(argv[1], "spool") == 0) return Spool(argv[2]);
  fprintf(stderr, "usage: fork_child_costs pages | vmas | files DIR | spool DIR (an empty directory, e.g. on /dev/shm)\n");
  return 2;
}
