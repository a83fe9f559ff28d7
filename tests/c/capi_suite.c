/* The C API across real processes (run by commrun over ucx, ofi, gloo; or
 * alone as one rank over `local`): every collective blocking and
 * non-blocking, every dtype and op of allreduce in place and out of place,
 * per-call algorithms, split, abort (from another thread and by a peer), and
 * the error paths of capi_errors.c. Every expected value is computed here.
 *
 *   capi_suite [--expect-version X.Y.Z]
 */
#include "capi_check.h"

#include <pthread.h>
#include <time.h>

int g_rank;
static int g_size;

void run_error_tests(comm_t* comm, int rank, int size);

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Rank r's element i: small integers, so sums and products are exact in every dtype. */
static double value(int r, size_t i, comm_op_t op, comm_dtype_t d) {
  if (op == COMM_PROD) {
    if ((r + (int)i) % 3 == 0) return 2;
    return (d != COMM_U8 && (r + 2 * (int)i) % 4 == 1) ? -1 : 1;
  }
  double v = (double)((r * 7 + (int)i * 13) % 17);
  return d == COMM_U8 ? v : v - 8;
}

static double combine(comm_op_t op, double a, double b) {
  switch (op) {
    case COMM_SUM:
    case COMM_AVG: return a + b;
    case COMM_PROD: return a * b;
    case COMM_MIN: return a < b ? a : b;
    case COMM_MAX: return a > b ? a : b;
    case COMM_OP_FORCE_INT32: break;
  }
  return NAN;
}

/* The reduction over all ranks of value(., i), as comm defines it. */
static double expected(comm_op_t op, comm_dtype_t d, size_t i) {
  double acc = value(0, i, op, d);
  for (int r = 1; r < g_size; ++r) acc = combine(op, acc, value(r, i, op, d));
  if (op == COMM_AVG) acc = capi_is_float(d) ? acc / g_size : trunc(acc / g_size);
  return capi_round(d, acc);
}

static void expect_close(comm_dtype_t d, comm_op_t op, double got, double want, const char* what, size_t i) {
  /* Averages of floats round once more than the exact sums do. */
  double tol = 0;
  if (op == COMM_AVG && capi_is_float(d)) tol = (d == COMM_F16 || d == COMM_BF16 ? 1e-2 : 1e-6) * (1 + fabs(want));
  CHECK(fabs(got - want) <= tol, "%s %s: element %zu is %g, expected %g", what, capi_dtype_name(d), i, got, want);
}

static void test_allreduce_every_dtype_and_op(comm_t* c) {
  static const size_t counts[] = {0, 1, 37};
  for (int d = COMM_F32; d <= COMM_I64; ++d) {
    for (int o = COMM_SUM; o <= COMM_AVG; ++o) {
      for (size_t k = 0; k < sizeof counts / sizeof counts[0]; ++k) {
        for (int in_place = 0; in_place <= 1; ++in_place) {
          const size_t n = counts[k];
          void* in = capi_alloc((comm_dtype_t)d, n);
          void* out = in_place ? in : capi_alloc((comm_dtype_t)d, n);
          for (size_t i = 0; i < n; ++i) capi_set((comm_dtype_t)d, in, i, value(g_rank, i, (comm_op_t)o, (comm_dtype_t)d));
          CHECK_OK(comm_allreduce(c, in, out, n, (comm_dtype_t)d, (comm_op_t)o, NULL));
          for (size_t i = 0; i < n; ++i)
            expect_close((comm_dtype_t)d, (comm_op_t)o, capi_get((comm_dtype_t)d, out, i),
                         expected((comm_op_t)o, (comm_dtype_t)d, i), in_place ? "allreduce in place" : "allreduce", i);
          if (!in_place) {
            /* Out of place leaves the input as it was. */
            for (size_t i = 0; i < n; ++i)
              CHECK(capi_get((comm_dtype_t)d, in, i) == capi_round((comm_dtype_t)d, value(g_rank, i, (comm_op_t)o, (comm_dtype_t)d)),
                    "allreduce changed its input at %zu", i);
            free(out);
          }
          free(in);
        }
      }
    }
  }
}

