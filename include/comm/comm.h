#ifndef COMM_COMM_H
#define COMM_COMM_H
/**
 * \file comm.h
 * The C API of comm: plain C11 (also valid C++), for runtimes written in C,
 * Rust, Go, Zig or anything else with a C FFI. It wraps the C++ API
 * (comm/comm.hpp) one to one; no C++ type crosses this boundary.
 *
 * Handles. comm_config_t, comm_t and comm_request_t are opaque; the caller
 * owns each handle it receives and releases it with the matching
 * comm_*_destroy / comm_request_free. Releasing NULL is a no-op.
 *
 * Errors. Every function that can fail returns a comm_status_t: COMM_OK, or
 * the code of the comm::ErrorCode that stopped it (one to one). The complete
 * message (what was asked, what was wrong, which argument or rank) is then
 * available from comm_last_error() on the same thread. Usage errors (bad
 * arguments: COMM_ERR_INVALID_ARGUMENT .. COMM_ERR_INVALID_CONFIG) are
 * reported before anything is sent and leave the communicator usable.
 * Runtime errors (COMM_ERR_TIMEOUT and later) fail the communicator: every
 * later call returns COMM_ERR_COMMUNICATOR_FAILED at once, and
 * comm_get_async_error() reports the first error. No function ever lets an
 * exception escape, and no wait is unbounded: each has the call's timeout.
 *
 * Blocking. Blocking collectives return when this rank's part is complete and
 * its buffers may be reused. comm_i* functions start the operation and return
 * a request at once; the operation advances whenever any call on its
 * communicator runs (there is no progress thread), including
 * comm_request_test(). Buffers must stay valid until the request completes.
 *
 * Threads. A communicator (and its requests) is used by one thread at a time;
 * comm_abort() is the exception and may be called from any thread. Config
 * handles are plain values: do not share one between threads while setting it.
 *
 * Versioning. Every symbol is versioned (COMM_1.0, ...): additions come in
 * new version nodes and never change what an existing one means, so a binary
 * built against this header keeps working with later libraries of the same
 * ABI major version. Structs passed in carry their own size (see
 * comm_call_options_t) so that later versions can add fields.
 */

#include <comm/export.hpp>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** ABI version this header describes. The major number changes only on an
 * incompatible change; the minor number when symbols are added. */
#define COMM_ABI_VERSION_MAJOR 1
#define COMM_ABI_VERSION_MINOR 0

/* ---- status codes -------------------------------------------------------- */

/** Result of every fallible call: COMM_OK or one code per comm::ErrorCode. */
typedef enum comm_status {
  COMM_OK = 0,
  /* usage errors: reported before anything is sent; the communicator stays usable */
  COMM_ERR_INVALID_ARGUMENT = 1,   /**< NULL handle or buffer, count overflow, rank out of range... */
  COMM_ERR_UNSUPPORTED = 2,        /**< dtype/op/memory kind not supported by the algorithm or transport */
  COMM_ERR_UNKNOWN_ALGORITHM = 3,  /**< no algorithm of that name for that collective */
  COMM_ERR_UNKNOWN_TRANSPORT = 4,  /**< no transport registered or loadable under that name */
  COMM_ERR_INVALID_CONFIG = 5,     /**< malformed configuration value or environment variable */
  /* runtime errors: the communicator is failed */
  COMM_ERR_TIMEOUT = 6,             /**< an operation did not complete in time */
  COMM_ERR_PEER_FAILED = 7,         /**< a peer died or its connection broke */
  COMM_ERR_ABORTED = 8,             /**< comm_abort() was called */
  COMM_ERR_MISMATCH = 9,            /**< ranks called different collectives or counts */
  COMM_ERR_TRANSPORT_FAILURE = 10,  /**< the transport library reported an error */
  COMM_ERR_COMMUNICATOR_FAILED = 11,/**< a call on a communicator already failed by an earlier error */
  COMM_ERR_STORE_FAILURE = 12,      /**< the bootstrap store could not be reached or misbehaved */
  COMM_ERR_INTERNAL = 13,           /**< a bug in comm (or out of memory); please report it */
  COMM_STATUS_FORCE_INT32 = -0x7fffffff - 1 /**< not a status: keeps the enum int-sized, any int a valid value */
} comm_status_t;

/** The name of a status ("ok", "invalid_argument", ...: the names of
 * comm::ErrorCode); "unknown_status" for a value outside the enum. Static
 * storage; never NULL. */
