// Discrete-event simulation of the schedules of all ranks (see cost_model.hpp).
//
// Semantics, chosen to match host transports that send eagerly:
//  - a step becomes ready when all its dependencies have finished;
//  - a send starts when it is ready and both the sender's send port and the
//    receiver's receive port are free, whether or not the receive is posted
//    yet (eager; a rendezvous model would only delay transfers whose
//    receive is posted late, which our schedules avoid by posting receives
//    early). The data arrives alpha + bytes/beta after the start, and the
//    send step finishes after bytes/beta (its buffer is free again);
//  - a message holds both ports for step_overhead_us + bytes/beta: the
//    per-message cost of posting and matching (LogP's gap) limits the message
//    rate of a port, so n-1 tiny messages from one rank are not free, yet an
//    isolated message still costs exactly alpha + bytes/beta;
//  - a receive finishes at max(ready, arrival);
//  - a message larger than the link's rndv_threshold_bytes arrives (and
//    frees its send buffer) rndv_extra_us later: the handshake of a
//    rendezvous protocol, which is latency, not port occupancy;
//  - reduce and copy steps run one at a time on the rank's compute unit, for
//    step_overhead_us + bytes / rate; zero-element local steps are free;
//  - on a link whose receiver copies the data (shared memory), the transfer
//    also holds the receiver's compute unit: it waits for the receiver's
//    reduce/copy steps and they wait for it;
//  - a collective whose data exceeds compute.cache_bytes uses the large-data
//    bandwidths and rates (memory-bound, not cache-bound);
//  - the whole operation costs op_overhead_us more (call set-up and wait).
// Ports are granted in order of readiness (ties: round-robin over the ranks,
// each rank's earlier steps first), which makes the prediction deterministic.

#include "select/cost_model.hpp"

#include <comm/error.hpp>

#include <algorithm>
#include <cstdint>
#include <queue>
#include <string>
#include <vector>