/* Larger than the pipeline chunk: several chunks per step. */
static void test_allreduce_large(comm_t* c) {
  const size_t n = 300001;
  float* x = capi_alloc(COMM_F32, n);
  for (size_t i = 0; i < n; ++i) x[i] = (float)value(g_rank, i, COMM_SUM, COMM_F32);
  CHECK_OK(comm_allreduce(c, x, x, n, COMM_F32, COMM_SUM, NULL));
  for (size_t i = 0; i < n; i += 997) expect_close(COMM_F32, COMM_SUM, x[i], expected(COMM_SUM, COMM_F32, i), "large allreduce", i);
  free(x);
}

static void test_algorithms(comm_t* c) {
  char name[64];
  CHECK_OK(comm_algorithm_for(c, COMM_COLL_ALLREDUCE, 4096, name, sizeof name));
  CHECK(name[0] != '\0', "comm_algorithm_for gave an empty name");
  const char* forced[] = {name, "ring", "direct"};
  for (size_t a = 0; a < 3; ++a) {
    comm_call_options_t opts = COMM_CALL_OPTIONS_INIT;
    opts.algorithm = forced[a];
    double x[19];
    for (size_t i = 0; i < 19; ++i) x[i] = value(g_rank, i, COMM_MAX, COMM_F64);
    CHECK_OK(comm_allreduce(c, x, x, 19, COMM_F64, COMM_MAX, &opts));
    for (size_t i = 0; i < 19; ++i) expect_close(COMM_F64, COMM_MAX, x[i], expected(COMM_MAX, COMM_F64, i), forced[a], i);
  }
}

static void test_reduce_scatter_allgather(comm_t* c) {
  const size_t n = 5, total = n * (size_t)g_size;
  int32_t* in = capi_alloc(COMM_I32, total);
  int32_t* out = capi_alloc(COMM_I32, n);
  for (size_t i = 0; i < total; ++i) in[i] = (int32_t)value(g_rank, i, COMM_SUM, COMM_I32);
  CHECK_OK(comm_reduce_scatter(c, in, out, n, COMM_I32, COMM_SUM, NULL));
  for (size_t k = 0; k < n; ++k)
    expect_close(COMM_I32, COMM_SUM, out[k], expected(COMM_SUM, COMM_I32, (size_t)g_rank * n + k), "reduce_scatter", k);

  /* In place: this rank's block of the input is the output. */
  for (size_t i = 0; i < total; ++i) in[i] = (int32_t)value(g_rank, i, COMM_MIN, COMM_I32);
  CHECK_OK(comm_reduce_scatter(c, in, in + (size_t)g_rank * n, n, COMM_I32, COMM_MIN, NULL));
  for (size_t k = 0; k < n; ++k)
    expect_close(COMM_I32, COMM_MIN, in[(size_t)g_rank * n + k], expected(COMM_MIN, COMM_I32, (size_t)g_rank * n + k),
                 "reduce_scatter in place", k);

  for (size_t k = 0; k < n; ++k) out[k] = g_rank * 100 + (int32_t)k;
  CHECK_OK(comm_allgather(c, out, in, n, COMM_I32, NULL));
  for (size_t i = 0; i < total; ++i)
    CHECK(in[i] == (int32_t)(i / n) * 100 + (int32_t)(i % n), "allgather: element %zu is %d", i, in[i]);

  /* In place: this rank's input already sits in its block of the output. */
  for (size_t i = 0; i < total; ++i) in[i] = -1;
  for (size_t k = 0; k < n; ++k) in[(size_t)g_rank * n + k] = g_rank * 100 + (int32_t)k + 1;
  CHECK_OK(comm_allgather(c, in + (size_t)g_rank * n, in, n, COMM_I32, NULL));
  for (size_t i = 0; i < total; ++i)
    CHECK(in[i] == (int32_t)(i / n) * 100 + (int32_t)(i % n) + 1, "allgather in place: element %zu is %d", i, in[i]);
  free(in);
  free(out);
}

