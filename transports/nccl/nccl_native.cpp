// NCCL's own collectives, offered to the selector as the algorithm "native".

#include "nccl_transport.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

namespace comm::nccl {

namespace {

constexpr std::string_view kNative = "native";

// ncclAvg (and bf16) arrived in NCCL 2.10. On floating types NCCL pre-scales
// each input by 1/n before summing (rounding may differ from sum-then-divide
// in the last bit); on integers it sums and then divides, truncating toward
// zero, exactly as comm defines avg.
constexpr int kAvgVersion = 21000;

ncclRedOp_t to_nccl(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::prod: return ncclProd;
    case ReduceOp::min: return ncclMin;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::avg: return ncclAvg;
  }
  return ncclSum;
}

bool reduces(Collective c) {
  return c == Collective::allreduce || c == Collective::reduce_scatter || c == Collective::reduce;
}

// NCCL's hardware latency per hop (src/graph/tuning.cc, hwLat, Ring) for the
// LL and Simple protocols, by the class of the slowest link.
struct HopLatency {
  double ll, simple, tree_ll, tree_simple;
};
HopLatency hop_latency(LinkKind k) {
  switch (k) {
    case LinkKind::self:
    case LinkKind::nvlink:
    case LinkKind::nvswitch: return {0.6, 3.4, 0.6, 4.0};
    case LinkKind::pcie:
    case LinkKind::shm: return {1.0, 5.7, 1.0, 4.0};
    case LinkKind::tcp:
    case LinkKind::ib: return {2.7, 14.0, 5.0, 14.0};
  }
  return {2.7, 14.0, 5.0, 14.0};
}
// NCCL's base latency per launch (tuning.cc, baseLat): Ring LL 6.6, Simple
// 8.4; Tree LL 6.8. LL moves 8 bytes of data per 16-byte line with flags,
// so it reaches about half of the link bandwidth.
constexpr double kBaseLl = 6.6, kBaseSimple = 8.4, kBaseTreeLl = 6.8, kLlEfficiency = 0.5;

std::string pointer_problem(const void* p) {
  const RelaxedCapture relaxed;  // a query, legal while the caller captures a graph
  cudaPointerAttributes attr{};
  const cudaError_t e = cudaPointerGetAttributes(&attr, p);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return std::string("cudaPointerGetAttributes failed: ") + cudaGetErrorString(e);
  }
  if (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged) return {};
  return attr.type == cudaMemoryTypeHost ? "it is pinned host memory" : "it is not CUDA memory";
}

void check_buffer(const void* p, std::size_t bytes, const char* what, Collective c) {
  if (bytes == 0) return;
  if (!p)
    throw Error(ErrorCode::invalid_argument, "nccl native " + std::string(to_string(c)) + ": " + what +
                                                 " buffer is null but holds " + std::to_string(bytes) + " bytes");
  if (const std::string why = pointer_problem(p); !why.empty())
    throw Error(ErrorCode::invalid_argument, "nccl native " + std::string(to_string(c)) + ": " + what +
                                                 " buffer is not CUDA device memory (" + why +
                                                 "); allocate it with cudaMalloc and pass MemoryKind::cuda");
}

bool overlaps(const void* a, std::size_t an, const void* b, std::size_t bn) {
  const auto* x = static_cast<const std::byte*>(a);
  const auto* y = static_cast<const std::byte*>(b);
  return an && bn && x < y + bn && y < x + an;
}

}  // namespace

std::vector<std::string> NcclNative::algorithms(Collective) const { return {std::string(kNative)}; }

bool NcclNative::supports(const CollectiveArgs& a, std::string_view algorithm, std::string* why) const {
  if (algorithm != kNative)
    return refuse(why, "the nccl transport has no native algorithm '" + std::string(algorithm) + "'");
  if (a.memory != MemoryKind::cuda && a.collective != Collective::barrier)  // a barrier moves its own token
    return refuse(why, "NCCL moves only CUDA device memory; pass buffers with MemoryKind::cuda");
  if (a.dtype == DataType::bf16 && t_.nccl_version() < kAvgVersion)
    return refuse(why, "bf16 needs NCCL 2.10 or newer (this is " + std::to_string(t_.nccl_version()) + ")");
  if (reduces(a.collective) && a.op == ReduceOp::avg && t_.nccl_version() < kAvgVersion)
    return refuse(why, "avg needs NCCL 2.10 or newer (ncclAvg); this is " + std::to_string(t_.nccl_version()));
  const bool rooted = a.collective == Collective::broadcast || a.collective == Collective::reduce ||
                      a.collective == Collective::send || a.collective == Collective::recv;
  if (rooted && (a.root < 0 || a.root >= t_.size()))
    return refuse(why, "root/peer " + std::to_string(a.root) + " is outside [0, " + std::to_string(t_.size()) + ")");
  if (a.collective == Collective::all_to_allv && (!a.send_counts || !a.send_displs || !a.recv_counts || !a.recv_displs))
    return refuse(why, "all_to_allv needs send/recv counts and displacements");
  return true;
}

