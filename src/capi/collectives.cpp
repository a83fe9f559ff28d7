// C API: collectives, point to point, and requests. Each blocking function is
// its non-blocking twin followed by a wait, exactly as in the C++ API.

#include "capi/capi.hpp"

#include <limits>

using namespace comm::capi;
using comm::ConstView;
using comm::View;

namespace {

// What a call needs besides its buffers: the communicator, options, dtype.
struct Call {
  const char* fn;
  comm::Communicator& comm;
  Options options;
  comm::DataType dtype;

  ConstView in(const void* p, std::size_t n) const { return {p, n, dtype, options.memory}; }
  View out(void* p, std::size_t n) const { return {p, n, dtype, options.memory}; }
  // count x size() elements, or an error naming `what` if that overflows.
  std::size_t times_size(const char* what, std::size_t count) const {
    const auto n = static_cast<std::size_t>(comm.size());
    if (count > std::numeric_limits<std::size_t>::max() / n)
      bad_argument(fn, std::string(what) + " " + std::to_string(count) + " x " + std::to_string(n) +
                           " ranks overflows size_t");
    return count * n;
  }
};

// Runs `start` (Call -> comm::Work): blocking when `request` is not wanted,
// otherwise hands the Work out as a new request.
template <class Start>
comm_status_t run(const char* fn, comm_t* comm, comm_dtype_t dt, const comm_call_options_t* o,
                  comm_request_t** request, bool nonblocking, Start&& start) {
  return guarded(failure_of(comm), [&] {
    if (nonblocking) require(fn, "request", request) = nullptr;
    Call call{fn, communicator(fn, comm), options(fn, o), dtype(fn, dt)};
    comm::Work work = start(call);
    if (!nonblocking) return work.wait();
    *request = new comm_request{std::move(work), comm->failure};
  });
}

comm_status_t allreduce(comm_t* comm, const void* in, void* out, size_t count, comm_dtype_t dt, comm_op_t op,
                        const comm_call_options_t* o, comm_request_t** req, bool nb, const char* fn) {
  return run(fn, comm, dt, o, req, nb, [&](const Call& c) {
    return c.comm.iallreduce(c.in(in, count), c.out(out, count), reduce_op(fn, op), c.options.call);
  });
}

comm_status_t reduce_scatter(comm_t* comm, const void* in, void* out, size_t count, comm_dtype_t dt, comm_op_t op,
                             const comm_call_options_t* o, comm_request_t** req, bool nb, const char* fn) {
  return run(fn, comm, dt, o, req, nb, [&](const Call& c) {
    return c.comm.ireduce_scatter(c.in(in, c.times_size("count", count)), c.out(out, count), reduce_op(fn, op),
                                  c.options.call);
  });
}

comm_status_t allgather(comm_t* comm, const void* in, void* out, size_t count, comm_dtype_t dt,
                        const comm_call_options_t* o, comm_request_t** req, bool nb, const char* fn) {
  return run(fn, comm, dt, o, req, nb, [&](const Call& c) {
    return c.comm.iallgather(c.in(in, count), c.out(out, c.times_size("count", count)), c.options.call);
  });
}

comm_status_t broadcast(comm_t* comm, void* buffer, size_t count, comm_dtype_t dt, int root,
                        const comm_call_options_t* o, comm_request_t** req, bool nb, const char* fn) {
  return run(fn, comm, dt, o, req, nb,
             [&](const Call& c) { return c.comm.ibroadcast(c.out(buffer, count), root, c.options.call); });
}

comm_status_t reduce(comm_t* comm, const void* in, void* out, size_t count, comm_dtype_t dt, comm_op_t op, int root,
                     const comm_call_options_t* o, comm_request_t** req, bool nb, const char* fn) {
  return run(fn, comm, dt, o, req, nb, [&](const Call& c) {
    return c.comm.ireduce(c.in(in, count), c.out(out, count), reduce_op(fn, op), root, c.options.call);
  });
}

comm_status_t all_to_all(comm_t* comm, const void* in, void* out, size_t count, comm_dtype_t dt,
                         const comm_call_options_t* o, comm_request_t** req, bool nb, const char* fn) {
  return run(fn, comm, dt, o, req, nb, [&](const Call& c) {
    const std::size_t total = c.times_size("count", count);
    return c.comm.iall_to_all(c.in(in, total), c.out(out, total), c.options.call);
  });
}

comm_status_t all_to_allv(comm_t* comm, const void* in, size_t in_count, const size_t* sc, const size_t* sd,
                          void* out, size_t out_count, const size_t* rc, const size_t* rd, comm_dtype_t dt,
                          const comm_call_options_t* o, comm_request_t** req, bool nb, const char* fn) {
  return run(fn, comm, dt, o, req, nb, [&](const Call& c) {
    const auto n = static_cast<std::size_t>(c.comm.size());
    const auto entries = [&](const char* what, const size_t* p) {
      return std::span<const std::size_t>(&require(fn, what, p), n);
    };
    return c.comm.iall_to_allv(c.in(in, in_count), entries("send_counts", sc), entries("send_displs", sd),
                               c.out(out, out_count), entries("recv_counts", rc), entries("recv_displs", rd),
                               c.options.call);
  });
}

comm_status_t send_to(comm_t* comm, const void* buffer, size_t count, comm_dtype_t dt, int peer,
                   const comm_call_options_t* o, comm_request_t** req, bool nb, const char* fn) {
  return run(fn, comm, dt, o, req, nb,
             [&](const Call& c) { return c.comm.isend(c.in(buffer, count), peer, c.options.call); });
}

comm_status_t recv_from(comm_t* comm, void* buffer, size_t count, comm_dtype_t dt, int peer,
                   const comm_call_options_t* o, comm_request_t** req, bool nb, const char* fn) {
  return run(fn, comm, dt, o, req, nb,
             [&](const Call& c) { return c.comm.irecv(c.out(buffer, count), peer, c.options.call); });
}

comm_status_t barrier(comm_t* comm, const comm_call_options_t* o, comm_request_t** req, bool nb, const char* fn) {
  // A barrier moves no elements; any dtype will do for the shared checks.
  return run(fn, comm, COMM_U8, o, req, nb, [&](const Call& c) { return c.comm.ibarrier(c.options.call); });
}

// Runs `body` on a request's Work, recording a failure on its communicator.
template <class Body>
comm_status_t on_request(const char* fn, comm_request_t* r, Body&& body) {
  return guarded(r ? r->failure.get() : nullptr, [&] { body(require(fn, "request", r).work); });
}

}  // namespace

