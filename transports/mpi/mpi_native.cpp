// MPI's own collectives offered as the algorithm `native`: MPI_Allreduce,
// MPI_Reduce_scatter_block, MPI_Allgather, MPI_Bcast, MPI_Reduce,
// MPI_Alltoall, MPI_Alltoallv and MPI_Barrier on the transport's communicator.
//
// By default the blocking calls run, because they are what MPI programs call
// and what MPI tunes (Open MPI's non-blocking ones, from libnbc, took 10-30 us
// for an 8 B all-reduce here where the blocking one takes 0.3 us); a watchdog
// ends the job if one outlives the operation's timeout. COMM_MPI_NATIVE=poll
// (or the transport option mpi.native=poll) runs the MPI_I* forms instead and
// polls them to the deadline, so that a timeout is a comm::Error.

#include "mpi_transport.hpp"

#include "engine/reduce_kernels.hpp"

#include <algorithm>
#include <climits>
#include <cstring>

namespace comm::mpi_detail {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kIntMax = static_cast<std::size_t>(INT_MAX);

bool overlaps(const void* a, std::size_t an, const void* b, std::size_t bn) {
  if (!a || !b || an == 0 || bn == 0) return false;
  const auto* pa = static_cast<const std::byte*>(a);
  const auto* pb = static_cast<const std::byte*>(b);
  return pa < pb + bn && pb < pa + an;
}

// Bytes of this rank's input and output of a collective (all_to_allv: spans).
struct Extent {
  std::size_t in = 0, out = 0;
};

Extent extent(const CollectiveArgs& a, int n, int me) {
  const std::size_t e = dtype_size(a.dtype), c = a.count * e, un = static_cast<std::size_t>(n);
  switch (a.collective) {
    case Collective::allreduce: return {c, c};
    case Collective::reduce_scatter: return {c * un, c};
    case Collective::allgather: return {c, c * un};
    case Collective::broadcast: return {c, c};
    case Collective::reduce: return {c, me == a.root ? c : 0};
    case Collective::all_to_all: return {c * un, c * un};
    case Collective::all_to_allv: {
      Extent x;
      for (int j = 0; j < n; ++j) {
        const auto uj = static_cast<std::size_t>(j);
        x.in = std::max(x.in, (a.send_displs[uj] + a.send_counts[uj]) * e);
        x.out = std::max(x.out, (a.recv_displs[uj] + a.recv_counts[uj]) * e);
      }
      return x;
    }
    case Collective::barrier:
    case Collective::send:
    case Collective::recv: return {};
  }
  return {};
}

// MPI_IN_PLACE stands for the input where MPI defines that form and comm's
// call has exactly its layout.
bool in_place(const CollectiveArgs& a, int me) {
  const std::size_t c = a.count * dtype_size(a.dtype);
  switch (a.collective) {
    case Collective::allreduce:
    case Collective::reduce_scatter:
    case Collective::all_to_all: return a.send == a.recv;
    case Collective::reduce: return me == a.root && a.send == a.recv;
    case Collective::allgather: return a.send == static_cast<const std::byte*>(a.recv) + static_cast<std::size_t>(me) * c;
    case Collective::broadcast:
    case Collective::all_to_allv:
    case Collective::barrier:
    case Collective::send:
    case Collective::recv: return false;
  }
  return false;
}

bool reduces(Collective c) {
  return c == Collective::allreduce || c == Collective::reduce_scatter || c == Collective::reduce;
}

}  // namespace

std::vector<std::string> MpiNative::algorithms(Collective c) const {
  switch (c) {
    case Collective::allreduce:
    case Collective::reduce_scatter:
    case Collective::allgather:
    case Collective::broadcast:
    case Collective::reduce:
    case Collective::all_to_all:
    case Collective::all_to_allv:
    case Collective::barrier: return {"native"};
    case Collective::send:
    case Collective::recv: return {};
  }
  return {};
}

