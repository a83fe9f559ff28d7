// Public face of the cost model: predictions for a uniform fabric, computed by
// the same Selector the communicator uses.

#include "select/selector.hpp"

#include <comm/error.hpp>
#include <comm/model.hpp>

#include <algorithm>

namespace comm {

std::vector<Prediction> predict(Collective c, int nranks, std::size_t bytes, const LinkInfo& link,
                                const ComputeModel& compute, std::size_t chunk_bytes) {
  if (nranks < 1) throw Error(ErrorCode::invalid_argument, "predict: nranks must be at least 1");
  if (chunk_bytes == 0) throw Error(ErrorCode::invalid_argument, "predict: chunk_bytes must be at least 1");
  LinkMatrix m;
  m.n = nranks;
  m.links.assign(static_cast<std::size_t>(nranks) * nranks, link);
  for (int r = 0; r < nranks; ++r) m.links[static_cast<std::size_t>(r) * nranks + r] = {LinkKind::self, 0.0, 1e3, "self"};
  Selector s(nranks, std::move(m), compute, chunk_bytes, {}, nullptr);
  std::vector<Prediction> out;
  for (const auto& name : s.names(c)) out.push_back({name, s.predict(c, name, bytes)});
  std::stable_sort(out.begin(), out.end(), [](const Prediction& a, const Prediction& b) {
    if ((a.us < 0) != (b.us < 0)) return b.us < 0;
    return a.us < b.us;
  });
  return out;
}

}  // namespace comm
