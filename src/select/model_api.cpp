// Public face of the cost model: predictions for a uniform fabric or a
// cluster of hosts, computed by the same Selector the communicator uses.

#include "select/selector.hpp"

#include <comm/error.hpp>
#include <comm/model.hpp>

#include <algorithm>

namespace comm {

namespace {

std::vector<Prediction> predict_on(Collective c, int nranks, LinkMatrix m, algo::HostGroups hosts,
                                   const ComputeModel& compute, std::size_t chunk_bytes, std::size_t bytes) {
  if (chunk_bytes == 0) throw Error(ErrorCode::invalid_argument, "predict: chunk_bytes must be at least 1");
  Selector s(nranks, std::move(m), compute, chunk_bytes, {}, nullptr, true, nullptr, std::move(hosts));
  std::vector<Prediction> out;
  for (const auto& name : s.names(c)) out.push_back({name, s.predict(c, name, bytes)});
  std::stable_sort(out.begin(), out.end(), [](const Prediction& a, const Prediction& b) {
    if ((a.us < 0) != (b.us < 0)) return b.us < 0;
    return a.us < b.us;
  });
  return out;
}

}  // namespace

std::vector<Prediction> predict(Collective c, int nranks, std::size_t bytes, const LinkInfo& link,
                                const ComputeModel& compute, std::size_t chunk_bytes) {
  if (nranks < 1) throw Error(ErrorCode::invalid_argument, "predict: nranks must be at least 1");
  return predict(c, HostFabric{1, nranks, link, link}, bytes, compute, chunk_bytes);
}

std::vector<Prediction> predict(Collective c, const HostFabric& f, std::size_t bytes, const ComputeModel& compute,
                                std::size_t chunk_bytes) {
  if (f.hosts < 1 || f.ranks_per_host < 1)
    throw Error(ErrorCode::invalid_argument, "predict: HostFabric needs hosts and ranks_per_host of at least 1 (got " +
                                                 std::to_string(f.hosts) + " x " + std::to_string(f.ranks_per_host) +
                                                 ")");
  const int n = f.hosts * f.ranks_per_host;
  LinkMatrix m;
  m.n = n;
  m.links.resize(static_cast<std::size_t>(n) * n);
  std::vector<std::vector<int>> members(static_cast<std::size_t>(f.hosts));
  for (int a = 0; a < n; ++a) {
    members[static_cast<std::size_t>(a / f.ranks_per_host)].push_back(a);
    for (int b = 0; b < n; ++b)
      m.links[static_cast<std::size_t>(a) * n + b] =
          a == b ? LinkInfo{LinkKind::self, 0.0, 1e3, "self"}
                 : (a / f.ranks_per_host == b / f.ranks_per_host ? f.intra : f.inter);
  }
  return predict_on(c, n, std::move(m), algo::HostGroups::of(std::move(members), n), compute, chunk_bytes, bytes);
}

}  // namespace comm
