#include "select/selector.hpp"
#include "util/c_locale.hpp"

#include "select/determinism.hpp"

#include <comm/error.hpp>

#include <algorithm>
#include <limits>

namespace comm {
namespace {

constexpr std::size_t kModelElem = 4;  // sizes are modelled as f32 elements

}  // namespace

Selector::Selector(int nranks, LinkMatrix links, ComputeParams compute, std::size_t chunk_bytes,
                   std::vector<OverrideRule> overrides, NativeCollectives* native, bool schedules_runnable,
                   const AlgorithmOffer* direct, algo::HostGroups hosts)
    : nranks_(nranks),
      links_(std::move(links)),
      hosts_(hosts.members.empty() ? algo::HostGroups::single(nranks) : std::move(hosts)),
      compute_(compute),
      chunk_bytes_(chunk_bytes),
      overrides_(std::move(overrides)),
      native_(native),
      direct_(direct) {
  auto lists = std::make_shared<NameLists>();
  for (Collective c : kAllCollectives) {
    auto& pc = per_coll_[index(c)];
    std::vector<std::string>& names = (*lists)[index(c)];
    pc.bucket_choice.fill(-1);
    for (const auto& a : algo::all_algorithms())
      if (schedules_runnable && a.collective == c) {
        names.emplace_back(a.name);
        pc.ours.push_back(&a);
        pc.direct.push_back(false);
      }
    if (direct_)
      for (auto& n : direct_->algorithms(c)) {
        names.push_back(n);
        pc.ours.push_back(nullptr);
        pc.direct.push_back(true);
      }
    if (native_)
      for (auto& n : native_->algorithms(c)) {
        names.push_back(n);
        pc.ours.push_back(nullptr);
        pc.direct.push_back(false);
      }
    pc.names = &names;
    // Computed on first use (determinism.hpp); natives never qualify.
    pc.rank_ordered.assign(names.size(), -1);
  }
  names_ = std::move(lists);
  for (const auto& r : overrides_) {
    const auto& pc = per_coll_[index(r.collective)];
    bool found = false;
    for (auto& n : *pc.names) found = found || n == r.algorithm;
    if (!found) {
      std::string valid;
      for (auto& n : *pc.names) valid += (valid.empty() ? "" : ", ") + n;
      throw Error(ErrorCode::invalid_config, "COMM_ALGO: no algorithm '" + r.algorithm + "' for " +
                                                 std::string(to_string(r.collective)) + " (valid: " +
                                                 (valid.empty() ? "none" : valid) + ")");
    }
  }
}

void Selector::share_names(std::shared_ptr<const NameLists> names) {
  if (!names || *names != *names_)
    throw Error(ErrorCode::internal, "selector: the shared algorithm names are not the ones this selector offers");
  names_ = std::move(names);
  for (Collective c : kAllCollectives) per_coll_[index(c)].names = &(*names_)[index(c)];
}

bool Selector::is_native(Collective c, std::string_view name) const {
  const auto& pc = per_coll_[index(c)];
  for (std::size_t i = 0; i < pc.names->size(); ++i)
    if ((*pc.names)[i] == name) return pc.ours[i] == nullptr && !pc.direct[i];
  return false;
}

bool Selector::is_direct(Collective c, std::string_view name) const {
  const auto& pc = per_coll_[index(c)];
  for (std::size_t i = 0; i < pc.names->size(); ++i)
    if ((*pc.names)[i] == name) return pc.direct[i];
  return false;
}

algo::AlgoArgs Selector::model_args(Collective c, std::size_t bytes) const {
  algo::AlgoArgs a;
  a.collective = c;
  a.nranks = nranks_;
  a.elem_size = kModelElem;
  a.chunk_elems = std::max<std::size_t>(1, chunk_bytes_ / kModelElem);
  a.hosts = &hosts_;
  std::size_t elems = std::max<std::size_t>(1, bytes / kModelElem);
  const auto n = static_cast<std::size_t>(nranks_);
  switch (c) {
    case Collective::allreduce:
    case Collective::broadcast:
    case Collective::reduce:
    case Collective::send:
    case Collective::recv: a.count = elems; break;
    case Collective::reduce_scatter:
    case Collective::allgather:
    case Collective::all_to_all:
    case Collective::all_to_allv: a.count = std::max<std::size_t>(1, elems / n); break;
    case Collective::barrier: a.count = 0; break;
  }
  if (c == Collective::all_to_allv) {
    uniform_counts_.assign(n, a.count);
    uniform_displs_.resize(n);
    for (std::size_t j = 0; j < n; ++j) uniform_displs_[j] = j * a.count;
    a.send_counts = a.recv_counts = uniform_counts_;
    a.send_displs = a.recv_displs = uniform_displs_;
  }
  return a;
}

void Selector::set_native_profile(NativeProfile profile) {
  native_profile_ = std::move(profile);
  for (auto& pc : per_coll_) pc.bucket_choice.fill(-1);
}

double Selector::predict_native(Collective c, std::string_view name, std::size_t bytes) const {
  if (native_profile_.find(c, name)) return native_profile_.predict(c, name, bytes);
  return native_ ? native_->predict_us(c, name, bytes) : -1.0;
}

double Selector::predict_model(Collective c, std::string_view name, std::size_t bytes) const {
  const auto& pc = per_coll_[index(c)];
  for (std::size_t i = 0; i < pc.names->size(); ++i) {
    if ((*pc.names)[i] != name) continue;
    if (pc.direct[i]) return direct_->predict_us(c, name, bytes, compute_);
    if (!pc.ours[i]) return predict_native(c, name, bytes);
    // Simulating the schedule is selection's costly part (each refresh of the
    // measured profile during calibration took 14 ms with 8 ranks on 2 cores)
    // and what it depends on (links, compute, world, chunk) never changes:
    // each (algorithm, size) is simulated once.
    const auto [at, fresh] = pc.modelled.try_emplace({i, bytes}, 0.0);
    if (fresh) at->second = predict_us(*pc.ours[i], model_args(c, bytes), links_, compute_);
    return at->second;
  }
  return -1.0;
}

Selector::Movement Selector::movement(Collective c, std::string_view name,
                                      std::initializer_list<std::size_t> sizes) const {
  Movement m;
  const auto& pc = per_coll_[index(c)];
  const auto named = std::find(pc.names->begin(), pc.names->end(), name);
  const auto i = static_cast<std::size_t>(named - pc.names->begin());
  for (const std::size_t bytes : sizes) {
    m.us.push_back(predict_model(c, name, bytes));
    std::size_t sends = 0;
    if (named != pc.names->end() && pc.ours[i]) {
      const auto [at, fresh] = pc.sends.try_emplace({i, bytes}, 0);
      if (fresh) at->second = busiest_sends(*pc.ours[i], model_args(c, bytes));
      sends = at->second;
    }
    m.sends.push_back(sends);
  }
  return m;
}

bool Selector::ordered(Collective c, std::size_t i) const {
  const auto& pc = per_coll_[index(c)];
  if (pc.rank_ordered[i] < 0) pc.rank_ordered[i] = pc.ours[i] && rank_ordered(*pc.ours[i], nranks_) ? 1 : 0;
  return pc.rank_ordered[i] == 1;
}

bool Selector::deterministic(Collective c, std::string_view name) const {
  const auto& pc = per_coll_[index(c)];
  for (std::size_t i = 0; i < pc.names->size(); ++i)
    if ((*pc.names)[i] == name) return ordered(c, i);
  return false;
}

std::string Selector::qualifying(Collective c) const {
  const auto& pc = per_coll_[index(c)];
  std::string s;
  for (std::size_t i = 0; i < pc.names->size(); ++i)
    if (ordered(c, i)) s += (s.empty() ? "" : ", ") + (*pc.names)[i];
  return s.empty() ? "none" : s;
}

void Selector::check_deterministic(Collective c, std::string_view name) const {
  if (!deterministic_ || deterministic(c, name)) return;
  throw Error(ErrorCode::invalid_argument,
              std::string(to_string(c)) + ": algorithm '" + std::string(name) +
                  "' is not allowed in deterministic mode (COMM_DETERMINISTIC / Config::deterministic): its "
                  "reduction order is not the rank order at every size on " + std::to_string(nranks_) +
                  " ranks; deterministic algorithms here: " + qualifying(c));
}

void Selector::set_deterministic(bool on) {
  deterministic_ = on;
  for (auto& pc : per_coll_) pc.bucket_choice.fill(-1);
  if (!on) return;
  for (const auto& r : overrides_)
    if (!deterministic(r.collective, r.algorithm)) {
      throw Error(ErrorCode::invalid_config,
                  "COMM_ALGO names '" + r.algorithm + "' for " + std::string(to_string(r.collective)) +
                      ", which deterministic mode (COMM_DETERMINISTIC=1) does not allow on " +
                      std::to_string(nranks_) + " ranks (its reduction order is not the rank order at every size); "
                      "deterministic algorithms here: " + qualifying(r.collective));
    }
}

bool Selector::measured_at(const PerCollective& pc, std::size_t i, std::size_t bytes) const {
  if (!pc.ours[i] && !pc.direct[i]) return true;  // native: its own profile predicts it
  if (pc.measured_sizes.empty() || pc.measured_span.first > pc.measured_span.second) return false;
  const auto [lo, hi] = pc.measured_sizes[i];
  const std::size_t at = std::clamp(bytes, pc.measured_span.first, pc.measured_span.second);
  return lo <= at && at <= hi;
}

// The fastest prediction; one that is extrapolated (measured_at) only if it
// beats the fastest measured one by kExtrapolatedMargin. Without any
// measurement (calibration off) the model's fastest.
int Selector::evaluate(Collective c, std::size_t bytes) const {
  const auto& pc = per_coll_[index(c)];
  int best = -1, best_measured = -1;
  double best_us = std::numeric_limits<double>::infinity(), best_measured_us = best_us;
  for (std::size_t i = 0; i < pc.names->size(); ++i) {
    if (deterministic_ && !ordered(c, i)) continue;
    const double us = predict(c, (*pc.names)[i], bytes);
    if (us < 0) continue;
    if (us < best_us) {
      best_us = us;
      best = static_cast<int>(i);
    }
    if (us < best_measured_us && measured_at(pc, i, bytes)) {
      best_measured_us = us;
      best_measured = static_cast<int>(i);
    }
  }
  if (best_measured < 0 || best_us * kExtrapolatedMargin < best_measured_us) return best;
  return best_measured;
}

const OverrideRule* Selector::override_for(Collective c, std::size_t bytes) const {
  for (const auto& r : overrides_)
    if (r.collective == c && bytes >= r.min_bytes && bytes < r.max_bytes) return &r;
  return nullptr;
}

const std::string& Selector::choose(Collective c, std::size_t bytes, const char** source) {
  auto& pc = per_coll_[index(c)];
  if (const OverrideRule* r = override_for(c, bytes)) {
    if (source) *source = "override";
    for (auto& n : *pc.names)
      if (n == r->algorithm) return n;
  }
  if (source) *source = "cost model";
  const int b = bucket_of(bytes);
  int& choice = pc.bucket_choice[static_cast<std::size_t>(b)];
  if (choice < 0) choice = evaluate(c, bytes == 0 ? 0 : std::size_t{1} << b);
  if (choice < 0)
    throw Error(ErrorCode::unsupported, "no algorithm can run " + std::string(to_string(c)) + " on " +
                                            std::to_string(nranks_) + " ranks" +
                                            (deterministic_ ? " in deterministic mode" : ""));
  return (*pc.names)[static_cast<std::size_t>(choice)];
}

std::vector<CandidateCost> Selector::candidates(Collective c, std::size_t bytes) {
  const char* source = nullptr;
  const std::string chosen = choose(c, bytes, &source);
  const auto& pc = per_coll_[index(c)];
  std::vector<CandidateCost> out;
  // Evaluate at the bucket's representative size: that is what choose() compared.
  const int b = bucket_of(bytes);
  const std::size_t at = bytes == 0 ? 0 : std::size_t{1} << b;
  for (const auto& name : *pc.names) {
    CandidateCost cc;
    cc.algorithm = name;
    cc.predicted_us = predict(c, name, at);
    cc.chosen = name == chosen;
    cc.deterministic = deterministic(c, name);
    if (deterministic_ && !deterministic(c, name))
      cc.note = "excluded by deterministic mode (reduction order not fixed)";
    else if (cc.predicted_us < 0 && is_native(c, name))
      cc.note = "not measured (calibration off or not timed): used only when named";
    else if (cc.predicted_us < 0) {
      const std::string why = why_not(c, name);
      cc.note = why.empty() ? "not eligible for this group size" : "not eligible: " + why;
    }
    else if (cc.chosen)
      cc.note = std::string("chosen by ") + source;
    out.push_back(std::move(cc));
  }
  double best = std::numeric_limits<double>::infinity();
  for (auto& cc : out)
    if (cc.predicted_us >= 0) best = std::min(best, cc.predicted_us);
  for (auto& cc : out)
    if (cc.predicted_us >= 0 && cc.note.empty()) {
      cc.note = util::fixed(best > 0 ? cc.predicted_us / best : 1.0, 2) + "x the best prediction";
    }
  return out;
}

std::vector<SelectionRange> Selector::table(Collective c, std::size_t max_bytes) {
  std::vector<SelectionRange> out;
  auto push = [&](std::size_t lo, std::size_t hi, const std::string& algo, const char* source) {
    if (!out.empty() && out.back().algorithm == algo && out.back().source == source && out.back().max_bytes == lo) {
      out.back().max_bytes = hi;
      return;
    }
    out.push_back({lo, hi, algo, source});
  };
  // Walk the bucket boundaries and the override boundaries in order.
  std::vector<std::size_t> edges{0, 1};
  for (int b = 1; b < 64 && (std::size_t{1} << b) <= max_bytes; ++b) edges.push_back(std::size_t{1} << b);
  for (const auto& r : overrides_)
    if (r.collective == c) {
      if (r.min_bytes <= max_bytes) edges.push_back(r.min_bytes);
      if (r.max_bytes <= max_bytes) edges.push_back(r.max_bytes);
    }
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  for (std::size_t i = 0; i < edges.size(); ++i) {
    const std::size_t lo = edges[i];
    const std::size_t hi = i + 1 < edges.size() ? edges[i + 1] : std::numeric_limits<std::size_t>::max();
    const char* source = nullptr;
    const std::string algo = choose(c, lo, &source);
    push(lo, hi, algo, source);
  }
  return out;
}

}  // namespace comm
