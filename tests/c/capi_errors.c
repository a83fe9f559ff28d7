/* Error paths of the C API: every bad argument gets its status before
 * anything is sent, comm_last_error() names the argument, and the
 * communicator stays usable. Purely local: ranks run these without talking. */
#include "capi_check.h"

static void test_status_names(void) {
  static const char* const names[] = {"ok",          "invalid_argument", "unsupported",       "unknown_algorithm",
                                      "unknown_transport", "invalid_config", "timeout",     "peer_failed",
                                      "aborted",     "mismatch",         "transport_failure", "communicator_failed",
                                      "store_failure", "internal"};
  for (int s = COMM_OK; s <= COMM_ERR_INTERNAL; ++s)
    CHECK(strcmp(comm_status_name((comm_status_t)s), names[s]) == 0, "status %d is named %s", s,
          comm_status_name((comm_status_t)s));
  CHECK(strcmp(comm_status_name((comm_status_t)99), "unknown_status") == 0, "status 99 has a name");
  static const size_t sizes[] = {4, 8, 2, 2, 1, 1, 4, 8};
  for (int d = COMM_F32; d <= COMM_I64; ++d)
    CHECK(comm_dtype_size((comm_dtype_t)d) == sizes[d], "dtype %d has size %zu", d, comm_dtype_size((comm_dtype_t)d));
  CHECK(comm_dtype_size((comm_dtype_t)99) == 0, "dtype 99 has a size");
  CHECK_FAILS(comm_call_options_init(NULL), COMM_ERR_INVALID_ARGUMENT, "options is NULL");
  comm_call_options_t o;
  memset(&o, 0xff, sizeof o);
  CHECK_OK(comm_call_options_init(&o));
  CHECK(o.struct_size == sizeof o && o.algorithm == NULL && o.timeout_ms == 0 && o.tag == 0 &&
            o.memory == COMM_MEMORY_HOST && o.stream == NULL,
        "comm_call_options_init left non-defaults");
}

