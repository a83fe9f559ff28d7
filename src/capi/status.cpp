// The C API's error plumbing and argument conversions: status codes, the
// per-thread last error, versions, and the checks shared by every entry point.

#include "capi/capi.hpp"

#include <cstring>

namespace comm::capi {
namespace {

thread_local std::string last_error;

}  // namespace

comm_status_t to_status(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::invalid_argument: return COMM_ERR_INVALID_ARGUMENT;
    case ErrorCode::unsupported: return COMM_ERR_UNSUPPORTED;
    case ErrorCode::unknown_algorithm: return COMM_ERR_UNKNOWN_ALGORITHM;
    case ErrorCode::unknown_transport: return COMM_ERR_UNKNOWN_TRANSPORT;
    case ErrorCode::invalid_config: return COMM_ERR_INVALID_CONFIG;
    case ErrorCode::timeout: return COMM_ERR_TIMEOUT;
    case ErrorCode::peer_failed: return COMM_ERR_PEER_FAILED;
    case ErrorCode::aborted: return COMM_ERR_ABORTED;
    case ErrorCode::mismatch: return COMM_ERR_MISMATCH;
    case ErrorCode::transport_failure: return COMM_ERR_TRANSPORT_FAILURE;
    case ErrorCode::communicator_failed: return COMM_ERR_COMMUNICATOR_FAILED;
    case ErrorCode::store_failure: return COMM_ERR_STORE_FAILURE;
    case ErrorCode::internal: return COMM_ERR_INTERNAL;
  }
  return COMM_ERR_INTERNAL;
}

comm_status_t fail(CommFailure* failure, comm_status_t status, const char* message) noexcept {
  try {
    last_error = message;
  } catch (...) {
    last_error.clear();  // out of memory: the status code still says what happened
  }
  // Usage errors leave the communicator usable: they are not its failure.
  if (failure && status >= COMM_ERR_TIMEOUT) failure->record(status, message);
  return status;
}

void bad_argument(const char* fn, const std::string& what) {
  throw Error(ErrorCode::invalid_argument, std::string(fn) + ": " + what);
}

Communicator& communicator(const char* fn, const comm_t* c) {
  // The handle is const for queries; the C++ object behind it is not.
  return const_cast<Communicator&>(require(fn, "comm", c).communicator);
}

DataType dtype(const char* fn, comm_dtype_t d) {
  switch (d) {
    case COMM_F32: return DataType::f32;
    case COMM_F64: return DataType::f64;
    case COMM_F16: return DataType::f16;
    case COMM_BF16: return DataType::bf16;
    case COMM_I8: return DataType::i8;
    case COMM_U8: return DataType::u8;
    case COMM_I32: return DataType::i32;
    case COMM_I64: return DataType::i64;
    case COMM_DTYPE_FORCE_INT32: break;
  }
  bad_argument(fn, "dtype " + std::to_string(static_cast<int>(d)) +
                       " is not a comm_dtype_t (COMM_F32 .. COMM_I64, 0 .. 7)");
}

ReduceOp reduce_op(const char* fn, comm_op_t op) {
  switch (op) {
    case COMM_SUM: return ReduceOp::sum;
    case COMM_PROD: return ReduceOp::prod;
    case COMM_MIN: return ReduceOp::min;
    case COMM_MAX: return ReduceOp::max;
    case COMM_AVG: return ReduceOp::avg;
    case COMM_OP_FORCE_INT32: break;
  }
  bad_argument(fn, "op " + std::to_string(static_cast<int>(op)) + " is not a comm_op_t (COMM_SUM .. COMM_AVG, 0 .. 4)");
}

Collective collective(const char* fn, comm_collective_t c) {
  switch (c) {
    case COMM_COLL_ALLREDUCE: return Collective::allreduce;
    case COMM_COLL_REDUCE_SCATTER: return Collective::reduce_scatter;
    case COMM_COLL_ALLGATHER: return Collective::allgather;
    case COMM_COLL_BROADCAST: return Collective::broadcast;
    case COMM_COLL_REDUCE: return Collective::reduce;
    case COMM_COLL_ALL_TO_ALL: return Collective::all_to_all;
    case COMM_COLL_ALL_TO_ALLV: return Collective::all_to_allv;
    case COMM_COLL_BARRIER: return Collective::barrier;
    case COMM_COLL_SEND: return Collective::send;
    case COMM_COLL_RECV: return Collective::recv;
    case COMM_COLL_FORCE_INT32: break;
  }
  bad_argument(fn, "collective " + std::to_string(static_cast<int>(c)) +
                       " is not a comm_collective_t (COMM_COLL_ALLREDUCE .. COMM_COLL_RECV, 0 .. 9)");
}

