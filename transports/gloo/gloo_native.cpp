// Gloo's own collectives offered as algorithms: `native` (Gloo's ring-based
// options API for every collective it has) and `native_bcube` (all-reduce).

#include "gloo_transport.hpp"

#include "engine/reduce_kernels.hpp"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/reduce.h>

#include <algorithm>
#include <cstring>

namespace comm::gloo_detail {
namespace {

// Gloo's own collectives on one context run one at a time in the same order
// on every rank, so a constant tag keeps their slots matched.
constexpr std::uint32_t kGlooTag = 0;

// Gloo sizes its segments in multiples of sizeof(T); any type of the element's
// size will do, because the reduction itself is ours.
template <std::size_t N>
struct Element {
  std::byte bytes[N];
};

template <class F>
void with_element_type(DataType t, F&& fn) {
  switch (dtype_size(t)) {
    case 1: fn(Element<1>{}); return;
    case 2: fn(Element<2>{}); return;
    case 4: fn(Element<4>{}); return;
    case 8: fn(Element<8>{}); return;
    default:
      throw Error(ErrorCode::internal, "gloo native: no element type of " + std::to_string(dtype_size(t)) + " B");
  }
}

// comm's kernels as Gloo's reduce function: every dtype (f16/bf16 widened to
// f32) and every op; avg combines as sum and is divided once at the end.
std::function<void(void*, const void*, const void*, std::size_t)> reduce_function(DataType dtype, ReduceOp op) {
  const ReduceOp combine = op == ReduceOp::avg ? ReduceOp::sum : op;
  return [dtype, combine](void* c, const void* a, const void* b, std::size_t n) {
    kernels::reduce(c, a, b, n, dtype, combine);
  };
}

bool packed(const std::size_t* counts, const std::size_t* displs, int n) {
  std::size_t offset = 0;
  for (int i = 0; i < n; ++i) {
    if (displs[i] != offset) return false;
    offset += counts[i];
  }
  return true;
}

std::vector<std::int64_t> byte_counts(const std::size_t* counts, int n, std::size_t esize) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(counts[i] * esize);
  return v;
}

template <class T>
T* mutable_ptr(const void* p) {
  // Gloo's option setters take T*; input buffers are only read.
  return static_cast<T*>(const_cast<void*>(p));
}

}  // namespace

std::vector<std::string> GlooNative::algorithms(Collective c) const {
  switch (c) {
    case Collective::allreduce: return {"native", "native_bcube"};
    case Collective::allgather:
    case Collective::broadcast:
    case Collective::reduce:
    case Collective::all_to_all:
    case Collective::all_to_allv:
    case Collective::barrier: return {"native"};
    // This Gloo (2022-05) has reduce_scatter only as a legacy class.
    case Collective::reduce_scatter:
    case Collective::send:
    case Collective::recv: return {};
  }
  return {};
}

bool GlooNative::supports(const CollectiveArgs& args, std::string_view algorithm, std::string* why) const {
  const auto names = algorithms(args.collective);
  if (std::find(names.begin(), names.end(), algorithm) == names.end())
    return refuse(why, "the gloo transport offers no '" + std::string(algorithm) + "' for " +
              std::string(to_string(args.collective)));
  if (args.memory != MemoryKind::host)
    return refuse(why, "Gloo's collectives run on host memory only, not " + std::string(to_string(args.memory)));
  if (args.collective == Collective::all_to_allv) {
    if (!args.send_counts || !args.send_displs || !args.recv_counts || !args.recv_displs)
      return refuse(why, "all_to_allv needs counts and displacements");
    const int n = t_.size();
    if (!packed(args.send_counts, args.send_displs, n) || !packed(args.recv_counts, args.recv_displs, n))
      return refuse(why, "Gloo's alltoallv needs the blocks packed in rank order (displacement j = sum of the counts "
                "before j); use the algorithm 'pairwise' for other layouts");
  }
  return true;
}

double GlooNative::predict_us(Collective, std::string_view, std::size_t) const {
  // No model validated against measurements: used only when asked for by name.
  return -1.0;
}