static void test_config_setters(void) {
  comm_config_t* cfg = NULL;
  CHECK_FAILS(comm_config_create(NULL), COMM_ERR_INVALID_ARGUMENT, "config is NULL");
  CHECK_FAILS(comm_config_set_rank(NULL, 0), COMM_ERR_INVALID_ARGUMENT, "config is NULL");
  CHECK_OK(comm_config_create(&cfg));
  CHECK_FAILS(comm_config_set_rank(cfg, -1), COMM_ERR_INVALID_CONFIG, "rank=-1");
  CHECK_FAILS(comm_config_set_world_size(cfg, 0), COMM_ERR_INVALID_CONFIG, "world_size=0");
  CHECK_FAILS(comm_config_set_local_rank(cfg, -3), COMM_ERR_INVALID_CONFIG, "local_rank=-3");
  CHECK_FAILS(comm_config_set_timeout_ms(cfg, 0), COMM_ERR_INVALID_CONFIG, "timeout_ms=0");
  CHECK_FAILS(comm_config_set_log_level(cfg, "loud"), COMM_ERR_INVALID_CONFIG, "loud");
  CHECK_FAILS(comm_config_set_log_level(cfg, NULL), COMM_ERR_INVALID_ARGUMENT, "level is NULL");
  CHECK_FAILS(comm_config_set_transport(cfg, NULL), COMM_ERR_INVALID_ARGUMENT, "transport is NULL");
  CHECK_FAILS(comm_config_set_chunk_bytes(cfg, 0), COMM_ERR_INVALID_CONFIG, "chunk_bytes=0");
  CHECK_FAILS(comm_config_set_device(cfg, -2), COMM_ERR_INVALID_CONFIG, "device=-2");
  CHECK_FAILS(comm_config_set_flight_recorder_size(cfg, (size_t)1 << 30), COMM_ERR_INVALID_CONFIG, "operations=");
  CHECK_FAILS(comm_config_set_store(cfg, NULL), COMM_ERR_INVALID_ARGUMENT, "store is NULL");
  CHECK_FAILS(comm_config_set_transport_option(cfg, "", "x"), COMM_ERR_INVALID_ARGUMENT, "key is empty");
  CHECK_FAILS(comm_config_set_transport_option(cfg, "k", NULL), COMM_ERR_INVALID_ARGUMENT, "value is NULL");

  /* Valid values of every setter, then a one-rank communicator made from them. */
  CHECK_OK(comm_config_set_rank(cfg, 0));
  CHECK_OK(comm_config_set_world_size(cfg, 1));
  CHECK_OK(comm_config_set_local_rank(cfg, 0));
  CHECK_OK(comm_config_set_store(cfg, ""));
  CHECK_OK(comm_config_set_store_token(cfg, "secret"));
  CHECK_OK(comm_config_set_store_bind(cfg, ""));
  CHECK_OK(comm_config_set_transport(cfg, "local"));
  CHECK_OK(comm_config_set_timeout_ms(cfg, 20000));
  CHECK_OK(comm_config_set_log_level(cfg, "warn"));
  CHECK_OK(comm_config_set_algo_override(cfg, "allreduce=ring"));
  CHECK_OK(comm_config_set_chunk_bytes(cfg, 4096));
  CHECK_OK(comm_config_set_calibrate(cfg, 0));
  CHECK_OK(comm_config_set_tuning_file(cfg, ""));
  CHECK_OK(comm_config_set_check(cfg, 1));
  CHECK_OK(comm_config_set_device(cfg, -1));
  CHECK_OK(comm_config_set_iface(cfg, ""));
  CHECK_OK(comm_config_set_flight_recorder_size(cfg, 16));
  CHECK_OK(comm_config_set_dump_dir(cfg, ""));
  CHECK_OK(comm_config_set_transport_option(cfg, "ofi.provider", "tcp;ofi_rxm"));
  comm_t* one = NULL;
  CHECK_OK(comm_create(cfg, &one));
  char algo[32];
  CHECK_OK(comm_algorithm_for(one, COMM_COLL_ALLREDUCE, 64, algo, sizeof algo));
  CHECK(strcmp(algo, "ring") == 0, "the override allreduce=ring gave '%s'", algo);
  int32_t v[3] = {5, -6, 7};
  CHECK_OK(comm_allreduce(one, v, v, 3, COMM_I32, COMM_SUM, NULL));
  CHECK(v[0] == 5 && v[1] == -6 && v[2] == 7, "one-rank allreduce changed the values");
  comm_destroy(one);
  /* No transport named: one rank of one process gets local. */
  comm_config_t* automatic = NULL;
  CHECK_OK(comm_config_create(&automatic));
  CHECK_OK(comm_create(automatic, &one));
  char transport[16];
  CHECK_OK(comm_transport_name(one, transport, sizeof transport));
  CHECK(strcmp(transport, "local") == 0, "a one-rank communicator without a transport chose '%s'", transport);
  comm_destroy(one);
  comm_config_destroy(automatic);

  /* Combinations are comm_create's to check, and it names what is wrong. */
  CHECK_OK(comm_config_set_world_size(cfg, 2));
  CHECK_OK(comm_config_set_rank(cfg, 3));
  static int sentinel;
  one = (comm_t*)(void*)&sentinel; /* must be reset to NULL on failure */
  CHECK_FAILS(comm_create(cfg, &one), COMM_ERR_INVALID_CONFIG, "rank 3");
  CHECK(one == NULL, "a failed comm_create left a handle");
  CHECK_OK(comm_config_set_world_size(cfg, 1));
  CHECK_OK(comm_config_set_rank(cfg, 0));
  CHECK_OK(comm_config_set_transport(cfg, "no_such_transport"));
  CHECK_FAILS(comm_create(cfg, &one), COMM_ERR_UNKNOWN_TRANSPORT, "no_such_transport");
  CHECK_FAILS(comm_create(cfg, NULL), COMM_ERR_INVALID_ARGUMENT, "comm is NULL");
  comm_config_destroy(cfg);
  comm_config_destroy(NULL);

  /* The environment's errors name the variable. */
  const char* saved = getenv("COMM_TIMEOUT");
  char* copy = saved ? strdup(saved) : NULL;
  setenv("COMM_TIMEOUT", "soon", 1);
  cfg = (comm_config_t*)(void*)&sentinel;
  CHECK_FAILS(comm_config_from_env(&cfg), COMM_ERR_INVALID_CONFIG, "COMM_TIMEOUT");
  CHECK(cfg == NULL, "a failed comm_config_from_env left a handle");
  if (copy) setenv("COMM_TIMEOUT", copy, 1);
  else unsetenv("COMM_TIMEOUT");
  free(copy);
}