Options options(const char* fn, const comm_call_options_t* o) {
  Options out;
  if (o == nullptr) return out;
  // ABI 1.0's struct; later versions append fields and keep accepting this size.
  constexpr std::size_t kSize_1_0 = sizeof(comm_call_options_t);
  if (o->struct_size < kSize_1_0)
    bad_argument(fn, "options->struct_size is " + std::to_string(o->struct_size) + ", below the " +
                         std::to_string(kSize_1_0) +
                         " bytes of comm_call_options_t: initialise options with COMM_CALL_OPTIONS_INIT");
  // A newer header's fields this library does not know must be left at zero.
  const auto* tail = reinterpret_cast<const unsigned char*>(o) + kSize_1_0;
  for (std::size_t i = 0; i < o->struct_size - kSize_1_0; ++i)
    if (tail[i] != 0)
      throw Error(ErrorCode::unsupported,
                  std::string(fn) + ": options set a field at byte " + std::to_string(kSize_1_0 + i) +
                      " that this library (ABI " + std::to_string(COMM_ABI_VERSION_MAJOR) + "." +
                      std::to_string(COMM_ABI_VERSION_MINOR) + ") does not know; use a newer libcomm");
  if (o->timeout_ms < 0)
    bad_argument(fn, "options->timeout_ms is " + std::to_string(o->timeout_ms) +
                         ": use a positive number of milliseconds, or 0 for the config's timeout");
  if (o->algorithm) out.call.algorithm = o->algorithm;
  out.call.timeout = std::chrono::milliseconds(o->timeout_ms);
  out.call.tag = o->tag;
  out.call.stream = o->stream;
  switch (o->memory) {
    case COMM_MEMORY_HOST: out.memory = MemoryKind::host; break;
    case COMM_MEMORY_CUDA: out.memory = MemoryKind::cuda; break;
    case COMM_MEMORY_FORCE_INT32:
    default:
      bad_argument(fn, "options->memory " + std::to_string(static_cast<int>(o->memory)) +
                           " is not a comm_memory_t (COMM_MEMORY_HOST or COMM_MEMORY_CUDA)");
  }
  return out;
}

void copy_out(const char* fn, const char* what, std::string_view value, char* buffer, std::size_t size) {
  require(fn, what, buffer);
  if (size <= value.size())
    bad_argument(fn, std::string(what) + "_size " + std::to_string(size) + " is too small for '" +
                         std::string(value) + "': it needs " + std::to_string(value.size() + 1) +
                         " bytes with the terminating NUL");
  std::memcpy(buffer, value.data(), value.size());
  buffer[value.size()] = '\0';
}

}  // namespace comm::capi

void CommFailure::record(comm_status_t c, const std::string& m) noexcept {
  std::lock_guard lk(mu);
  if (set) return;
  try {
    message = m;
  } catch (...) {
    message.clear();
  }
  code = c;
  set = true;
}

using namespace comm::capi;

extern "C" {

const char* comm_status_name(comm_status_t status) {
  switch (status) {
    case COMM_OK: return "ok";
    case COMM_ERR_INVALID_ARGUMENT: return "invalid_argument";
    case COMM_ERR_UNSUPPORTED: return "unsupported";
    case COMM_ERR_UNKNOWN_ALGORITHM: return "unknown_algorithm";
    case COMM_ERR_UNKNOWN_TRANSPORT: return "unknown_transport";
    case COMM_ERR_INVALID_CONFIG: return "invalid_config";
    case COMM_ERR_TIMEOUT: return "timeout";
    case COMM_ERR_PEER_FAILED: return "peer_failed";
    case COMM_ERR_ABORTED: return "aborted";
    case COMM_ERR_MISMATCH: return "mismatch";
    case COMM_ERR_TRANSPORT_FAILURE: return "transport_failure";
    case COMM_ERR_COMMUNICATOR_FAILED: return "communicator_failed";
    case COMM_ERR_STORE_FAILURE: return "store_failure";
    case COMM_ERR_INTERNAL: return "internal";
    case COMM_STATUS_FORCE_INT32: break;
  }
  return "unknown_status";
}

const char* comm_last_error(void) { return last_error.c_str(); }

comm_status_t comm_get_version(int* major, int* minor, int* patch) {
  if (major) *major = COMM_LIBRARY_VERSION_MAJOR;
  if (minor) *minor = COMM_LIBRARY_VERSION_MINOR;
  if (patch) *patch = COMM_LIBRARY_VERSION_PATCH;
  return COMM_OK;
}

comm_status_t comm_get_abi_version(int* major, int* minor) {
  if (major) *major = COMM_ABI_VERSION_MAJOR;
  if (minor) *minor = COMM_ABI_VERSION_MINOR;
  return COMM_OK;
}

size_t comm_dtype_size(comm_dtype_t d) {
  if (static_cast<unsigned>(d) > static_cast<unsigned>(COMM_I64)) return 0;
  return comm::dtype_size(dtype("comm_dtype_size", d));
}

comm_status_t comm_call_options_init(comm_call_options_t* o) {
  return guarded(nullptr, [&] { require("comm_call_options_init", "options", o) = COMM_CALL_OPTIONS_INIT; });
}

}  // extern "C"