double NcclNative::predict_us(Collective c, std::string_view algorithm, std::size_t bytes) const {
  if (algorithm != kNative) return -1.0;
  const int n = t_.size();
  const double s = static_cast<double>(bytes);
  // The slowest link of the group bounds NCCL's rings and trees. The matrix
  // is the same on every rank, so every rank predicts the same.
  LinkKind worst = LinkKind::self;
  double beta = std::numeric_limits<double>::infinity();
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      const LinkInfo& l = t_.link_between(a, b);
      if (l.beta_gbps < beta) {
        beta = l.beta_gbps;
        worst = l.kind;
      }
    }
  if (n == 1) {
    beta = t_.link_between(0, 0).beta_gbps;
    worst = LinkKind::self;
  }
  const double bytes_per_us = beta * 1e3;  // GB/s = 1e3 bytes per microsecond
  const HopLatency hop = hop_latency(worst);
  const double nm1 = n - 1;
  double steps = nm1, traffic = s * nm1 / n;
  switch (c) {
    case Collective::allreduce: steps = 2 * nm1; traffic = 2 * s * nm1 / n; break;
    case Collective::barrier: steps = 2 * nm1; traffic = 2.0 * nm1 / n; break;  // one-byte all-reduce
    case Collective::reduce_scatter:
    case Collective::allgather: break;
    case Collective::broadcast:
    case Collective::reduce: traffic = n > 1 ? s : 0; break;  // pipelined chain: every byte crosses each link once
    case Collective::all_to_all:
    case Collective::all_to_allv: steps = n > 1 ? 1 : 0; break;  // one group, all peers at once
    case Collective::send:
    case Collective::recv: steps = 1; traffic = s; break;
  }
  if (n == 1) {  // NCCL copies input to output (or nothing in place) in one launch
    steps = 0;
    traffic = s;
  }
  const double ll = kBaseLl + steps * hop.ll + traffic / (bytes_per_us * kLlEfficiency);
  const double simple = kBaseSimple + steps * hop.simple + traffic / bytes_per_us;
  double best = std::min(ll, simple);
  if ((c == Collective::allreduce || c == Collective::barrier) && n > 2) {
    // NCCL's tree: up and down a binary tree, each byte twice over a link.
    const double depth = std::ceil(std::log2(static_cast<double>(n)));
    const double tree_bytes = c == Collective::barrier ? 2.0 : 2 * s;
    best = std::min({best, kBaseTreeLl + 2 * depth * hop.tree_ll + tree_bytes / (bytes_per_us * kLlEfficiency),
                     kBaseSimple + 2 * depth * hop.tree_simple + tree_bytes / bytes_per_us});
  }
  return best;
}