COMM_API const char* comm_status_name(comm_status_t status);

/** The message of the last failed call on this thread: a complete sentence
 * naming the function, the argument or rank, and what to do. "" when no call
 * has failed on this thread. Successful calls leave it unchanged. Valid until
 * the next failing call on this thread. */
COMM_API const char* comm_last_error(void);

/* ---- versions ------------------------------------------------------------ */

/** The library's version (e.g. 0.1.0). Any pointer may be NULL. Never fails. */
COMM_API comm_status_t comm_get_version(int* major, int* minor, int* patch);
/** The ABI version the library implements. A program built against this
 * header needs abi major == COMM_ABI_VERSION_MAJOR and abi minor >=
 * COMM_ABI_VERSION_MINOR. Any pointer may be NULL. Never fails. */
COMM_API comm_status_t comm_get_abi_version(int* major, int* minor);

/* ---- value types ---------------------------------------------------------
 * Every enum ends in a *_FORCE_INT32 member (INT_MIN) that is not a value: it
 * makes the enum int-sized and every int a representable value, so a wrong
 * number from another language is reported, not undefined behaviour. */

/** Element type of a buffer. f16/bf16 are 16-bit patterns, reduced in f32. */
typedef enum comm_dtype {
  COMM_F32 = 0,
  COMM_F64 = 1,
  COMM_F16 = 2,
  COMM_BF16 = 3,
  COMM_I8 = 4,
  COMM_U8 = 5,
  COMM_I32 = 6,
  COMM_I64 = 7,
  COMM_DTYPE_FORCE_INT32 = -0x7fffffff - 1 /**< not a dtype (see COMM_STATUS_FORCE_INT32) */
} comm_dtype_t;

/** Reduction operator. COMM_AVG is the sum divided by the number of ranks
 * (truncating toward zero on integer types). */
typedef enum comm_op {
  COMM_SUM = 0,
  COMM_PROD = 1,
  COMM_MIN = 2,
  COMM_MAX = 3,
  COMM_AVG = 4,
  COMM_OP_FORCE_INT32 = -0x7fffffff - 1 /**< not an op */
} comm_op_t;

/** Where a buffer lives: host memory for host transports (ucx, ofi, gloo,
 * local), CUDA device memory for the nccl transport. */
typedef enum comm_memory {
  COMM_MEMORY_HOST = 0,
  COMM_MEMORY_CUDA = 1,
  COMM_MEMORY_FORCE_INT32 = -0x7fffffff - 1 /**< not a memory kind */
} comm_memory_t;

/** The operations of a communicator, for comm_algorithm_for(). */
typedef enum comm_collective {
  COMM_COLL_ALLREDUCE = 0,
  COMM_COLL_REDUCE_SCATTER = 1,
  COMM_COLL_ALLGATHER = 2,
  COMM_COLL_BROADCAST = 3,
  COMM_COLL_REDUCE = 4,
  COMM_COLL_ALL_TO_ALL = 5,
  COMM_COLL_ALL_TO_ALLV = 6,
  COMM_COLL_BARRIER = 7,
  COMM_COLL_SEND = 8,
  COMM_COLL_RECV = 9,
  COMM_COLL_FORCE_INT32 = -0x7fffffff - 1 /**< not a collective */
} comm_collective_t;

/** Bytes of one element of `dtype`; 0 for a value outside comm_dtype_t. */
COMM_API size_t comm_dtype_size(comm_dtype_t dtype);

/* ---- configuration ------------------------------------------------------- */

/** A communicator's configuration (comm::Config): rank, world size, store
 * address, transport, timeouts, selection override... */
typedef struct comm_config comm_config_t;

/** New configuration with the library defaults (rank 0 of 1, transport
 * chosen at creation, 300 s timeout). */
COMM_API comm_status_t comm_config_create(comm_config_t** config);
/** New configuration read from the environment (COMM_RANK, COMM_WORLD_SIZE,
 * COMM_STORE, COMM_TRANSPORT, ...; also torchrun, Slurm and Open MPI
 * variables; see comm/config.hpp). An unparseable variable is
 * COMM_ERR_INVALID_CONFIG naming it. */
COMM_API comm_status_t comm_config_from_env(comm_config_t** config);
/** Releases a configuration; NULL is a no-op. Communicators created from it
 * are unaffected (they copied it). */
COMM_API void comm_config_destroy(comm_config_t* config);

