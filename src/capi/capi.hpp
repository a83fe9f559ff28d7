#pragma once
// Internals of the C API: the handle structs behind the opaque C types, the
// one place where exceptions become status codes (guarded), and conversions
// of C arguments into C++ values. Uses the public C++ API only.

#include <comm/comm.h>
#include <comm/comm.hpp>

#include <memory>
#include <mutex>
#include <string>
#include <string_view>

// The first runtime error seen on a communicator (or one of its requests):
// what comm_get_async_error reports. Shared by the communicator's handle and
// its requests, so a request freed late or outliving its communicator still
// has somewhere to record to.
struct CommFailure {
  std::mutex mu;
  bool set = false;
  comm_status_t code = COMM_OK;
  std::string message;

  // Keeps the first error; later ones are consequences of it.
  void record(comm_status_t c, const std::string& m) noexcept;
};

struct comm_config {
  comm::Config config;
};

struct comm_communicator {
  comm::Communicator communicator;
  std::shared_ptr<CommFailure> failure = std::make_shared<CommFailure>();
};

struct comm_request {
  comm::Work work;
  std::shared_ptr<CommFailure> failure;
};

namespace comm::capi {

comm_status_t to_status(ErrorCode code) noexcept;

// Records a failure: the thread's last error, and (for runtime errors) the
// communicator's first error. Returns the status to hand back.
comm_status_t fail(CommFailure* failure, comm_status_t status, const char* message) noexcept;

// Every C entry point runs its body through this: the body's exceptions
// become a status code and comm_last_error's message here, and nowhere else.
template <class Body>
comm_status_t guarded(CommFailure* failure, Body&& body) noexcept {
  try {
    body();
    return COMM_OK;
  } catch (const Error& e) {
    return fail(failure, to_status(e.code()), e.what());
  } catch (const std::bad_alloc&) {
    return fail(failure, COMM_ERR_INTERNAL, "out of memory");
  } catch (const std::exception& e) {
    return fail(failure, COMM_ERR_INTERNAL, e.what());
  } catch (...) {
    return fail(failure, COMM_ERR_INTERNAL, "an unknown exception reached the C API");
  }
}

// Argument checks: each throws comm::Error(invalid_argument) naming `fn` and `what`.
[[noreturn]] void bad_argument(const char* fn, const std::string& what);
template <class T>
T& require(const char* fn, const char* what, T* p) {
  if (p == nullptr) bad_argument(fn, std::string(what) + " is NULL");
  return *p;
}
inline const char* require_string(const char* fn, const char* what, const char* s) {
  if (s == nullptr) bad_argument(fn, std::string(what) + " is NULL");
  return s;
}
inline CommFailure* failure_of(const comm_t* c) noexcept { return c ? c->failure.get() : nullptr; }

// A usable communicator: not NULL and not released by a split with color < 0.
Communicator& communicator(const char* fn, const comm_t* c);
DataType dtype(const char* fn, comm_dtype_t d);
ReduceOp reduce_op(const char* fn, comm_op_t op);
Collective collective(const char* fn, comm_collective_t c);

// The C++ options equivalent to `options` (NULL = defaults). The returned
// object refers to options->algorithm: it lives no longer than the call.
struct Options {
  CallOptions call;
  MemoryKind memory = MemoryKind::host;
};
Options options(const char* fn, const comm_call_options_t* options);

// Copies `value` with its NUL into buffer[0..size), or throws naming the size needed.
void copy_out(const char* fn, const char* what, std::string_view value, char* buffer, std::size_t size);

}  // namespace comm::capi
