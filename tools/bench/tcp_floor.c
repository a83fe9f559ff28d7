// tcp_floor: the bare floor of a 2-rank all-reduce over loopback TCP, the
// reference for comm's TCP transports (ucx tcp, ofi tcp;ofi_rxm, gloo):
// two processes connected by one TCP_NODELAY socket exchange N bytes each
// way at once (non-blocking calls in one spinning loop: what a direct
// all-reduce of N bytes moves), timed like comm-bench (each exchange between
// two 1-byte barriers; an iteration's time is the slower process's), with no
// library, no reduction and no matching around it. Prints p10, median and
// p90 per size. On this project's VM: 4.9-5.6 us at 8 B; from 1 MiB on the
// rate falls from 2.3 GB/s to 1.4-1.8, and a median moves 1.3x between runs
// (2 MiB: 1150-1530 us), so comm's TCP points are read against these.
//
//   tcp-floor [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [--bind core|none]
//
// Sizes as comm-bench's: MIN times FACTOR while under MAX, then MAX (-b 8 -e
// 64M -f 4 by default; K/M suffixes). ITERS per size (default 200, a quarter
// from 4 MiB on). --bind core (the default where there are 2+ CPUs, as
// commrun) pins process r to CPU r.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void die(const char* what) {
  fprintf(stderr, "tcp-floor: %s: %s\n", what, strerror(errno));
  exit(1);
}

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

// Sends `n` bytes of `out` and receives `n` into `in` at once, as both peers do.
static void exchange(int fd, const char* out, char* in, size_t n) {
  size_t sent = 0, got = 0;
  unsigned long spins = 0;
  const double began = now_us();
  while (sent < n || got < n) {
    if (sent < n) {
      const ssize_t k = send(fd, out + sent, n - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (k > 0) sent += (size_t)k;
      else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK) die("send");
    }
    if (got < n) {
      const ssize_t k = recv(fd, in + got, n - got, MSG_DONTWAIT);
      if (k > 0) got += (size_t)k;
      else if (k == 0) { fprintf(stderr, "tcp-floor: the peer closed the connection\n"); exit(1); }
      else if (errno != EAGAIN && errno != EWOULDBLOCK) die("recv");
    }
    // Spinning, as UCX and libfabric poll: a sleep in poll() costs a wake-up
    // (about 20 us on this VM), which is not the wire's.
    if ((++spins & 0xfffff) == 0 && now_us() - began > 60e6) {
      fprintf(stderr, "tcp-floor: no progress for 60 s\n");
      exit(1);
    }
  }
}

static size_t parse_size(const char* s, const char* flag) {
  char* end = NULL;
  const double v = strtod(s, &end);
  double scale = 1;
  if (*end == 'K' || *end == 'k') scale = 1024, ++end;
  else if (*end == 'M' || *end == 'm') scale = 1024.0 * 1024, ++end;
  else if (*end == 'G' || *end == 'g') scale = 1024.0 * 1024 * 1024, ++end;
  if (end == s || *end != '\0' || v < 1) {
    fprintf(stderr, "tcp-floor: %s wants a size such as 8, 64K or 64M, not '%s'\n", flag, s);
    exit(2);
  }
  return (size_t)(v * scale);
}

int main(int argc, char** argv) {
  size_t min_bytes = 8, max_bytes = (size_t)64 << 20, factor = 4;
  int iters = 200, pin = sysconf(_SC_NPROCESSORS_ONLN) >= 2;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) { fprintf(stderr, "tcp-floor: %s wants a value\n", a); return 2; }
    if (!strcmp(a, "-b")) min_bytes = parse_size(v, "-b");
    else if (!strcmp(a, "-e")) max_bytes = parse_size(v, "-e");
    else if (!strcmp(a, "-f")) factor = parse_size(v, "-f");
    else if (!strcmp(a, "-n")) iters = atoi(v);
    else if (!strcmp(a, "--bind") && (!strcmp(v, "core") || !strcmp(v, "none"))) pin = !strcmp(v, "core");
    else {
      fprintf(stderr, "usage: tcp-floor [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [--bind core|none]\n");
      return 2;
    }
    ++i;
  }
  if (factor < 2 || iters < 1 || min_bytes > max_bytes) {
    fprintf(stderr, "tcp-floor: -f wants 2 or more, -n 1 or more, and -b at most -e\n");
    return 2;
  }
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in addr;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (listener < 0 || bind(listener, (struct sockaddr*)&addr, sizeof addr) || listen(listener, 1) ||
      getsockname(listener, (struct sockaddr*)&addr, &len))
    die("listening on 127.0.0.1");
  // Each process's time of the current iteration; the parent keeps the slower.
  double* shared = mmap(NULL, 2 * sizeof(double), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) die("mmap");
  const pid_t child = fork();
  if (child < 0) die("fork");
  const int rank = child == 0;
  int fd;
  if (rank == 1) {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr*)&addr, sizeof addr)) die("connecting to 127.0.0.1");
  } else {
    fd = accept(listener, NULL, NULL);
    if (fd < 0) die("accept");
  }
  close(listener);
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (pin) {
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    CPU_SET(rank, &cpus);
    if (sched_setaffinity(0, sizeof cpus, &cpus)) die("binding to a CPU");
  }
  char* out = malloc(max_bytes);
  char* in = malloc(max_bytes);
  double* times = malloc(sizeof(double) * (size_t)iters);
  if (!out || !in || !times) die("malloc");
  memset(out, rank + 1, max_bytes);
  memset(in, 0, max_bytes);
  if (rank == 0) {
    printf("# tcp-floor: 2 processes, one loopback TCP socket, both ways at once; bind %s\n", pin ? "core" : "none");
    printf("# %10s %10s %10s %10s %10s\n", "bytes", "p10_us", "p50_us", "p90_us", "GB/s@p50");
  }
  char token = 0;
  for (size_t bytes = min_bytes;; bytes = bytes > max_bytes / factor ? max_bytes : bytes * factor) {
    const int n = bytes >= ((size_t)4 << 20) ? (iters + 3) / 4 : iters;
    for (int w = 0; w < 3; ++w) exchange(fd, out, in, bytes);
    for (int i = 0; i < n; ++i) {
      exchange(fd, &token, &token, 1);
      const double t0 = now_us();
      exchange(fd, out, in, bytes);
      shared[rank] = now_us() - t0;
      exchange(fd, &token, &token, 1);  // both times are written
      if (rank == 0) times[i] = shared[0] > shared[1] ? shared[0] : shared[1];
      exchange(fd, &token, &token, 1);  // read before the next iteration writes
    }
    if (in[bytes - 1] != (char)(2 - rank)) {
      fprintf(stderr, "tcp-floor: wrong data received at %zu bytes\n", bytes);
      return 1;
    }
    if (rank == 0) {
      qsort(times, (size_t)n, sizeof(double), by_value);
      const double p50 = times[n / 2];
      printf("  %10zu %10.2f %10.2f %10.2f %10.3f\n", bytes, times[n / 10], p50, times[n * 9 / 10],
             (double)bytes / (p50 * 1e3));
      fflush(stdout);
    }
    if (bytes == max_bytes) break;
  }
  if (rank == 1) return 0;
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