/* Setters, one per comm::Config field. Each validates its value on its own
 * (COMM_ERR_INVALID_CONFIG naming the field, COMM_ERR_INVALID_ARGUMENT for a
 * NULL handle or string); combinations (rank < world size, a known transport,
 * a valid algorithm override) are checked by comm_create(). Strings are copied. */
COMM_API comm_status_t comm_config_set_rank(comm_config_t* config, int rank);
COMM_API comm_status_t comm_config_set_world_size(comm_config_t* config, int world_size);
COMM_API comm_status_t comm_config_set_local_rank(comm_config_t* config, int local_rank);
/** "host:port" (TCP store hosted by rank 0), "file:/dir", or "" (in-process). */
COMM_API comm_status_t comm_config_set_store(comm_config_t* config, const char* store);
COMM_API comm_status_t comm_config_set_store_token(comm_config_t* config, const char* token);
COMM_API comm_status_t comm_config_set_store_bind(comm_config_t* config, const char* address);
/** "local", "ucx", "ofi", "gloo", "nccl" or a registered transport's name;
 * "" (the default) = chosen at creation: local when all ranks are threads of
 * one process, else the best host transport built in. */
COMM_API comm_status_t comm_config_set_transport(comm_config_t* config, const char* transport);
/** Default per-operation timeout in milliseconds (> 0). */
COMM_API comm_status_t comm_config_set_timeout_ms(comm_config_t* config, int64_t timeout_ms);
/** "off", "warn", "info", "debug" or "trace". */
COMM_API comm_status_t comm_config_set_log_level(comm_config_t* config, const char* level);
/** Selection override, e.g. "allreduce=direct:0-64K,ring:64K-" (like COMM_ALGO). */
COMM_API comm_status_t comm_config_set_algo_override(comm_config_t* config, const char* override_spec);
/** Pipeline chunk size in bytes (> 0). */
COMM_API comm_status_t comm_config_set_chunk_bytes(comm_config_t* config, size_t chunk_bytes);
/** Nonzero: measure alpha/beta per link kind at creation. */
COMM_API comm_status_t comm_config_set_calibrate(comm_config_t* config, int calibrate);
COMM_API comm_status_t comm_config_set_tuning_file(comm_config_t* config, const char* path);
/** Nonzero: check that every rank calls the same collective with the same sizes. */
COMM_API comm_status_t comm_config_set_check(comm_config_t* config, int check);
/** CUDA device ordinal for the nccl transport; -1 = the local rank. */
COMM_API comm_status_t comm_config_set_device(comm_config_t* config, int device);
/** Host address transports bind to; "" = automatic. */
COMM_API comm_status_t comm_config_set_iface(comm_config_t* config, const char* address);
/** Number of operations each rank's flight recorder remembers. */
COMM_API comm_status_t comm_config_set_flight_recorder_size(comm_config_t* config, size_t operations);
/** Directory flight-recorder dumps are written to; "" = stderr on SIGUSR1 only. */
COMM_API comm_status_t comm_config_set_dump_dir(comm_config_t* config, const char* directory);
/** A setting owned by a transport, keyed "<transport>.<setting>", e.g.
 * ("ofi.provider", "tcp;ofi_rxm"); it beats the variable COMM_OFI_PROVIDER.
 * The transports' READMEs list their settings. key must not be empty. */
COMM_API comm_status_t comm_config_set_transport_option(comm_config_t* config, const char* key, const char* value);

/* ---- communicators ------------------------------------------------------- */

/** A member of a group of ranks (comm::Communicator). */
typedef struct comm_communicator comm_t;

/** Creates this rank's member of the group `config` describes (NULL: read
 * the environment, as comm_config_from_env), meeting the other ranks through
 * its store. Blocks until every rank has joined, up to the config's timeout.
 * On failure *comm is set to NULL. */
COMM_API comm_status_t comm_create(const comm_config_t* config, comm_t** comm);
/** Destroys a communicator; pending operations are cancelled (their requests
 * then report COMM_ERR_ABORTED). NULL is a no-op. Never blocks on peers. */
COMM_API void comm_destroy(comm_t* comm);
/** Collective over `comm`: ranks passing the same color form a new
 * communicator, ordered by (key, old rank). color < 0 leaves this rank out:
 * *newcomm is set to NULL and COMM_OK is returned. */
COMM_API comm_status_t comm_split(comm_t* comm, int color, int key, comm_t** newcomm);

