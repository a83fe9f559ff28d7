// Simulation of direct-memory programs (see direct_model.hpp).

#include "select/direct_model.hpp"

#include <comm/error.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace comm {
namespace {

double us(double bytes, double gbps) { return bytes / (std::max(gbps, 1e-9) * 1e3); }

struct Rates {
  double copy, reduce, read, peer;
  double local_reduce;  // a reduction of this rank's own memory only: the machine's kernel rate
};

Rates rates_for(const direct::DirectArgs& a, const DirectCosts& c, const ComputeParams& m) {
  const std::size_t data = a.count * a.elem_size * (a.collective == Collective::allreduce ||
                                                            a.collective == Collective::broadcast ||
                                                            a.collective == Collective::reduce
                                                        ? 1
                                                        : static_cast<std::size_t>(a.nranks));
  // The memory's own figures are what it can do at best; the calibrated
  // compute rates (measured at creation, or the tuning file) are what this
  // machine does now: the slower one counts.
  const auto measured = [](double own, double calibrated) { return calibrated > 0 ? std::min(own, calibrated) : own; };
  Rates r{measured(c.copy_gbps, m.copy_gbps), measured(c.reduce_gbps, m.reduce_gbps),
          measured(c.read_gbps, m.copy_gbps), c.peer_read_gbps, m.reduce_gbps > 0 ? m.reduce_gbps : c.reduce_gbps};
  if (m.cache_bytes > 0 && data > m.cache_bytes) {
    // Streaming from memory: every rank draws on the same memory bandwidth.
    const double share = 2.0 / std::max(2, a.nranks);
    r.copy = (m.copy_large_gbps > 0 ? m.copy_large_gbps : m.copy_gbps) * share;
    r.reduce = (m.reduce_large_gbps > 0 ? m.reduce_large_gbps : m.reduce_gbps) * share;
    r.read = std::min(r.read, r.copy);
    r.peer = std::min(r.peer, r.copy);
    r.local_reduce = r.reduce;
  }
  return r;
}

double op_cost(const DirectProgram& p, const DirectOp& op, int rank, const Rates& r, const DirectCosts& c) {
  double remote = 0;
  for (std::uint32_t s = 0; s < op.num_srcs; ++s) {
    const DirectRef& src = p.srcs[op.first_src + s];
    if (src.space == DirectSpace::window && src.rank != rank) remote += static_cast<double>(op.bytes);
  }
  const auto bytes = static_cast<double>(op.bytes);
  if (op.kind == DirectOpKind::copy && is_peer_buffer(p.srcs[op.first_src].space))
    return c.step_us + c.peer_read_us + us(bytes, r.peer);
  if (op.kind == DirectOpKind::copy) return c.step_us + (remote > 0 ? us(bytes, r.read) : us(bytes, r.copy));
  // The memory's reduce rate is what a fold of other ranks' windows achieves (it
  // draws lines from their caches); one of this rank's own memory runs at the kernel's.
  const double fold = remote > 0 ? r.reduce : r.local_reduce;
  const double compute = us(bytes * (op.num_srcs - 1), fold) + (op.has_dst2 ? us(bytes, r.copy) : 0.0);
  return c.step_us + std::max(compute, us(remote, r.read));
}

}  // namespace

DirectCosts direct_costs(const DirectMemoryInfo& info) {
  DirectCosts c;
  c.flag_latency_us = info.flag_latency_us;
  c.read_gbps = info.read_gbps;
  c.copy_gbps = info.copy_gbps;
  c.reduce_gbps = info.reduce_gbps;
  c.peer_read_us = info.peer_read_us;
  c.peer_read_gbps = info.peer_read_gbps;
  return c;
}

double predict_direct_us(const direct::DirectAlgorithm& algorithm, const direct::DirectArgs& args,
                         const DirectCosts& costs, const ComputeParams& compute) {
  if (algorithm.eligible && !algorithm.eligible(args)) return -1.0;
  const int n = args.nranks;
  std::vector<DirectProgram> progs;
  progs.reserve(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    direct::DirectArgs a = args;
    a.rank = r;
    direct::ProgramBuilder b(r, n);
    algorithm.build(a, b);
    progs.push_back(std::move(b).finish());
  }
  const Rates rates = rates_for(args, costs, compute);
  std::vector<std::size_t> pc(static_cast<std::size_t>(n), 0);
  std::vector<double> t(static_cast<std::size_t>(n), 0.0);
  std::vector<std::vector<double>> signalled(static_cast<std::size_t>(n));  // [rank][step-1] -> time
  for (bool moved = true; moved;) {
    moved = false;
    for (int r = 0; r < n; ++r) {
      const auto ru = static_cast<std::size_t>(r);
      const DirectProgram& p = progs[ru];
      for (; pc[ru] < p.ops.size(); ++pc[ru], moved = true) {
        const DirectOp& op = p.ops[pc[ru]];
        if (op.kind == DirectOpKind::wait) {
          const auto& theirs = signalled[static_cast<std::size_t>(op.rank)];
          if (theirs.size() < op.step) break;
          t[ru] = std::max(t[ru], theirs[op.step - 1] + costs.flag_latency_us);
        } else if (op.kind == DirectOpKind::signal) {
          t[ru] += costs.step_us;
          signalled[ru].push_back(t[ru]);
        } else {
          t[ru] += op_cost(p, op, r, rates, costs);
        }
      }
    }
  }
  for (int r = 0; r < n; ++r)
    if (pc[static_cast<std::size_t>(r)] < progs[static_cast<std::size_t>(r)].ops.size())
      throw Error(ErrorCode::internal, "cost model: direct-memory algorithm '" + std::string(algorithm.name) +
                                           "' deadlocks on " + std::to_string(n) + " ranks (rank " +
                                           std::to_string(r) + " waits forever)");
  return costs.op_overhead_us + *std::max_element(t.begin(), t.end());
}

}  // namespace comm