extern "C" {

comm_status_t comm_allreduce(comm_t* comm, const void* input, void* output, size_t count, comm_dtype_t dtype,
                             comm_op_t op, const comm_call_options_t* options) {
  return allreduce(comm, input, output, count, dtype, op, options, nullptr, false, "comm_allreduce");
}
comm_status_t comm_iallreduce(comm_t* comm, const void* input, void* output, size_t count, comm_dtype_t dtype,
                              comm_op_t op, const comm_call_options_t* options, comm_request_t** request) {
  return allreduce(comm, input, output, count, dtype, op, options, request, true, "comm_iallreduce");
}

comm_status_t comm_reduce_scatter(comm_t* comm, const void* input, void* output, size_t count, comm_dtype_t dtype,
                                  comm_op_t op, const comm_call_options_t* options) {
  return reduce_scatter(comm, input, output, count, dtype, op, options, nullptr, false, "comm_reduce_scatter");
}
comm_status_t comm_ireduce_scatter(comm_t* comm, const void* input, void* output, size_t count, comm_dtype_t dtype,
                                   comm_op_t op, const comm_call_options_t* options, comm_request_t** request) {
  return reduce_scatter(comm, input, output, count, dtype, op, options, request, true, "comm_ireduce_scatter");
}

comm_status_t comm_allgather(comm_t* comm, const void* input, void* output, size_t count, comm_dtype_t dtype,
                             const comm_call_options_t* options) {
  return allgather(comm, input, output, count, dtype, options, nullptr, false, "comm_allgather");
}
comm_status_t comm_iallgather(comm_t* comm, const void* input, void* output, size_t count, comm_dtype_t dtype,
                              const comm_call_options_t* options, comm_request_t** request) {
  return allgather(comm, input, output, count, dtype, options, request, true, "comm_iallgather");
}

comm_status_t comm_broadcast(comm_t* comm, void* buffer, size_t count, comm_dtype_t dtype, int root,
                             const comm_call_options_t* options) {
  return broadcast(comm, buffer, count, dtype, root, options, nullptr, false, "comm_broadcast");
}
comm_status_t comm_ibroadcast(comm_t* comm, void* buffer, size_t count, comm_dtype_t dtype, int root,
                              const comm_call_options_t* options, comm_request_t** request) {
  return broadcast(comm, buffer, count, dtype, root, options, request, true, "comm_ibroadcast");
}

comm_status_t comm_reduce(comm_t* comm, const void* input, void* output, size_t count, comm_dtype_t dtype,
                          comm_op_t op, int root, const comm_call_options_t* options) {
  return reduce(comm, input, output, count, dtype, op, root, options, nullptr, false, "comm_reduce");
}
comm_status_t comm_ireduce(comm_t* comm, const void* input, void* output, size_t count, comm_dtype_t dtype,
                           comm_op_t op, int root, const comm_call_options_t* options, comm_request_t** request) {
  return reduce(comm, input, output, count, dtype, op, root, options, request, true, "comm_ireduce");
}

comm_status_t comm_all_to_all(comm_t* comm, const void* input, void* output, size_t count, comm_dtype_t dtype,
                              const comm_call_options_t* options) {
  return all_to_all(comm, input, output, count, dtype, options, nullptr, false, "comm_all_to_all");
}
comm_status_t comm_iall_to_all(comm_t* comm, const void* input, void* output, size_t count, comm_dtype_t dtype,
                               const comm_call_options_t* options, comm_request_t** request) {
  return all_to_all(comm, input, output, count, dtype, options, request, true, "comm_iall_to_all");
}

comm_status_t comm_all_to_allv(comm_t* comm, const void* input, size_t input_count, const size_t* send_counts,
                               const size_t* send_displs, void* output, size_t output_count,
                               const size_t* recv_counts, const size_t* recv_displs, comm_dtype_t dtype,
                               const comm_call_options_t* options) {
  return all_to_allv(comm, input, input_count, send_counts, send_displs, output, output_count, recv_counts,
                     recv_displs, dtype, options, nullptr, false, "comm_all_to_allv");
}
comm_status_t comm_iall_to_allv(comm_t* comm, const void* input, size_t input_count, const size_t* send_counts,
                                const size_t* send_displs, void* output, size_t output_count,
                                const size_t* recv_counts, const size_t* recv_displs, comm_dtype_t dtype,
                                const comm_call_options_t* options, comm_request_t** request) {
  return all_to_allv(comm, input, input_count, send_counts, send_displs, output, output_count, recv_counts,
                     recv_displs, dtype, options, request, true, "comm_iall_to_allv");
}

comm_status_t comm_send(comm_t* comm, const void* buffer, size_t count, comm_dtype_t dtype, int peer,
                        const comm_call_options_t* options) {
  return send_to(comm, buffer, count, dtype, peer, options, nullptr, false, "comm_send");
}
comm_status_t comm_isend(comm_t* comm, const void* buffer, size_t count, comm_dtype_t dtype, int peer,
                         const comm_call_options_t* options, comm_request_t** request) {
  return send_to(comm, buffer, count, dtype, peer, options, request, true, "comm_isend");
}
comm_status_t comm_recv(comm_t* comm, void* buffer, size_t count, comm_dtype_t dtype, int peer,
                        const comm_call_options_t* options) {
  return recv_from(comm, buffer, count, dtype, peer, options, nullptr, false, "comm_recv");
}
comm_status_t comm_irecv(comm_t* comm, void* buffer, size_t count, comm_dtype_t dtype, int peer,
                         const comm_call_options_t* options, comm_request_t** request) {
  return recv_from(comm, buffer, count, dtype, peer, options, request, true, "comm_irecv");
}

comm_status_t comm_barrier(comm_t* comm, const comm_call_options_t* options) {
  return barrier(comm, options, nullptr, false, "comm_barrier");
}
comm_status_t comm_ibarrier(comm_t* comm, const comm_call_options_t* options, comm_request_t** request) {
  return barrier(comm, options, request, true, "comm_ibarrier");
}

comm_status_t comm_request_test(comm_request_t* request, int* done) {
  const char* fn = "comm_request_test";
  return on_request(fn, request, [&](comm::Work& w) {
    int& out = require(fn, "done", done);
    out = 0;
    out = w.test() ? 1 : 0;
  });
}

comm_status_t comm_request_wait(comm_request_t* request) {
  return on_request("comm_request_wait", request, [&](comm::Work& w) { w.wait(); });
}

comm_status_t comm_request_wait_for(comm_request_t* request, int64_t timeout_ms, int* done) {
  const char* fn = "comm_request_wait_for";
  return on_request(fn, request, [&](comm::Work& w) {
    int& out = require(fn, "done", done);
    out = 0;
    if (timeout_ms < 0)
      bad_argument(fn, "timeout_ms is " + std::to_string(timeout_ms) + ": use 0 (just test) or more milliseconds");
    out = w.wait_for(std::chrono::milliseconds(timeout_ms)) ? 1 : 0;
  });
}

void comm_request_free(comm_request_t* request) { delete request; }

}  // extern "C"