COMM_API comm_status_t comm_rank(const comm_t* comm, int* rank);
COMM_API comm_status_t comm_size(const comm_t* comm, int* size);
/** The transport's name, NUL-terminated into name[0..name_size). A buffer too
 * small is COMM_ERR_INVALID_ARGUMENT naming the size needed. */
COMM_API comm_status_t comm_transport_name(const comm_t* comm, char* name, size_t name_size);

/** Fails every pending and later operation with COMM_ERR_ABORTED and wakes
 * waiters (within 100 ms). Safe from any thread. */
COMM_API comm_status_t comm_abort(comm_t* comm);
/** The asynchronous error state: *error is COMM_OK while the communicator is
 * healthy; once a runtime error (or comm_abort) failed it, the code of that
 * first error, and *message (if message is not NULL) its text, valid until
 * comm_destroy. */
COMM_API comm_status_t comm_get_async_error(comm_t* comm, comm_status_t* error, const char** message);

/** The algorithm automatic selection uses for `bytes` of `collective`
 * (identical on every rank), NUL-terminated into name[0..name_size). */
COMM_API comm_status_t comm_algorithm_for(const comm_t* comm, comm_collective_t collective, size_t bytes,
                                          char* name, size_t name_size);

/* ---- per-call options ---------------------------------------------------- */

/** Per-call options (comm::CallOptions). Always initialise with
 * COMM_CALL_OPTIONS_INIT (or comm_call_options_init): `struct_size` tells the
 * library which fields the caller knows, so later versions can add fields at
 * the end. NULL options mean all defaults. */
typedef struct comm_call_options {
  size_t struct_size;     /**< sizeof(comm_call_options_t) of the caller's header */
  const char* algorithm;  /**< algorithm by name ("ring", "direct", ...); NULL or "" = automatic */
  int64_t timeout_ms;     /**< operation timeout; 0 = the config's timeout */
  uint32_t tag;           /**< send/recv: messages match on (peer, tag) in posting order */
  comm_memory_t memory;   /**< where the buffers live */
  void* stream;           /**< cudaStream_t for stream-ordered transports (nccl); ignored otherwise */
} comm_call_options_t;

#define COMM_CALL_OPTIONS_INIT {sizeof(comm_call_options_t), NULL, 0, 0, COMM_MEMORY_HOST, NULL}

/** Sets *options to the defaults (same as COMM_CALL_OPTIONS_INIT). */
COMM_API comm_status_t comm_call_options_init(comm_call_options_t* options);

/* ---- requests (non-blocking operations) ---------------------------------- */

/** A started operation (comm::Work). */
typedef struct comm_request comm_request_t;

/** Advances the communicator's operations; *done = 1 once this one is
 * complete. A failed operation returns its error (and fails the communicator). */
COMM_API comm_status_t comm_request_test(comm_request_t* request, int* done);
/** Waits until complete, up to the operation's timeout (then COMM_ERR_TIMEOUT). */
COMM_API comm_status_t comm_request_wait(comm_request_t* request);
/** Waits at most timeout_ms (>= 0); *done = 0 if it is still running (it
 * keeps going). */
COMM_API comm_status_t comm_request_wait_for(comm_request_t* request, int64_t timeout_ms, int* done);
/** Releases a request; NULL is a no-op. An operation still running keeps
 * running as its communicator progresses (its buffers must stay valid until
 * then); its failure, if any, surfaces through comm_get_async_error. */
COMM_API void comm_request_free(comm_request_t* request);

/* ---- collectives ----------------------------------------------------------
 * Counts are in elements of `dtype`. Every rank calls the same collectives in
 * the same order with matching counts. input == output is in place. `options`
 * may be NULL. Each comm_i* twin takes the same arguments plus `request`,
 * which receives a new request (NULL on failure). */

/** output[i] = op over ranks of input[i], `count` elements on every rank. */
COMM_API comm_status_t comm_allreduce(comm_t* comm, const void* input, void* output, size_t count, comm_dtype_t dtype,
                                      comm_op_t op, const comm_call_options_t* options);
COMM_API comm_status_t comm_iallreduce(comm_t* comm, const void* input, void* output, size_t count,
                                       comm_dtype_t dtype, comm_op_t op, const comm_call_options_t* options,
                                       comm_request_t** request);

/** input holds size x count elements; rank r receives block r (count elements)
 * of the reduction in output. */
COMM_API comm_status_t comm_reduce_scatter(comm_t* comm, const void* input, void* output, size_t count,
                                           comm_dtype_t dtype, comm_op_t op, const comm_call_options_t* options);
