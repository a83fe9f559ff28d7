/* mpi_allreduce: Open MPI's MPI_Allreduce timed exactly like comm-bench times
 * comm's: per size, warm-up, then iterations of (MPI_Barrier; t0;
 * MPI_Allreduce; t1); each iteration's time is the slowest rank's (an
 * MPI_MAX over ranks afterwards) and the figure is the median. f32 sum.
 *   mpicc -O2 mpi_allreduce.c -o mpi_allreduce
 *   mpirun --allow-run-as-root -np 2 ./mpi_allreduce [-b 8] [-e 64M] [-f 4] [-n 50]
 * Built and run by tools/compare-shm.sh, which puts it beside comm-bench. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t parse_size(const char* s) {
  char* end = NULL;
  double v = strtod(s, &end);
  if (*end == 'K' || *end == 'k') v *= 1024;
  if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
  if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024;
  return (size_t)v;
}
static int cmp(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

/* The next size of the ladder; its last step lands on maxb, as comm-bench's does. */
static size_t next_size(size_t b, double factor, size_t maxb) {
  size_t next = (size_t)(b * factor) > b ? (size_t)(b * factor) : b + 1;
  return b < maxb && next > maxb ? maxb : next;
}

int main(int argc, char** argv) {
  size_t minb = 8, maxb = 64u << 20;
  double factor = 4;
  int iters = 50, i, rank, size;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-b")) minb = parse_size(argv[i + 1]);
    else if (!strcmp(argv[i], "-e")) maxb = parse_size(argv[i + 1]);
    else if (!strcmp(argv[i], "-f")) factor = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "-n")) iters = atoi(argv[i + 1]);
  }
  float* in = malloc(maxb > 4 ? maxb : 4);
  float* out = malloc(maxb > 4 ? maxb : 4);
  for (i = 0; i < (int)(maxb / 4); ++i) in[i] = (float)(rank + 1), out[i] = 0;
  if (rank == 0) printf("# MPI_Allreduce, %d ranks, f32 sum: median of the slowest rank's time between barriers\n#      bytes   time_us  busbw_GBps\n", size);
  for (size_t b = minb; b <= maxb; b = next_size(b, factor, maxb)) {
    const int count = (int)(b / 4);
    const int n = b > (4u << 20) ? (iters * (int)((4u << 20) / 1024) / (int)(b / 1024) > 10 ? iters * (int)((4u << 20) / 1024) / (int)(b / 1024) : 10) : iters;
    double* t = malloc(sizeof(double) * (size_t)n);
    for (i = 0; i < 5; ++i) { MPI_Barrier(MPI_COMM_WORLD); MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); }
    for (i = 0; i < n; ++i) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      t[i] = (MPI_Wtime() - t0) * 1e6;
    }
    MPI_Allreduce(MPI_IN_PLACE, t, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    qsort(t, (size_t)n, sizeof(double), cmp);
    if (out[0] != (float)(size * (size + 1) / 2)) { fprintf(stderr, "mpi_allreduce: wrong result %g\n", out[0]); return 1; }
    if (rank == 0) printf("%12zu %9.3f %10.3f\n", b, t[n / 2], (double)b / t[n / 2] / 1e3 * 2.0 * (size - 1) / size);
    free(t);
  }
  free(in);
  free(out);
  MPI_Finalize();
  return 0;
}