bool MpiNative::supports(const CollectiveArgs& args, std::string_view algorithm, std::string* why) const {
  const std::string coll(to_string(args.collective));
  if (algorithm != "native" || algorithms(args.collective).empty())
    return refuse(why, "the mpi transport offers no '" + std::string(algorithm) + "' for " + coll);
  if (args.memory != MemoryKind::host)
    return refuse(why, "MPI's collectives here run on host memory only, not " + std::string(to_string(args.memory)) +
              " (this Open MPI is not CUDA-aware)");
  const std::size_t n = static_cast<std::size_t>(t_.size());
  if (args.collective == Collective::all_to_allv) {
    if (!args.send_counts || !args.send_displs || !args.recv_counts || !args.recv_displs)
      return refuse(why, "all_to_allv needs counts and displacements");
    for (std::size_t j = 0; j < n; ++j)
      if (args.send_counts[j] > kIntMax || args.send_displs[j] > kIntMax || args.recv_counts[j] > kIntMax ||
          args.recv_displs[j] > kIntMax)
        return refuse(why, "MPI_Alltoallv takes int counts and displacements; the block of rank " + std::to_string(j) +
                  " is beyond INT_MAX elements (use the algorithm 'pairwise')");
    return true;
  }
  if (args.count > kIntMax)
    return refuse(why, "MPI counts are int: native " + coll + " takes at most INT_MAX (" + std::to_string(INT_MAX) +
              ") elements per rank, not " + std::to_string(args.count) + " (use one of comm's algorithms)");
  return true;
}

double MpiNative::predict_us(Collective, std::string_view, std::size_t) const {
  // MPI picks its own algorithms per size; we have no model of them, so
  // `native` runs only when asked for by name (or by COMM_ALGO).
  return -1.0;
}

void MpiNative::run(const CollectiveArgs& args, std::string_view algorithm) {
  const std::string what = "mpi native " + std::string(to_string(args.collective));
  std::string why;
  if (!supports(args, algorithm, &why)) {
    const bool known = algorithm == "native" && !algorithms(args.collective).empty();
    throw Error(known ? ErrorCode::unsupported : ErrorCode::unknown_algorithm, what + ": " + why);
  }
  t_.check_usable(what);
  const int me = t_.rank();
  const Extent x = extent(args, t_.size(), me);
  if (args.collective != Collective::all_to_allv && args.collective != Collective::barrier && x.in == 0 && x.out == 0)
    return;  // zero elements on every rank (counts must agree)

  // MPI forbids overlapping buffers other than MPI_IN_PLACE: snapshot the input.
  const void* send = args.send;
  if (in_place(args, me))
    send = MPI_IN_PLACE;
  else if (args.collective != Collective::broadcast && overlaps(args.send, x.in, args.recv, x.out)) {
    scratch_.assign(static_cast<const std::byte*>(args.send), static_cast<const std::byte*>(args.send) + x.in);
    send = scratch_.data();
  }
  if (args.collective == Collective::broadcast && me == args.root && args.send && args.send != args.recv)
    std::memmove(args.recv, args.send, x.out);

  if (t_.native_blocks()) {
    t_.watch().arm(to_string(args.collective), args.sequence, std::max(x.in, x.out),
                   args.timeout.count() > 0 ? args.timeout : t_.timeout());
    try {
      start(args, send, nullptr);
    } catch (...) {
      t_.watch().disarm();
      throw;
    }
    t_.watch().disarm();
  } else {
    MPI_Request req = MPI_REQUEST_NULL;
    start(args, send, &req);
    finish(args, &req);
  }
  if (args.op == ReduceOp::avg && reduces(args.collective) && (args.collective != Collective::reduce || me == args.root))
    kernels::finish_avg(args.recv, args.count, args.dtype, t_.size());
}