namespace comm {
namespace {

struct Ready {
  double t;
  std::uint32_t local;  // the step's index within its rank's schedule
  std::uint32_t step;   // global step index; ranks' steps are numbered consecutively
  // Ties go round-robin over the ranks (each rank's first ready step, then
  // each one's second, ...): taking one rank's whole queue first would book
  // every receiver's port ahead for it (a direct exchange would then
  // serialise into n-1 rounds per rank instead of n-1 permutations).
  bool operator>(const Ready& o) const {
    if (t != o.t) return t > o.t;
    return local != o.local ? local > o.local : step > o.step;
  }
};

// Microseconds to move `bytes` at `gbps` GB/s (1e9 B/s = 1e3 B/us).
double transfer_us(double bytes, double gbps) { return bytes / (std::max(gbps, 1e-12) * 1e3); }

// Network links (a NIC: tcp, ib) have ports of their own beside those of the
// links inside a host (shared memory, PCIe, NVLink): a GPU's NIC and its
// NVLinks, or a socket and a shared-memory copy, move data at the same time.
std::size_t port_class(LinkKind k) {
  switch (k) {
    case LinkKind::tcp:
    case LinkKind::ib: return 1;
    case LinkKind::self:
    case LinkKind::shm:
    case LinkKind::pcie:
    case LinkKind::nvlink:
    case LinkKind::nvswitch: return 0;
  }
  return 0;
}

// (receiver, sender, tag) in one integer: 20 bits per rank, 24 for the tag
// (schedule tags are < 2^kScheduleTagBits <= 2^24); groups are far smaller than 2^20 ranks.
static_assert(kScheduleTagBits <= 24);
std::uint64_t match_key(int receiver, int sender, std::uint32_t tag) {
  return (static_cast<std::uint64_t>(receiver) << 44) | (static_cast<std::uint64_t>(sender) << 24) | tag;
}

}  // namespace

double predict_us(const algo::Algorithm& algorithm, const algo::AlgoArgs& args, const LinkMatrix& links,
                  const ComputeParams& compute) {
  const int n = args.nranks;
  const std::string what = "cost model for " + std::string(to_string(algorithm.collective)) + " '" +
                           std::string(algorithm.name) + "' on " + std::to_string(n) + " ranks";
  if (n < 1 || links.n != n || links.links.size() != static_cast<std::size_t>(n) * n)
    throw Error(ErrorCode::invalid_argument, what + ": the link matrix is for " + std::to_string(links.n) +
                                                 " ranks; pass an n x n matrix for the group");
  std::vector<Schedule> sched(static_cast<std::size_t>(n));
  std::vector<std::uint32_t> base(static_cast<std::size_t>(n) + 1, 0);
  for (int r = 0; r < n; ++r) {
    algo::AlgoArgs a = args;
    a.rank = r;
    ScheduleBuilder b;
    algorithm.build(a, b);
    sched[static_cast<std::size_t>(r)] = std::move(b).finish();
    base[static_cast<std::size_t>(r) + 1] =
        base[static_cast<std::size_t>(r)] + static_cast<std::uint32_t>(sched[static_cast<std::size_t>(r)].steps.size());
  }
  const std::size_t total = base.back();
  if (total == 0) return 0.0;
  // Data past the cache streams from memory: slower links and compute (see ComputeModel::cache_bytes).
  const bool large = compute.cache_bytes > 0 && args.count * args.elem_size > compute.cache_bytes;
  const auto pick = [large](double normal, double big) { return large && big > 0 ? big : normal; };
  const double reduce_gbps = pick(compute.reduce_gbps, compute.reduce_large_gbps);
  const double copy_gbps = pick(compute.copy_gbps, compute.copy_large_gbps);

  std::vector<int> owner(total);
  std::vector<std::uint32_t> missing(total);
  std::vector<double> ready_at(total, 0.0);
  std::vector<double> arrival(total, -1.0);  // recv: when its message arrived (-1: not yet)
  std::vector<double> posted(total, -1.0);   // recv: when it became ready (-1: not yet)
  // Receives sorted by (receiver, sender, tag), found by binary search: cheaper
  // than a hash map for the ~1e5 steps of a deep pipeline.
  struct RecvKey {
    std::uint64_t key;  // match_key(receiver, sender, tag)
    std::uint32_t step;
    bool operator<(const RecvKey& o) const { return key < o.key; }
  };
  std::vector<RecvKey> recvs;
  std::priority_queue<Ready, std::vector<Ready>, std::greater<>> queue;
  for (int r = 0; r < n; ++r) {
    const Schedule& s = sched[static_cast<std::size_t>(r)];
    for (std::size_t i = 0; i < s.steps.size(); ++i) {
      const std::uint32_t g = base[static_cast<std::size_t>(r)] + static_cast<std::uint32_t>(i);
      owner[g] = r;
      missing[g] = s.steps[i].num_deps;
      if (missing[g] == 0) queue.push({0.0, static_cast<std::uint32_t>(i), g});
      const Step& st = s.steps[i];
      if ((st.kind == StepKind::send || st.kind == StepKind::recv) && (st.peer < 0 || st.peer >= n))
        throw Error(ErrorCode::internal, what + ": rank " + std::to_string(r) + " step " + std::to_string(i) +
                                             " names peer " + std::to_string(st.peer) + ", outside the group");
      if (st.kind == StepKind::recv) recvs.push_back({match_key(r, st.peer, st.tag), g});
    }
  }
  std::sort(recvs.begin(), recvs.end());
  for (std::size_t i = 1; i < recvs.size(); ++i)
    if (recvs[i].key == recvs[i - 1].key) {
      const std::uint64_t k = recvs[i].key;
      throw Error(ErrorCode::internal, what + ": rank " + std::to_string(k >> 44) + " posts two receives from rank " +
                                           std::to_string((k >> 24) & 0xfffff) + " with tag " +
                                           std::to_string(k & 0xffffff));
    }
  std::vector<bool> matched(recvs.size(), false);

  // Ports per rank and port class (port_class): a NIC moves data beside NVLink or shared memory.
  std::vector<double> send_free(2 * static_cast<std::size_t>(n), 0.0);
  std::vector<double> recv_free(2 * static_cast<std::size_t>(n), 0.0);
  std::vector<double> cpu_free(static_cast<std::size_t>(n), 0.0);
  std::size_t finished = 0;
  double end = 0.0;
  auto finish = [&](std::uint32_t g, double t) {
    ++finished;
    end = std::max(end, t);
    const int r = owner[g];
    const Schedule& s = sched[static_cast<std::size_t>(r)];
    for (StepId d : s.dependents_of(g - base[static_cast<std::size_t>(r)])) {
      const std::uint32_t dg = base[static_cast<std::size_t>(r)] + d;
      ready_at[dg] = std::max(ready_at[dg], t);
      if (--missing[dg] == 0) queue.push({ready_at[dg], d, dg});
    }
  };

  while (!queue.empty()) {
    const Ready e = queue.top();
    queue.pop();
    const int r = owner[e.step];
    const auto ru = static_cast<std::size_t>(r);
    const Step& st = sched[ru].steps[e.step - base[ru]];
    switch (st.kind) {
      case StepKind::reduce:
      case StepKind::copy: {
        if (st.dst.count == 0) {
          finish(e.step, e.t);
          break;
        }
        const double bytes = static_cast<double>(st.dst.count * args.elem_size);
        const double rate = st.kind == StepKind::reduce ? reduce_gbps : copy_gbps;
        const double start = std::max(e.t, cpu_free[ru]);
        cpu_free[ru] = start + compute.step_overhead_us + transfer_us(bytes, rate);
        finish(e.step, cpu_free[ru]);
        break;
      }
      case StepKind::send: {
        const int peer = st.peer;
        const auto pu = static_cast<std::size_t>(peer);
        const LinkInfo& link = links.at(r, peer);
        const std::size_t bytes = st.src.count * args.elem_size;
        const double xfer = transfer_us(static_cast<double>(bytes), pick(link.beta_gbps, link.beta_large_gbps));
        // A rendezvous handshake delays the data, not the ports: a rank keeps
        // posting other messages meanwhile.
        const double handshake = bytes > link.rndv_threshold_bytes ? link.rndv_extra_us : 0.0;
        // A receiver that copies the data itself cannot reduce meanwhile.
        const std::size_t sp = 2 * ru + port_class(link.kind), rp = 2 * pu + port_class(link.kind);
        const double start = std::max({e.t, send_free[sp], recv_free[rp], link.receiver_copies ? cpu_free[pu] : 0.0});
        send_free[sp] = recv_free[rp] = start + compute.step_overhead_us + xfer;
        if (link.receiver_copies) cpu_free[pu] = start + handshake + xfer;
        const double arrive = start + link.alpha_us + handshake + xfer;
        const auto it = std::lower_bound(recvs.begin(), recvs.end(), RecvKey{match_key(peer, r, st.tag), 0});
        const auto idx = static_cast<std::size_t>(it - recvs.begin());
        if (it == recvs.end() || it->key != match_key(peer, r, st.tag) || matched[idx])
          throw Error(ErrorCode::internal, what + ": rank " + std::to_string(r) + " sends tag " +
                                               std::to_string(st.tag) + " to rank " + std::to_string(peer) +
                                               ", which posts no matching receive");
        matched[idx] = true;
        const std::uint32_t rg = it->step;
        finish(e.step, start + handshake + xfer);
        if (posted[rg] >= 0)
          finish(rg, std::max(posted[rg], arrive));
        else
          arrival[rg] = arrive;
        break;
      }
      case StepKind::recv:
        if (arrival[e.step] >= 0)
          finish(e.step, std::max(e.t, arrival[e.step]));
        else
          posted[e.step] = e.t;
        break;
    }
  }
  if (finished != total)
    throw Error(ErrorCode::internal, what + ": the schedules deadlock (" + std::to_string(total - finished) +
                                         " of " + std::to_string(total) +
                                         " steps never ran: a receive without a matching send, or a cycle)");
  return compute.op_overhead_us + end;
}

ComputeParams default_compute(const TransportCaps& caps) {
  ComputeParams compute{};
  if (caps.cuda_memory && !caps.host_memory) {
    compute.reduce_gbps = 1000;
    compute.copy_gbps = 1000;
    compute.step_overhead_us = 4;
  }
  return compute;
}

}  // namespace comm