static void test_broadcast_reduce(comm_t* c) {
  const int root = g_size - 1, reduce_root = 1 % g_size;
  double b[11];
  for (size_t i = 0; i < 11; ++i) b[i] = g_rank == root ? 0.5 * (double)i + root : -1;
  CHECK_OK(comm_broadcast(c, b, 11, COMM_F64, root, NULL));
  for (size_t i = 0; i < 11; ++i) CHECK(b[i] == 0.5 * (double)i + root, "broadcast: element %zu is %g", i, b[i]);

  int64_t in[9], out[9];
  for (size_t i = 0; i < 9; ++i) {
    in[i] = (int64_t)value(g_rank, i, COMM_SUM, COMM_I64);
    out[i] = -77;
  }
  CHECK_OK(comm_reduce(c, in, g_rank == reduce_root ? out : NULL, 9, COMM_I64, COMM_SUM, reduce_root, NULL));
  if (g_rank == reduce_root)
    for (size_t i = 0; i < 9; ++i) expect_close(COMM_I64, COMM_SUM, (double)out[i], expected(COMM_SUM, COMM_I64, i), "reduce", i);
  /* In place at the root. */
  CHECK_OK(comm_reduce(c, in, g_rank == reduce_root ? in : NULL, 9, COMM_I64, COMM_MAX, reduce_root, NULL));
  if (g_rank == reduce_root)
    for (size_t i = 0; i < 9; ++i)
      expect_close(COMM_I64, COMM_MAX, (double)in[i], expected(COMM_MAX, COMM_I64, i), "reduce in place", i);
}

static int32_t a2a_value(int from, int to, size_t k) { return from * 1000 + to * 100 + (int32_t)k; }

static void test_all_to_all(comm_t* c) {
  const size_t n = 3, total = n * (size_t)g_size;
  int32_t* in = capi_alloc(COMM_I32, total);
  int32_t* out = capi_alloc(COMM_I32, total);
  for (size_t i = 0; i < total; ++i) in[i] = a2a_value(g_rank, (int)(i / n), i % n);
  CHECK_OK(comm_all_to_all(c, in, out, n, COMM_I32, NULL));
  for (size_t i = 0; i < total; ++i)
    CHECK(out[i] == a2a_value((int)(i / n), g_rank, i % n), "all_to_all: element %zu is %d", i, out[i]);

  /* Variable: rank r sends (r + j) % 3 + 1 elements to rank j. */
  size_t sc[16], sd[16], rc[16], rd[16], in_total = 0, out_total = 0;
  for (int j = 0; j < g_size; ++j) {
    sc[j] = (size_t)((g_rank + j) % 3 + 1);
    rc[j] = (size_t)((j + g_rank) % 3 + 1);
    sd[j] = in_total;
    rd[j] = out_total;
    in_total += sc[j];
    out_total += rc[j];
  }
  int32_t* vin = capi_alloc(COMM_I32, in_total);
  int32_t* vout = capi_alloc(COMM_I32, out_total);
  for (int j = 0; j < g_size; ++j)
    for (size_t k = 0; k < sc[j]; ++k) vin[sd[j] + k] = a2a_value(g_rank, j, k);
  CHECK_OK(comm_all_to_allv(c, vin, in_total, sc, sd, vout, out_total, rc, rd, COMM_I32, NULL));
  for (int i = 0; i < g_size; ++i)
    for (size_t k = 0; k < rc[i]; ++k)
      CHECK(vout[rd[i] + k] == a2a_value(i, g_rank, k), "all_to_allv: from rank %d element %zu is %d", i, k,
            vout[rd[i] + k]);
  /* Non-blocking: the count arrays are read during the call only, so scribbling on them is fine. */
  for (size_t i = 0; i < out_total; ++i) vout[i] = -1;
  comm_request_t* r = NULL;
  CHECK_OK(comm_iall_to_allv(c, vin, in_total, sc, sd, vout, out_total, rc, rd, COMM_I32, NULL, &r));
  for (int j = 0; j < g_size; ++j) sc[j] = sd[j] = 999;
  CHECK_OK(comm_request_wait(r));
  comm_request_free(r);
  for (int i = 0; i < g_size; ++i)
    for (size_t k = 0; k < rc[i]; ++k)
      CHECK(vout[rd[i] + k] == a2a_value(i, g_rank, k), "iall_to_allv: from rank %d element %zu is %d", i, k,
            vout[rd[i] + k]);
  free(in);
  free(out);
  free(vin);
  free(vout);
}