static void test_call_arguments(comm_t* c, int size) {
  float x[4] = {1, 2, 3, 4};
  CHECK_FAILS(comm_allreduce(NULL, x, x, 4, COMM_F32, COMM_SUM, NULL), COMM_ERR_INVALID_ARGUMENT, "comm is NULL");
  CHECK_FAILS(comm_allreduce(c, x, x, 4, (comm_dtype_t)99, COMM_SUM, NULL), COMM_ERR_INVALID_ARGUMENT, "dtype 99");
  CHECK_FAILS(comm_allreduce(c, x, x, 4, COMM_F32, (comm_op_t)42, NULL), COMM_ERR_INVALID_ARGUMENT, "op 42");
  CHECK_FAILS(comm_allreduce(c, NULL, x, 4, COMM_F32, COMM_SUM, NULL), COMM_ERR_INVALID_ARGUMENT, "input buffer is null");
  CHECK_FAILS(comm_allreduce(c, x, NULL, 4, COMM_F32, COMM_SUM, NULL), COMM_ERR_INVALID_ARGUMENT, "output buffer is null");
  CHECK_FAILS(comm_broadcast(c, x, 4, COMM_F32, size, NULL), COMM_ERR_INVALID_ARGUMENT, "root");
  CHECK_FAILS(comm_reduce(c, x, x, 4, COMM_F32, COMM_SUM, -1, NULL), COMM_ERR_INVALID_ARGUMENT, "root");
  CHECK_FAILS(comm_send(c, x, 4, COMM_F32, -1, NULL), COMM_ERR_INVALID_ARGUMENT, "peer");
  CHECK_FAILS(comm_recv(c, x, 4, COMM_F32, size, NULL), COMM_ERR_INVALID_ARGUMENT, "peer");
  if (size > 1)
    CHECK_FAILS(comm_reduce_scatter(c, x, x, SIZE_MAX, COMM_F32, COMM_SUM, NULL), COMM_ERR_INVALID_ARGUMENT, "overflows");

  comm_call_options_t o = COMM_CALL_OPTIONS_INIT;
  o.struct_size = 0;
  CHECK_FAILS(comm_allreduce(c, x, x, 4, COMM_F32, COMM_SUM, &o), COMM_ERR_INVALID_ARGUMENT, "struct_size");
  o = (comm_call_options_t)COMM_CALL_OPTIONS_INIT;
  o.timeout_ms = -1;
  CHECK_FAILS(comm_barrier(c, &o), COMM_ERR_INVALID_ARGUMENT, "timeout_ms");
  o = (comm_call_options_t)COMM_CALL_OPTIONS_INIT;
  o.memory = (comm_memory_t)7;
  CHECK_FAILS(comm_barrier(c, &o), COMM_ERR_INVALID_ARGUMENT, "memory 7");
  o = (comm_call_options_t)COMM_CALL_OPTIONS_INIT;
  o.algorithm = "no_such_algo";
  CHECK_FAILS(comm_allreduce(c, x, x, 4, COMM_F32, COMM_SUM, &o), COMM_ERR_UNKNOWN_ALGORITHM, "no_such_algo");

  /* A caller with a newer header: fields past ours are fine while zero. */
  struct {
    comm_call_options_t known;
    uint64_t newer_field;
  } ext;
  memset(&ext, 0, sizeof ext);
  ext.known = (comm_call_options_t)COMM_CALL_OPTIONS_INIT;
  ext.known.struct_size = sizeof ext;
  ext.newer_field = 1;
  CHECK_FAILS(comm_allreduce(c, x, x, 4, COMM_F32, COMM_SUM, &ext.known), COMM_ERR_UNSUPPORTED, "does not know");

  comm_request_t* r = (comm_request_t*)&o;
  CHECK_FAILS(comm_iallreduce(c, x, x, 4, COMM_F32, COMM_SUM, NULL, NULL), COMM_ERR_INVALID_ARGUMENT, "request is NULL");
  CHECK_FAILS(comm_iallreduce(c, x, x, 4, (comm_dtype_t)-1, COMM_SUM, NULL, &r), COMM_ERR_INVALID_ARGUMENT, "dtype -1");
  CHECK(r == NULL, "a failed comm_iallreduce left a request");
  CHECK_FAILS(comm_request_wait(NULL), COMM_ERR_INVALID_ARGUMENT, "request is NULL");
  int done = 0;
  CHECK_FAILS(comm_request_test(NULL, &done), COMM_ERR_INVALID_ARGUMENT, "request is NULL");

  char small[2];
  CHECK_FAILS(comm_algorithm_for(c, COMM_COLL_ALLREDUCE, 8, small, sizeof small), COMM_ERR_INVALID_ARGUMENT, "name_size 2");
  CHECK_FAILS(comm_algorithm_for(c, (comm_collective_t)77, 8, small, sizeof small), COMM_ERR_INVALID_ARGUMENT,
              "collective 77");
  CHECK_FAILS(comm_transport_name(c, small, 1), COMM_ERR_INVALID_ARGUMENT, "name_size 1");
  CHECK_FAILS(comm_rank(c, NULL), COMM_ERR_INVALID_ARGUMENT, "rank is NULL");
  CHECK_FAILS(comm_size(NULL, &done), COMM_ERR_INVALID_ARGUMENT, "comm is NULL");
  CHECK_FAILS(comm_split(c, 0, 0, NULL), COMM_ERR_INVALID_ARGUMENT, "newcomm is NULL");
  CHECK_FAILS(comm_abort(NULL), COMM_ERR_INVALID_ARGUMENT, "comm is NULL");
  CHECK_FAILS(comm_get_async_error(c, NULL, NULL), COMM_ERR_INVALID_ARGUMENT, "error is NULL");
  size_t counts[16] = {0};
  CHECK_FAILS(comm_all_to_allv(c, x, 4, NULL, counts, x, 4, counts, counts, COMM_F32, NULL), COMM_ERR_INVALID_ARGUMENT,
              "send_counts is NULL");
}

