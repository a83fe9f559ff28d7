/* The smallest complete program in C (the twin of embed_minimal.cpp): join
 * the group the environment describes (COMM_RANK, COMM_WORLD_SIZE, COMM_STORE,
 * COMM_TRANSPORT; set by commrun, torchrun, Slurm) and sum a vector across all
 * ranks. Plain C11 against include/comm/comm.h; link with -lcomm. */
#include <comm/comm.h>

#include <stdio.h>

/* Every failure says what went wrong and what to do. */
static int fail(const char* what, comm_status_t status) {
  fprintf(stderr, "embed_minimal_c: %s: %s: %s\n", what, comm_status_name(status), comm_last_error());
  return 1;
}

int main(void) {
  comm_t* c = NULL;
  comm_status_t s = comm_create(NULL, &c); /* NULL: configuration from the environment */
  if (s != COMM_OK) return fail("comm_create", s);
  int rank = 0, size = 0;
  comm_rank(c, &rank);
  comm_size(c, &size);

  float x[1024];
  for (int i = 0; i < 1024; ++i) x[i] = (float)(rank + 1);
  s = comm_allreduce(c, x, x, 1024, COMM_F32, COMM_SUM, NULL); /* in place: x[i] = 1 + 2 + ... + size */
  if (s != COMM_OK) {
    comm_destroy(c);
    return fail("comm_allreduce", s);
  }
  const float want = (float)size * (float)(size + 1) / 2.0f;
  printf("rank %d of %d: x[0] = %g (%s)\n", rank, size, x[0], x[0] == want ? "ok" : "WRONG");
  comm_destroy(c);
  return x[0] == want ? 0 : 1;
}