/* A ring of sends; two tags crossing in the opposite order of posting. */
static void test_send_recv(comm_t* c) {
  const int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
  float sendbuf[8], a[8], b[8];
  for (int i = 0; i < 8; ++i) sendbuf[i] = (float)(g_rank * 10 + i);
  comm_call_options_t t1 = COMM_CALL_OPTIONS_INIT, t2 = COMM_CALL_OPTIONS_INIT;
  t1.tag = 1;
  t2.tag = 2;
  comm_request_t *ra, *rb, *sa, *sb;
  CHECK_OK(comm_irecv(c, b, 8, COMM_F32, prev, &t2, &rb));
  CHECK_OK(comm_irecv(c, a, 8, COMM_F32, prev, &t1, &ra));
  CHECK_OK(comm_isend(c, sendbuf, 8, COMM_F32, next, &t1, &sa));
  float second[8];
  for (int i = 0; i < 8; ++i) second[i] = (float)(g_rank * 10 + i) + 0.5f;
  CHECK_OK(comm_isend(c, second, 8, COMM_F32, next, &t2, &sb));
  CHECK_OK(comm_request_wait(ra));
  CHECK_OK(comm_request_wait(rb));
  CHECK_OK(comm_request_wait(sa));
  CHECK_OK(comm_request_wait(sb));
  for (int i = 0; i < 8; ++i) {
    CHECK(a[i] == (float)(prev * 10 + i), "recv tag 1: element %d is %g", i, a[i]);
    CHECK(b[i] == (float)(prev * 10 + i) + 0.5f, "recv tag 2: element %d is %g", i, b[i]);
  }
  comm_request_free(ra);
  comm_request_free(rb);
  comm_request_free(sa);
  comm_request_free(sb);

  /* Blocking pair: even ranks send first, odd ranks receive first. */
  if (g_size % 2 == 0) {
    int32_t v = g_rank, got = -1;
    if (g_rank % 2 == 0) {
      CHECK_OK(comm_send(c, &v, 1, COMM_I32, next, NULL));
      CHECK_OK(comm_recv(c, &got, 1, COMM_I32, prev, NULL));
    } else {
      CHECK_OK(comm_recv(c, &got, 1, COMM_I32, prev, NULL));
      CHECK_OK(comm_send(c, &v, 1, COMM_I32, next, NULL));
    }
    CHECK(got == prev, "blocking recv got %d, expected %d", got, prev);
  }
  CHECK_OK(comm_barrier(c, NULL));
}

static void wait_by_testing(comm_request_t* r, const char* what) {
  const double deadline = now_seconds() + 60;
  int done = 0;
  while (!done) {
    CHECK_OK(comm_request_test(r, &done));
    CHECK(done || now_seconds() < deadline, "%s did not complete by testing within 60 s", what);
  }
}