COMM_API comm_status_t comm_ireduce_scatter(comm_t* comm, const void* input, void* output, size_t count,
                                            comm_dtype_t dtype, comm_op_t op, const comm_call_options_t* options,
                                            comm_request_t** request);

/** Every rank contributes `count` elements; output holds size x count, block
 * r from rank r. */
COMM_API comm_status_t comm_allgather(comm_t* comm, const void* input, void* output, size_t count,
                                      comm_dtype_t dtype, const comm_call_options_t* options);
COMM_API comm_status_t comm_iallgather(comm_t* comm, const void* input, void* output, size_t count,
                                       comm_dtype_t dtype, const comm_call_options_t* options,
                                       comm_request_t** request);

/** Copies root's `count` elements of buffer to every rank's buffer. */
COMM_API comm_status_t comm_broadcast(comm_t* comm, void* buffer, size_t count, comm_dtype_t dtype, int root,
                                      const comm_call_options_t* options);
COMM_API comm_status_t comm_ibroadcast(comm_t* comm, void* buffer, size_t count, comm_dtype_t dtype, int root,
                                       const comm_call_options_t* options, comm_request_t** request);

/** The reduction of `count` elements lands in root's output; output is
 * ignored (may be NULL) on the other ranks. */
COMM_API comm_status_t comm_reduce(comm_t* comm, const void* input, void* output, size_t count, comm_dtype_t dtype,
                                   comm_op_t op, int root, const comm_call_options_t* options);
COMM_API comm_status_t comm_ireduce(comm_t* comm, const void* input, void* output, size_t count, comm_dtype_t dtype,
                                    comm_op_t op, int root, const comm_call_options_t* options,
                                    comm_request_t** request);

/** input and output hold size blocks of `count` elements: block j of rank i's
 * input becomes block i of rank j's output. */
COMM_API comm_status_t comm_all_to_all(comm_t* comm, const void* input, void* output, size_t count,
                                       comm_dtype_t dtype, const comm_call_options_t* options);
COMM_API comm_status_t comm_iall_to_all(comm_t* comm, const void* input, void* output, size_t count,
                                        comm_dtype_t dtype, const comm_call_options_t* options,
                                        comm_request_t** request);

/** Variable all-to-all: the four arrays have size entries (elements). Rank j
 * receives input[send_displs[j] .. +send_counts[j]) at its
 * output[recv_displs[i] .. +recv_counts[i]). input_count and output_count
 * are the buffers' total lengths, checked against every block. The arrays
 * are read during the call only (also for comm_iall_to_allv). */
COMM_API comm_status_t comm_all_to_allv(comm_t* comm, const void* input, size_t input_count,
                                        const size_t* send_counts, const size_t* send_displs, void* output,
                                        size_t output_count, const size_t* recv_counts, const size_t* recv_displs,
                                        comm_dtype_t dtype, const comm_call_options_t* options);
COMM_API comm_status_t comm_iall_to_allv(comm_t* comm, const void* input, size_t input_count,
                                         const size_t* send_counts, const size_t* send_displs, void* output,
                                         size_t output_count, const size_t* recv_counts, const size_t* recv_displs,
                                         comm_dtype_t dtype, const comm_call_options_t* options,
                                         comm_request_t** request);

/** Point to point: `count` elements to / from `peer`, matched on (peer,
 * options->tag) in posting order. A receive of a different size is an error
 * naming both sizes. */
COMM_API comm_status_t comm_send(comm_t* comm, const void* buffer, size_t count, comm_dtype_t dtype, int peer,
                                 const comm_call_options_t* options);
COMM_API comm_status_t comm_isend(comm_t* comm, const void* buffer, size_t count, comm_dtype_t dtype, int peer,
                                  const comm_call_options_t* options, comm_request_t** request);
COMM_API comm_status_t comm_recv(comm_t* comm, void* buffer, size_t count, comm_dtype_t dtype, int peer,
                                 const comm_call_options_t* options);
COMM_API comm_status_t comm_irecv(comm_t* comm, void* buffer, size_t count, comm_dtype_t dtype, int peer,
                                  const comm_call_options_t* options, comm_request_t** request);

/** Returns once every rank has entered the barrier. */
COMM_API comm_status_t comm_barrier(comm_t* comm, const comm_call_options_t* options);
COMM_API comm_status_t comm_ibarrier(comm_t* comm, const comm_call_options_t* options, comm_request_t** request);

#ifdef __cplusplus
}
#endif

#endif /* COMM_COMM_H */
