// comm-mh-check: what the hierarchy promises on real (emulated) hosts. Run it
// under tools/multihost.sh, one rank per process:
//   1. every hierarchical algorithm gives the same bits as the flat ones on
//      exact data (integers in floats: any reduction order is exact);
//   2. the byte counters: how much each rank sent to other hosts in one
//      all-reduce of S bytes, flat ring against the hierarchical ones; on even
//      hosts (H hosts of L ranks) the split rail must stay within
//      2 (H-1) / (H L) S + 64 B per rank, which is S (H-1)/H on 2 x 2, and the
//      flat ring must send 2 (n-1)/n S across on the ranks at host boundaries.
// Exit status: 0 when every check passed, 1 otherwise, 77 without the transport.

#include "suite_values.hpp"

#include <comm/comm.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace {

using comm::Collective;
using comm::DataType;
using comm::ReduceOp;

int failures = 0;

void fail(int rank, const std::string& what) {
  ++failures;
  std::printf("FAIL rank %d: %s\n", rank, what.c_str());
}

// Runs `coll` under `algo` on suite data; returns this rank's result bytes.
std::vector<unsigned char> run(comm::Communicator& c, Collective coll, const std::string& algo, DataType t,
                               std::size_t count) {
  const auto n = static_cast<std::size_t>(c.size());
  comm::CallOptions o;
  o.algorithm = algo;
  const std::size_t in_n = coll == Collective::reduce_scatter ? count * n : count;
  const std::size_t out_n = coll == Collective::allgather ? count * n : count;
  suite::Buffer in(t, in_n), out(t, out_n);
  for (std::size_t i = 0; i < in_n; ++i) in.set(i, suite::input_value(c.rank(), i, t, ReduceOp::sum));
  const comm::ConstView vin{in.data(), in_n, t};
  const comm::View vout{out.data(), out_n, t};
  switch (coll) {
    case Collective::allreduce: c.allreduce(vin, vout, ReduceOp::sum, o); break;
    case Collective::reduce_scatter: c.reduce_scatter(vin, vout, ReduceOp::sum, o); break;
    case Collective::allgather: c.allgather(vin, vout, o); break;
    case Collective::broadcast:
      c.broadcast(comm::View{in.data(), count, t}, c.size() - 1, o);
      out = in;
      break;
    case Collective::reduce: c.reduce(vin, vout, ReduceOp::sum, c.size() - 1, o); break;
    case Collective::all_to_all:
    case Collective::all_to_allv:
    case Collective::barrier:
    case Collective::send:
    case Collective::recv: break;
  }
  const auto* p = static_cast<const unsigned char*>(out.data());
  return {p, p + out_n * comm::dtype_size(t)};
}

void check_bits(comm::Communicator& c) {
  const Collective colls[] = {Collective::allreduce, Collective::reduce_scatter, Collective::allgather,
                              Collective::broadcast, Collective::reduce};
  int compared = 0;
  for (Collective coll : colls) {
    const std::string flat = coll == Collective::broadcast || coll == Collective::reduce ? "tree" : "ring";
    for (DataType t : {DataType::f32, DataType::bf16})
      for (std::size_t count : {std::size_t{1}, std::size_t{4097}, std::size_t{100003}}) {
        const auto want = run(c, coll, flat, t, count);
        for (const std::string& algo : c.algorithms(coll)) {
          if (algo.find("hierarchical") == std::string::npos) continue;
          ++compared;
          if (run(c, coll, algo, t, count) != want)
            fail(c.rank(), std::string(comm::to_string(coll)) + "/" + algo + " " + std::string(comm::to_string(t)) +
                               " n=" + std::to_string(count) + ": bits differ from " + flat);
        }
      }
  }
  if (c.rank() == 0) std::printf("bits: %d hierarchical results compared with the flat algorithms'\n", compared);
}

// This rank's bytes to other hosts during one all-reduce of `bytes` under `algo`.
double cross_host_bytes(comm::Communicator& c, const std::string& algo, std::size_t bytes) {
  std::vector<float> x(bytes / sizeof(float), 1.0f), y(x.size());
  comm::CallOptions o;
  o.algorithm = algo;
  c.barrier();
  const auto before = c.bytes_sent();
  c.allreduce(comm::view(x), comm::view(y), ReduceOp::sum, o);
  const auto after = c.bytes_sent();
  if (y.front() != static_cast<float>(c.size()) || y.back() != static_cast<float>(c.size()))
    fail(c.rank(), algo + ": wrong sum");
  double cross = 0;
  for (int p = 0; p < c.size(); ++p)
    if (!c.peers().same_host(c.rank(), p))
      cross += static_cast<double>(after[static_cast<std::size_t>(p)] - before[static_cast<std::size_t>(p)]);
  return cross;
}

void check_bytes(comm::Communicator& c) {
  const comm::PeerTable& t = c.peers();
  const int n = c.size(), H = t.num_hosts();
  const std::size_t S = std::size_t{1} << 20;
  const double s = static_cast<double>(S);
  bool even = true;
  for (const auto& h : t.hosts) even = even && h.size() == t.hosts[0].size();
  const double L = static_cast<double>(t.hosts[0].size());
  for (const std::string algo : {"ring", "hierarchical", "hierarchical_rail"}) {
    std::vector<double> mine{cross_host_bytes(c, algo, S)};
    std::vector<double> all(static_cast<std::size_t>(n));
    c.allgather(comm::view(mine), comm::view(all));
    double max = 0;
    for (double b : all) max = std::max(max, b);
    if (c.rank() == 0) {
      std::printf("bytes: %-18s 1 MiB all-reduce, %d hosts: sent across hosts per rank:", algo.c_str(), H);
      for (double b : all) std::printf(" %.0f", b);
      std::printf("  (max %.3f S)\n", max / s);
    }
    if (H < 2) continue;
    if (algo == "ring" && max < 2.0 * (n - 1) / n * s * 0.999)
      fail(c.rank(), "the flat ring sent at most " + std::to_string(max) + " B across, expected 2(n-1)/n S");
    if (algo == "hierarchical_rail" && even) {
      const double bound = 2.0 * (H - 1) / (H * L) * s + 64;
      if (c.rank() == 0)
        std::printf("bytes: split-rail bound 2(H-1)/(H L) S + 64 B = %.0f B per rank (S (H-1)/H = %.0f B)\n", bound,
                    s * (H - 1) / H);
      if (mine[0] > bound) fail(c.rank(), "hierarchical_rail sent " + std::to_string(mine[0]) + " B across, over the bound");
    }
  }
}

}  // namespace

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  comm::Communicator c;
  try {
    c = comm::Communicator::create(comm::Config::from_env());
  } catch (const comm::Error& e) {
    std::printf("%s: %s\n", e.code() == comm::ErrorCode::unknown_transport ? "SKIPPED" : "FAIL", e.what());
    return e.code() == comm::ErrorCode::unknown_transport ? 77 : 1;
  }
  if (c.rank() == 0)
    std::printf("comm-mh-check: %d ranks over '%s', %d hosts\n", c.size(), std::string(c.transport_name()).c_str(),
                c.peers().num_hosts());
  try {
    check_bits(c);
    check_bytes(c);
    c.barrier();
  } catch (const comm::Error& e) {
    fail(c.rank(), e.what());
  }
  return failures == 0 ? 0 : 1;
}