static void test_nonblocking(comm_t* c) {
  /* Three all-reduces in flight at once, completed in reverse order. */
  float x[3][33];
  comm_request_t* r[3];
  for (int k = 0; k < 3; ++k) {
    for (size_t i = 0; i < 33; ++i) x[k][i] = (float)value(g_rank, i + (size_t)k, COMM_SUM, COMM_F32);
    CHECK_OK(comm_iallreduce(c, x[k], x[k], 33, COMM_F32, COMM_SUM, NULL, &r[k]));
  }
  for (int k = 2; k >= 0; --k) {
    if (k == 1) wait_by_testing(r[k], "iallreduce");
    else CHECK_OK(comm_request_wait(r[k]));
    comm_request_free(r[k]);
  }
  for (int k = 0; k < 3; ++k)
    for (size_t i = 0; i < 33; ++i)
      expect_close(COMM_F32, COMM_SUM, x[k][i], expected(COMM_SUM, COMM_F32, i + (size_t)k), "iallreduce", i);

  /* Each remaining i-collective, finished by wait, test or wait_for. */
  const size_t n = 4, total = n * (size_t)g_size;
  int32_t* big = capi_alloc(COMM_I32, total);
  int32_t* small = capi_alloc(COMM_I32, n);
  comm_request_t* q;
  for (size_t k = 0; k < n; ++k) small[k] = g_rank + (int32_t)k;
  CHECK_OK(comm_iallgather(c, small, big, n, COMM_I32, NULL, &q));
  wait_by_testing(q, "iallgather");
  comm_request_free(q);
  for (size_t i = 0; i < total; ++i) CHECK(big[i] == (int32_t)(i / n + i % n), "iallgather: element %zu is %d", i, big[i]);

  CHECK_OK(comm_ireduce_scatter(c, big, small, n, COMM_I32, COMM_SUM, NULL, &q));
  int done = 0;
  CHECK_OK(comm_request_wait_for(q, 30000, &done));
  CHECK(done == 1, "ireduce_scatter not done after 30 s");
  comm_request_free(q);
  for (size_t k = 0; k < n; ++k)
    CHECK(small[k] == g_size * (g_rank + (int32_t)k), "ireduce_scatter: element %zu is %d", k, small[k]);

  for (size_t k = 0; k < n; ++k) small[k] = g_rank == 0 ? 40 + (int32_t)k : 0;
  CHECK_OK(comm_ibroadcast(c, small, n, COMM_I32, 0, NULL, &q));
  CHECK_OK(comm_request_wait(q));
  comm_request_free(q);
  for (size_t k = 0; k < n; ++k) CHECK(small[k] == 40 + (int32_t)k, "ibroadcast: element %zu is %d", k, small[k]);

  CHECK_OK(comm_ireduce(c, small, g_rank == 0 ? big : NULL, n, COMM_I32, COMM_SUM, 0, NULL, &q));
  CHECK_OK(comm_request_wait(q));
  comm_request_free(q);
  if (g_rank == 0)
    for (size_t k = 0; k < n; ++k) CHECK(big[k] == g_size * (40 + (int32_t)k), "ireduce: element %zu is %d", k, big[k]);

  int32_t* a2a = capi_alloc(COMM_I32, total);
  for (size_t i = 0; i < total; ++i) big[i] = a2a_value(g_rank, (int)(i / n), i % n);
  CHECK_OK(comm_iall_to_all(c, big, a2a, n, COMM_I32, NULL, &q));
  CHECK_OK(comm_request_wait(q));
  comm_request_free(q);
  for (size_t i = 0; i < total; ++i)
    CHECK(a2a[i] == a2a_value((int)(i / n), g_rank, i % n), "iall_to_all: element %zu is %d", i, a2a[i]);

  CHECK_OK(comm_ibarrier(c, NULL, &q));
  wait_by_testing(q, "ibarrier");
  comm_request_free(q);
  free(big);
  free(small);
  free(a2a);
}

/* wait_for on an operation that cannot finish yet: its peer sends only after a barrier. */
static void test_wait_for_running(comm_t* c) {
  if (g_size < 2) return;
  comm_call_options_t opts = COMM_CALL_OPTIONS_INIT;
  opts.tag = 99;
  int64_t v = -1;
  if (g_rank == 0) {
    comm_request_t* r;
    int done = 1;
    CHECK_OK(comm_irecv(c, &v, 1, COMM_I64, 1, &opts, &r));
    CHECK_OK(comm_request_wait_for(r, 50, &done));
    CHECK(done == 0, "irecv completed before its peer sent");
    CHECK_OK(comm_request_wait_for(r, 0, &done));
    CHECK(done == 0, "irecv completed before its peer sent");
    CHECK_OK(comm_barrier(c, NULL));
    CHECK_OK(comm_request_wait_for(r, 30000, &done));
    CHECK(done == 1 && v == 4242, "irecv after the peer sent: done %d value %lld", done, (long long)v);
    comm_request_free(r);
  } else {
    CHECK_OK(comm_barrier(c, NULL));
    if (g_rank == 1) {
      v = 4242;
      CHECK_OK(comm_send(c, &v, 1, COMM_I64, 0, &opts));
    }
  }
}