namespace {

// Buffer extents of a call in bytes (send, receive), for the device-memory checks.
std::pair<std::size_t, std::size_t> buffer_extents(const CollectiveArgs& a, int rank, std::size_t nn) {
  const std::size_t es = dtype_size(a.dtype);
  std::size_t in_bytes = a.count * es, out_bytes = a.count * es;
  switch (a.collective) {
    case Collective::reduce_scatter: in_bytes *= nn; break;
    case Collective::allgather: out_bytes *= nn; break;
    case Collective::all_to_all: in_bytes *= nn; out_bytes *= nn; break;
    case Collective::all_to_allv:
      in_bytes = out_bytes = 0;
      for (std::size_t j = 0; j < nn; ++j) {
        in_bytes = std::max(in_bytes, (a.send_displs[j] + a.send_counts[j]) * es);
        out_bytes = std::max(out_bytes, (a.recv_displs[j] + a.recv_counts[j]) * es);
      }
      break;
    case Collective::send: out_bytes = 0; break;
    case Collective::recv: in_bytes = 0; break;
    case Collective::reduce: if (rank != a.root) out_bytes = 0; break;
    case Collective::barrier: in_bytes = out_bytes = 0; break;
    case Collective::allreduce:
    case Collective::broadcast: break;
  }
  if (a.collective == Collective::broadcast && rank != a.root) in_bytes = 0;
  return {in_bytes, out_bytes};
}

// all_to_all(v) as grouped sends and receives: one launch, every peer at
// once. Empty blocks are skipped on both sides alike (their counts agree).
// A group is always closed, even when a member was rejected, so that the
// communicator is not left inside an open group.
void all_to_all_grouped(NcclTransport::Call& call, const CollectiveArgs& a, int n, ncclDataType_t dt,
                        cudaStream_t stream) {
  const std::size_t es = dtype_size(a.dtype);
  const Collective c = a.collective;
  const ncclComm_t comm = call.comm();
  auto at = [es](const void* base, std::size_t elems) { return static_cast<const std::byte*>(base) + elems * es; };
  call.check(ncclGroupStart(), "ncclGroupStart");
  ncclResult_t first = ncclSuccess;
  for (int p = 0; p < n && first == ncclSuccess; ++p) {
    const auto j = static_cast<std::size_t>(p);
    const std::size_t sc = c == Collective::all_to_all ? a.count : a.send_counts[j];
    const std::size_t sd = c == Collective::all_to_all ? j * a.count : a.send_displs[j];
    const std::size_t rc = c == Collective::all_to_all ? a.count : a.recv_counts[j];
    const std::size_t rd = c == Collective::all_to_all ? j * a.count : a.recv_displs[j];
    if (sc) first = ncclSend(at(a.send, sd), sc, dt, p, comm, stream);
    if (rc && first == ncclSuccess) first = ncclRecv(const_cast<std::byte*>(at(a.recv, rd)), rc, dt, p, comm, stream);
  }
  const ncclResult_t end = ncclGroupEnd();
  if (first != ncclSuccess) call.check(first, "ncclSend/ncclRecv");
  call.check(end, "ncclGroupEnd");
}

}  // namespace

void NcclNative::run(const CollectiveArgs& a, std::string_view algorithm) {
  std::string why;
  if (!supports(a, algorithm, &why))
    throw Error(ErrorCode::unsupported, "nccl native " + std::string(to_string(a.collective)) + ": " + why);
  const int n = t_.size();
  const auto nn = static_cast<std::size_t>(n);
  const Collective c = a.collective;

  const auto [in_bytes, out_bytes] = buffer_extents(a, t_.rank(), nn);
  check_buffer(a.send, in_bytes, "send", c);
  check_buffer(a.recv, out_bytes, "receive", c);
  if ((c == Collective::all_to_all || c == Collective::all_to_allv) && overlaps(a.send, in_bytes, a.recv, out_bytes))
    throw Error(ErrorCode::unsupported, "nccl native " + std::string(to_string(c)) +
                                            ": send and receive buffers overlap; NCCL's all-to-all needs "
                                            "separate buffers (use another algorithm for in-place)");

  auto stream = static_cast<cudaStream_t>(a.stream);
  const ncclDataType_t dt = to_nccl(a.dtype);
  const ncclRedOp_t op = to_nccl(a.op);
  NcclTransport::Call call(t_, std::string(to_string(c)), a.sequence, a.timeout);
  const ncclComm_t comm = call.comm();
  switch (c) {
    case Collective::allreduce:
      call.check(ncclAllReduce(a.send, a.recv, a.count, dt, op, comm, stream), "ncclAllReduce");
      break;
    case Collective::reduce_scatter:
      call.check(ncclReduceScatter(a.send, a.recv, a.count, dt, op, comm, stream), "ncclReduceScatter");
      break;
    case Collective::allgather:
      call.check(ncclAllGather(a.send, a.recv, a.count, dt, comm, stream), "ncclAllGather");
      break;
    case Collective::broadcast:
      call.check(ncclBroadcast(a.send, a.recv, a.count, dt, a.root, comm, stream), "ncclBroadcast");
      break;
    case Collective::reduce:
      call.check(ncclReduce(a.send, a.recv, a.count, dt, op, a.root, comm, stream), "ncclReduce");
      break;
    case Collective::all_to_all:
    case Collective::all_to_allv:
      all_to_all_grouped(call, a, n, dt, stream);
      break;
    case Collective::send:
      if (a.count) call.check(ncclSend(a.send, a.count, dt, a.root, comm, stream), "ncclSend");
      break;
    case Collective::recv:
      if (a.count) call.check(ncclRecv(a.recv, a.count, dt, a.root, comm, stream), "ncclRecv");
      break;
    case Collective::barrier:
      // A one-byte all-reduce on a device word: stream-ordered, so it orders
      // the ranks' streams, not their host threads.
      call.check(ncclAllReduce(t_.token(), t_.token(), 1, ncclUint8, ncclSum, comm, stream), "ncclAllReduce");
      break;
  }
  call.track(stream);
}

}  // namespace comm::nccl
