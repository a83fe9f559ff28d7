// C API: communicator lifetime, split, abort, failure state and introspection.

#include "capi/capi.hpp"

using namespace comm::capi;

namespace {

// Wraps a fresh C++ communicator into a handle; an invalid one (split with
// color < 0) becomes NULL.
comm_t* wrap(comm::Communicator c) {
  if (!c.valid()) return nullptr;
  auto* handle = new comm_communicator;
  handle->communicator = std::move(c);
  return handle;
}

}  // namespace

extern "C" {

comm_status_t comm_create(const comm_config_t* config, comm_t** comm) {
  return guarded(nullptr, [&] {
    require("comm_create", "comm", comm) = nullptr;
    *comm = wrap(comm::Communicator::create(config ? config->config : comm::Config::from_env()));
  });
}

void comm_destroy(comm_t* comm) { delete comm; }

comm_status_t comm_split(comm_t* comm, int color, int key, comm_t** newcomm) {
  const char* fn = "comm_split";
  return guarded(failure_of(comm), [&] {
    require(fn, "newcomm", newcomm) = nullptr;
    *newcomm = wrap(communicator(fn, comm).split(color, key));
  });
}

comm_status_t comm_rank(const comm_t* comm, int* rank) {
  return guarded(failure_of(comm), [&] {
    require("comm_rank", "rank", rank) = communicator("comm_rank", comm).rank();
  });
}

comm_status_t comm_size(const comm_t* comm, int* size) {
  return guarded(failure_of(comm), [&] {
    require("comm_size", "size", size) = communicator("comm_size", comm).size();
  });
}

comm_status_t comm_transport_name(const comm_t* comm, char* name, size_t name_size) {
  const char* fn = "comm_transport_name";
  return guarded(failure_of(comm), [&] { copy_out(fn, "name", communicator(fn, comm).transport_name(), name, name_size); });
}

comm_status_t comm_abort(comm_t* comm) {
  const char* fn = "comm_abort";
  return guarded(failure_of(comm), [&] {
    comm::Communicator& c = communicator(fn, comm);
    // Recorded before the C++ abort, so a waiter woken by it finds the reason.
    comm->failure->record(COMM_ERR_ABORTED, "communicator (rank " + std::to_string(c.rank()) +
                                                ") aborted by comm_abort()");
    c.abort();
  });
}

comm_status_t comm_get_async_error(comm_t* comm, comm_status_t* error, const char** message) {
  const char* fn = "comm_get_async_error";
  return guarded(failure_of(comm), [&] {
    const comm::Communicator& c = communicator(fn, comm);
    comm_status_t& out = require(fn, "error", error);
    CommFailure& f = *comm->failure;
    std::lock_guard lk(f.mu);
    if (!f.set && c.failed()) {
      // Failed by something no C call saw (a C++ caller sharing the object).
      f.set = true;
      f.code = COMM_ERR_COMMUNICATOR_FAILED;
      f.message = "communicator (rank " + std::to_string(c.rank()) + ") has failed outside the C API";
    }
    out = f.set ? f.code : COMM_OK;
    if (message) *message = f.set ? f.message.c_str() : "";
  });
}

comm_status_t comm_algorithm_for(const comm_t* comm, comm_collective_t coll, size_t bytes, char* name,
                                 size_t name_size) {
  const char* fn = "comm_algorithm_for";
  return guarded(failure_of(comm), [&] {
    const std::string algorithm = communicator(fn, comm).algorithm_for(collective(fn, coll), bytes);
    copy_out(fn, "name", algorithm, name, name_size);
  });
}

}  // extern "C"