static void test_split(comm_t* c) {
  /* Even and odd ranks, each group in reverse order of the old ranks. */
  comm_t* sub = NULL;
  CHECK_OK(comm_split(c, g_rank % 2, g_size - g_rank, &sub));
  CHECK(sub != NULL, "split returned no communicator");
  int sub_rank = -1, sub_size = -1, members = 0, position = 0;
  for (int r = g_rank % 2; r < g_size; r += 2) {
    ++members;
    if (r > g_rank) ++position;
  }
  CHECK_OK(comm_rank(sub, &sub_rank));
  CHECK_OK(comm_size(sub, &sub_size));
  CHECK(sub_size == members && sub_rank == position, "split: rank %d of %d, expected %d of %d", sub_rank, sub_size,
        position, members);
  int64_t sum = g_rank, want = 0;
  for (int r = g_rank % 2; r < g_size; r += 2) want += r;
  CHECK_OK(comm_allreduce(sub, &sum, &sum, 1, COMM_I64, COMM_SUM, NULL));
  CHECK(sum == want, "split allreduce: %lld, expected %lld", (long long)sum, (long long)want);
  comm_destroy(sub);

  /* color < 0 leaves a rank out. */
  CHECK_OK(comm_split(c, g_rank == 0 ? -1 : 0, 0, &sub));
  CHECK((sub == NULL) == (g_rank == 0), "split with color -1 gave %p", (void*)sub);
  comm_destroy(sub);
}

static void* abort_later(void* arg) {
  struct timespec pause = {0, 300 * 1000 * 1000};
  nanosleep(&pause, NULL);
  comm_status_t s = comm_abort((comm_t*)arg);
  return s == COMM_OK ? arg : NULL;
}

/* comm_abort from another thread wakes a receive nobody will satisfy. Each
 * rank does it on a communicator of its own, so no peer's abort interferes. */
static void test_abort_from_thread(comm_t* c) {
  comm_t* sub = NULL;
  CHECK_OK(comm_split(c, g_rank, 0, &sub));
  comm_status_t async = COMM_ERR_INTERNAL;
  const char* message = NULL;
  CHECK_OK(comm_get_async_error(sub, &async, &message));
  CHECK(async == COMM_OK && message && message[0] == '\0', "a healthy communicator reports %s '%s'",
        comm_status_name(async), message ? message : "(null)");
  pthread_t thread;
  CHECK(pthread_create(&thread, NULL, abort_later, sub) == 0, "pthread_create failed");
  int64_t v = 0;
  comm_call_options_t opts = COMM_CALL_OPTIONS_INIT;
  opts.tag = 5;
  const double start = now_seconds();
  comm_status_t s = comm_recv(sub, &v, 1, COMM_I64, 0, &opts);
  const double took = now_seconds() - start;
  void* joined = NULL;
  pthread_join(thread, &joined);
  CHECK(joined == sub, "comm_abort failed in the thread: %s", comm_last_error());
  CHECK(s == COMM_ERR_ABORTED || s == COMM_ERR_COMMUNICATOR_FAILED, "recv on an aborted communicator returned %s: %s",
        comm_status_name(s), comm_last_error());
  CHECK(took < 5.0, "abort took %.2f s to wake the receive", took);
  CHECK_OK(comm_get_async_error(sub, &async, &message));
  CHECK(async == COMM_ERR_ABORTED && strstr(message, "comm_abort") != NULL, "async error after abort: %s '%s'",
        comm_status_name(async), message);
  CHECK_FAILS(comm_barrier(sub, NULL), COMM_ERR_COMMUNICATOR_FAILED, "has failed");
  comm_destroy(sub);
}