void GlooNative::run(const CollectiveArgs& args, std::string_view algorithm) {
  const std::string what = "gloo native " + std::string(to_string(args.collective)) + " (" +
                           std::string(algorithm) + ")";
  std::string why;
  if (!supports(args, algorithm, &why)) {
    const auto names = algorithms(args.collective);
    const bool known = std::find(names.begin(), names.end(), algorithm) != names.end();
    throw Error(known ? ErrorCode::unsupported : ErrorCode::unknown_algorithm, what + ": " + why);
  }
  t_.check_usable(what);
  if (t_.size() == 1) return run_single_rank(args);
  const SigpipeBlock no_sigpipe;
  try {
    run_gloo(args, algorithm == "native_bcube");
  } catch (...) {
    Error e = translate_current_exception(what);
    // An interrupted Gloo collective leaves operations registered on its
    // pairs (and a timeout has closed them all): the context is done for.
    t_.mark_failed(e.what());
    throw e;
  }
}

void GlooNative::run_gloo(const CollectiveArgs& args, bool bcube) {
  const auto& ctx = t_.context();
  const auto timeout = args.timeout.count() > 0 ? args.timeout : t_.timeout();
  const std::size_t esize = dtype_size(args.dtype);
  const int n = t_.size();
  const int me = t_.rank();
  const std::size_t bytes = args.count * esize;

  switch (args.collective) {
    case Collective::allreduce: {
      if (args.count == 0) return;
      with_element_type(args.dtype, [&](auto e) {
        using E = decltype(e);
        gloo::AllreduceOptions o(ctx);
        o.setAlgorithm(bcube ? gloo::AllreduceOptions::Algorithm::BCUBE : gloo::AllreduceOptions::Algorithm::RING);
        if (args.send != args.recv) o.setInput<E>(mutable_ptr<E>(args.send), args.count);
        o.setOutput<E>(static_cast<E*>(args.recv), args.count);
        o.setReduceFunction(reduce_function(args.dtype, args.op));
        o.setTag(kGlooTag);
        o.setTimeout(timeout);
        gloo::allreduce(o);
      });
      if (args.op == ReduceOp::avg) kernels::finish_avg(args.recv, args.count, args.dtype, n);
      return;
    }
    case Collective::reduce: {
      if (args.count == 0) return;
      // Gloo's ring reduce uses a full-size output on every rank as scratch.
      void* out = args.recv;
      if (me != args.root) {
        scratch_.resize(bytes);
        out = scratch_.data();
      }
      with_element_type(args.dtype, [&](auto e) {
        using E = decltype(e);
        gloo::ReduceOptions o(ctx);
        o.setRoot(args.root);
        if (args.send != out) o.setInput<E>(mutable_ptr<E>(args.send), args.count);
        o.setOutput<E>(static_cast<E*>(out), args.count);
        o.setReduceFunction(reduce_function(args.dtype, args.op));
        o.setTag(kGlooTag);
        o.setTimeout(timeout);
        gloo::reduce(o);
      });
      if (args.op == ReduceOp::avg && me == args.root) kernels::finish_avg(args.recv, args.count, args.dtype, n);
      return;
    }
    case Collective::allgather: {
      if (bytes == 0) return;
      auto* out = static_cast<std::uint8_t*>(args.recv);
      gloo::AllgatherOptions o(ctx);
      // Gloo's in-place form: this rank's block already sits in the output.
      if (args.send != out + static_cast<std::size_t>(me) * bytes)
        o.setInput<std::uint8_t>(mutable_ptr<std::uint8_t>(args.send), bytes);
      o.setOutput<std::uint8_t>(out, bytes * static_cast<std::size_t>(n));
      o.setTag(kGlooTag);
      o.setTimeout(timeout);
      gloo::allgather(o);
      return;
    }
    case Collective::broadcast: {
      if (bytes == 0) return;
      gloo::BroadcastOptions o(ctx);
      o.setRoot(args.root);
      if (me == args.root && args.send && args.send != args.recv)
        o.setInput<std::uint8_t>(mutable_ptr<std::uint8_t>(args.send), bytes);
      o.setOutput<std::uint8_t>(static_cast<std::uint8_t*>(args.recv), bytes);
      o.setTag(kGlooTag);
      o.setTimeout(timeout);
      gloo::broadcast(o);
      return;
    }
    case Collective::all_to_all: {
      // CollectiveArgs::count is one block here.
      const std::size_t total = bytes * static_cast<std::size_t>(n);
      if (total == 0) return;
      const void* in = args.send;
      if (in == args.recv) {
        scratch_.resize(total);
        std::memcpy(scratch_.data(), in, total);
        in = scratch_.data();
      }
      gloo::AlltoallOptions o(ctx);
      o.setInput<std::uint8_t>(mutable_ptr<std::uint8_t>(in), total);
      o.setOutput<std::uint8_t>(static_cast<std::uint8_t*>(args.recv), total);
      o.setTag(kGlooTag);
      o.setTimeout(timeout);
      gloo::alltoall(o);
      return;
    }
    case Collective::all_to_allv: {
      auto sent = byte_counts(args.send_counts, n, esize);
      auto received = byte_counts(args.recv_counts, n, esize);
      std::size_t in_total = 0;
      for (auto b : sent) in_total += static_cast<std::size_t>(b);
      // Empty buffers still take part: peers expect our (empty) messages.
      static std::uint8_t empty[1];
      const void* in = in_total ? args.send : empty;
      if (in_total && in == args.recv) {
        scratch_.resize(in_total);
        std::memcpy(scratch_.data(), in, in_total);
        in = scratch_.data();
      }
      void* out = args.recv ? args.recv : empty;
      gloo::AlltoallvOptions o(ctx);
      o.setInput<std::uint8_t>(mutable_ptr<std::uint8_t>(in), std::move(sent));
      o.setOutput<std::uint8_t>(static_cast<std::uint8_t*>(out), std::move(received));
      o.setTag(kGlooTag);
      o.setTimeout(timeout);
      gloo::alltoallv(o);
      return;
    }
    case Collective::barrier: {
      gloo::BarrierOptions o(ctx);
      o.setTag(kGlooTag);
      o.setTimeout(timeout);
      gloo::barrier(o);
      return;
    }
    case Collective::reduce_scatter:
    case Collective::send:
    case Collective::recv:
      break;
  }
  throw Error(ErrorCode::internal, "gloo native: " + std::string(to_string(args.collective)) +
                                       " passed supports() but has no Gloo call");
}

