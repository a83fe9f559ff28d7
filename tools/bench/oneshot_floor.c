/* oneshot_floor: the bare one-shot 8 B all-reduce of N processes on one host,
 * with no library around it: each rank stores its value and the call number
 * in its own cache line (double-buffered by call parity), then reads every
 * other rank's once that rank's call number has arrived, and sums them in
 * rank order, each rank checking the sum. Timed like comm-bench: per
 * iteration a flag barrier, then the call; the iteration's time is the
 * slowest rank's; the figure is the median.
 *
 * It is the floor for the direct-memory engine where shm_floor.c (2 ranks)
 * does not reach: with more ranks than cores a rank that spins holds the core
 * a peer needs, so here, as in comm's shm transport, every wait yields at
 * once when the ranks outnumber the usable cores; otherwise each spins. With
 * -b core (the default) rank r is bound to the usable core r mod cores, as
 * commrun --bind core places ranks; with -b none the kernel places them.
 *   build/bin/oneshot-floor [-r 4] [-n 20000] [-b core|none]   (the CMake target oneshot-floor)
 * Run by tools/compare-shm.sh beside comm-bench. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { kMaxRanks = 64 };

typedef struct {
  _Alignas(64) atomic_long call;
  double value[2];
} Slot;
typedef struct {
  _Alignas(64) atomic_long entered;
} Arrival;

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}
static int cmp(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}
static void wait_for(atomic_long* word, long at_least, int yield) {
  while (atomic_load_explicit(word, memory_order_acquire) < at_least)
    if (yield) sched_yield();
}
static void* shared(size_t bytes) {
  void* p = mmap(0, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    perror("oneshot_floor: mmap");
    exit(1);
  }
  memset(p, 0, bytes);
  return p;
}

int main(int argc, char** argv) {
  int ranks = 2, iters = 20000, bind = 1, bad = 0;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 < argc && !strcmp(argv[i], "-r")) ranks = atoi(argv[i + 1]);
    else if (i + 1 < argc && !strcmp(argv[i], "-n")) iters = atoi(argv[i + 1]);
    else if (i + 1 < argc && !strcmp(argv[i], "-b") && (!strcmp(argv[i + 1], "core") || !strcmp(argv[i + 1], "none")))
      bind = !strcmp(argv[i + 1], "core");
    else bad = 1;
  }
  if (bad || ranks < 2 || ranks > kMaxRanks || iters < 1) {
    fprintf(stderr, "usage: oneshot_floor [-r RANKS (2-%d)] [-n ITERATIONS (>= 1)] [-b core|none]\n", kMaxRanks);
    return 2;
  }
  cpu_set_t set;
  const int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  const int yield = ranks > cpus;
  Slot* slot = shared(sizeof(Slot) * kMaxRanks);
  Arrival* arrival = shared(sizeof(Arrival) * kMaxRanks);
  double* times = shared(sizeof(double) * (size_t)ranks * (size_t)iters);
  int rank = 0;
  for (int r = 1; r < ranks && rank == 0; ++r) {
    const pid_t pid = fork();
    if (pid < 0) {
      perror("oneshot_floor: fork");
      return 1;
    }
    if (pid == 0) rank = r;
  }
  if (bind) {  // rank r on usable core r mod cores, as commrun --bind core does
    cpu_set_t mine;
    CPU_ZERO(&mine);
    for (int c = 0, seen = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set) && seen++ == rank % cpus) CPU_SET(c, &mine);
    sched_setaffinity(0, sizeof mine, &mine);
  }
  long wrong = 0;  // calls whose sum was not the one every rank's value gives
  for (long call = 1; call <= iters; ++call) {
    atomic_store_explicit(&arrival[rank].entered, call, memory_order_release);
    for (int p = 0; p < ranks; ++p) wait_for(&arrival[p].entered, call, yield);
    const double t0 = now_us();
    slot[rank].value[call & 1] = rank + (double)call;
    atomic_store_explicit(&slot[rank].call, call, memory_order_release);
    double sum = 0;
    for (int p = 0; p < ranks; ++p) {
      wait_for(&slot[p].call, call, yield);
      sum += slot[p].value[call & 1];
    }
    times[(size_t)rank * (size_t)iters + (size_t)(call - 1)] = now_us() - t0;
    // Every rank goes on to the end (one that left would hang the others).
    if (sum != (double)ranks * (double)call + ranks * (ranks - 1) / 2.0) ++wrong;
  }
  if (wrong) fprintf(stderr, "oneshot_floor: rank %d summed %ld of %d calls wrongly\n", rank, wrong, iters);
  if (rank != 0) _exit(wrong ? 1 : 0);
  int status = 0, failed = wrong != 0;
  while (wait(&status) > 0) failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  if (failed) {
    fprintf(stderr, "oneshot_floor: a rank summed wrongly or failed: no figure\n");
    return 1;
  }
  double* slowest = malloc(sizeof(double) * (size_t)iters);
  for (int i = 0; i < iters; ++i) {
    slowest[i] = 0;
    for (int r = 0; r < ranks; ++r) {
      const double t = times[(size_t)r * (size_t)iters + (size_t)i];
      if (t > slowest[i]) slowest[i] = t;
    }
  }
  qsort(slowest, (size_t)iters, sizeof(double), cmp);
  printf("bare one-shot 8 B all-reduce, %d ranks on %d cores (%s, %s): median %.3f us (p10 %.3f, p90 %.3f)\n", ranks,
         cpus, yield ? "waits yield" : "waits spin", bind ? "bound" : "unbound", slowest[iters / 2],
         slowest[iters / 10], slowest[iters * 9 / 10]);
  free(slowest);
  return 0;
}