/* Rank 0 aborts; the others' all-reduce fails within its timeout and their async error says why. */
static void test_peer_abort(comm_t* c) {
  if (g_size < 2) return;
  comm_t* sub = NULL;
  CHECK_OK(comm_split(c, 0, g_rank, &sub));
  CHECK_OK(comm_barrier(sub, NULL));
  comm_call_options_t opts = COMM_CALL_OPTIONS_INIT;
  opts.timeout_ms = 1500;
  float x[4] = {1, 2, 3, 4};
  comm_status_t async = COMM_OK;
  const char* message = NULL;
  if (g_rank == 0) {
    CHECK_OK(comm_abort(sub));
    CHECK_FAILS(comm_allreduce(sub, x, x, 4, COMM_F32, COMM_SUM, &opts), COMM_ERR_COMMUNICATOR_FAILED, "aborted");
    CHECK_OK(comm_get_async_error(sub, &async, &message));
    CHECK(async == COMM_ERR_ABORTED, "rank 0's async error is %s", comm_status_name(async));
  } else {
    const double start = now_seconds();
    comm_status_t s = comm_allreduce(sub, x, x, 4, COMM_F32, COMM_SUM, &opts);
    const double took = now_seconds() - start;
    CHECK(s == COMM_ERR_TIMEOUT || s == COMM_ERR_PEER_FAILED, "allreduce without rank 0 returned %s: %s",
          comm_status_name(s), comm_last_error());
    CHECK(took < 10.0, "the failure took %.2f s to surface", took);
    CHECK_OK(comm_get_async_error(sub, &async, &message));
    CHECK(async == s && message && message[0] != '\0', "async error %s '%s', expected %s", comm_status_name(async),
          message ? message : "(null)", comm_status_name(s));
  }
  comm_destroy(sub);
}

int main(int argc, char** argv) {
  int major = -1, minor = -1, patch = -1;
  CHECK_OK(comm_get_abi_version(&major, &minor));
  CHECK(major == COMM_ABI_VERSION_MAJOR && minor >= COMM_ABI_VERSION_MINOR, "library ABI %d.%d, header %d.%d", major,
        minor, COMM_ABI_VERSION_MAJOR, COMM_ABI_VERSION_MINOR);
  CHECK_OK(comm_get_version(&major, &minor, &patch));
  if (argc == 3 && strcmp(argv[1], "--expect-version") == 0) {
    char got[64];
    snprintf(got, sizeof got, "%d.%d.%d", major, minor, patch);
    CHECK(strcmp(got, argv[2]) == 0, "library version %s, expected %s", got, argv[2]);
  }

  comm_t* c = NULL;
  CHECK_OK(comm_create(NULL, &c)); /* NULL config: from the environment */
  CHECK_OK(comm_rank(c, &g_rank));
  CHECK_OK(comm_size(c, &g_size));
  CHECK(g_size <= 16, "this test supports up to 16 ranks, not %d", g_size);
  char transport[32];
  CHECK_OK(comm_transport_name(c, transport, sizeof transport));
  const char* want = getenv("COMM_TRANSPORT");
  CHECK(strcmp(transport, want && *want ? want : "local") == 0, "transport is %s", transport);

  run_error_tests(c, g_rank, g_size);
  test_allreduce_every_dtype_and_op(c);
  test_allreduce_large(c);
  test_algorithms(c);
  test_reduce_scatter_allgather(c);
  test_broadcast_reduce(c);
  test_all_to_all(c);
  test_send_recv(c);
  test_nonblocking(c);
  test_wait_for_running(c);
  test_split(c);
  test_abort_from_thread(c);
  test_peer_abort(c);
  CHECK_OK(comm_barrier(c, NULL));

  comm_status_t async = COMM_ERR_INTERNAL;
  CHECK_OK(comm_get_async_error(c, &async, NULL));
  CHECK(async == COMM_OK, "the world communicator failed: %s", comm_status_name(async));
  comm_destroy(c);
  printf("rank %d of %d: C API suite over %s passed\n", g_rank, g_size, transport);
  return 0;
}