void GlooNative::run_single_rank(const CollectiveArgs& args) {
  // Gloo's collectives look up the pair to a neighbour, which does not exist
  // in a group of one; each collective is a copy (or nothing) there.
  auto copy = [](void* dst, const void* src, std::size_t n) {
    if (n && dst != src) std::memmove(dst, src, n);
  };
  const std::size_t esize = dtype_size(args.dtype);
  switch (args.collective) {
    case Collective::allreduce:
    case Collective::reduce:
    case Collective::allgather:
    case Collective::all_to_all:
      copy(args.recv, args.send, args.count * esize);
      return;
    case Collective::broadcast:
      if (args.send) copy(args.recv, args.send, args.count * esize);
      return;
    case Collective::all_to_allv:
      if (args.send_counts[0] != args.recv_counts[0])
        throw Error(ErrorCode::mismatch, "gloo native all_to_allv: rank 0 sends itself " +
                                             std::to_string(args.send_counts[0]) + " elements but expects " +
                                             std::to_string(args.recv_counts[0]));
      copy(static_cast<std::byte*>(args.recv) + args.recv_displs[0] * esize,
           static_cast<const std::byte*>(args.send) + args.send_displs[0] * esize, args.send_counts[0] * esize);
      return;
    case Collective::barrier:
      return;
    case Collective::reduce_scatter:
    case Collective::send:
    case Collective::recv:
      break;
  }
  throw Error(ErrorCode::internal, "gloo native: " + std::string(to_string(args.collective)) +
                                       " passed supports() but has no single-rank form");
}

}  // namespace comm::gloo_detail