/* Requests' own argument checks need a live request. */
static void test_request_arguments(comm_t* c) {
  comm_request_t* r = NULL;
  CHECK_OK(comm_ibarrier(c, NULL, &r));
  CHECK_FAILS(comm_request_test(r, NULL), COMM_ERR_INVALID_ARGUMENT, "done is NULL");
  int done = 0;
  CHECK_FAILS(comm_request_wait_for(r, -5, &done), COMM_ERR_INVALID_ARGUMENT, "timeout_ms is -5");
  CHECK_OK(comm_request_wait(r));
  CHECK_OK(comm_request_test(r, &done));
  CHECK(done == 1, "a waited request is not done");
  comm_request_free(r);
  comm_request_free(NULL);
}

void run_error_tests(comm_t* c, int rank, int size) {
  (void)rank;
  test_status_names();
  test_config_setters();
  test_call_arguments(c, size);
  test_request_arguments(c);

  /* Usage errors did not fail the communicator: it still reduces correctly. */
  comm_status_t async = COMM_ERR_INTERNAL;
  CHECK_OK(comm_get_async_error(c, &async, NULL));
  CHECK(async == COMM_OK, "usage errors failed the communicator: %s", comm_status_name(async));
  int64_t v = rank + 1;
  CHECK_OK(comm_allreduce(c, &v, &v, 1, COMM_I64, COMM_SUM, NULL));
  CHECK(v == (int64_t)size * (size + 1) / 2, "allreduce after the usage errors gave %lld", (long long)v);
}