void MpiNative::start(const CollectiveArgs& a, const void* send, MPI_Request* req) {
  const MPI_Comm comm = t_.comm();
  const MPI_Datatype dt = datatype(a.dtype);
  const int count = static_cast<int>(a.count);
  const MPI_Op op = reduces(a.collective) ? reduce_op(a.dtype, a.op) : MPI_OP_NULL;
  void* recv = a.recv;
  int rc = MPI_SUCCESS;
  CallLock lock;
  switch (a.collective) {
    case Collective::allreduce:
      rc = req ? MPI_Iallreduce(send, recv, count, dt, op, comm, req) : MPI_Allreduce(send, recv, count, dt, op, comm);
      break;
    case Collective::reduce_scatter:
      rc = req ? MPI_Ireduce_scatter_block(send, recv, count, dt, op, comm, req)
               : MPI_Reduce_scatter_block(send, recv, count, dt, op, comm);
      break;
    case Collective::allgather:
      rc = req ? MPI_Iallgather(send, count, dt, recv, count, dt, comm, req)
               : MPI_Allgather(send, count, dt, recv, count, dt, comm);
      break;
    case Collective::broadcast:
      rc = req ? MPI_Ibcast(recv, count, dt, a.root, comm, req) : MPI_Bcast(recv, count, dt, a.root, comm);
      break;
    case Collective::reduce:
      rc = req ? MPI_Ireduce(send, recv, count, dt, op, a.root, comm, req)
               : MPI_Reduce(send, recv, count, dt, op, a.root, comm);
      break;
    case Collective::all_to_all:
      rc = req ? MPI_Ialltoall(send, count, dt, recv, count, dt, comm, req)
               : MPI_Alltoall(send, count, dt, recv, count, dt, comm);
      break;
    case Collective::all_to_allv: {
      const std::size_t n = static_cast<std::size_t>(t_.size());
      ints_.resize(4 * n);
      for (std::size_t j = 0; j < n; ++j) {
        ints_[j] = static_cast<int>(a.send_counts[j]);
        ints_[n + j] = static_cast<int>(a.send_displs[j]);
        ints_[2 * n + j] = static_cast<int>(a.recv_counts[j]);
        ints_[3 * n + j] = static_cast<int>(a.recv_displs[j]);
      }
      // Empty buffers still take part; MPI wants valid (if unused) pointers.
      static std::byte empty[1];
      const void* s = send ? send : empty;
      void* r = recv ? recv : empty;
      rc = req ? MPI_Ialltoallv(s, &ints_[0], &ints_[n], dt, r, &ints_[2 * n], &ints_[3 * n], dt, comm, req)
               : MPI_Alltoallv(s, &ints_[0], &ints_[n], dt, r, &ints_[2 * n], &ints_[3 * n], dt, comm);
      break;
    }
    case Collective::barrier: rc = req ? MPI_Ibarrier(comm, req) : MPI_Barrier(comm); break;
    case Collective::send:
    case Collective::recv:
      throw Error(ErrorCode::internal, "mpi native: " + std::string(to_string(a.collective)) +
                                           " passed supports() but has no MPI collective");
  }
  if (rc != MPI_SUCCESS) {
    const std::string msg = "mpi native " + std::string(to_string(a.collective)) + " #" +
                            std::to_string(a.sequence) + " on rank " + std::to_string(t_.rank()) + ": " +
                            error_string(rc);
    t_.mark_failed(msg);
    throw Error(ErrorCode::transport_failure, msg);
  }
}

void MpiNative::finish(const CollectiveArgs& a, MPI_Request* req) {
  const auto timeout = a.timeout.count() > 0 ? a.timeout : t_.timeout();
  const std::string what = "mpi native " + std::string(to_string(a.collective)) + " #" + std::to_string(a.sequence);
  bool done = false;
  try {
    done = test_until(*req, Clock::now() + timeout, what);
  } catch (const Error& e) {
    t_.mark_failed(e.what());
    throw;
  }
  if (done) return;
  // A started collective cannot be cancelled: MPI keeps the buffers (and our
  // scratch, which is therefore abandoned) until the job ends.
  abandon_scratch();
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", std::chrono::duration<double>(timeout).count());
  const std::string msg = what + " did not complete within " + secs + " s on rank " + std::to_string(t_.rank()) +
                          " (MPI does not say which rank has not joined; a comm algorithm such as 'ring' over "
                          "the same transport names it). MPI may still write the output buffer until the job ends";
  t_.mark_failed(msg);
  throw Error(ErrorCode::timeout, msg);
}

}  // namespace comm::mpi_detail
