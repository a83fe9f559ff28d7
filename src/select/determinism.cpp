#include "select/determinism.hpp"

#include <comm/error.hpp>

#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <tuple>
#include <unordered_map>
#include <string>
#include <vector>

namespace comm {
namespace {

// Expression ids: leaves are (rank, element); a node is an ordered pair of ids.
class Expressions {
 public:
  static constexpr std::uint32_t kNone = 0;  // an element no step wrote

  std::uint32_t leaf(int rank, std::size_t element) { return intern({0, static_cast<std::uint64_t>(rank) << 40 | element}); }
  std::uint32_t node(std::uint32_t a, std::uint32_t b) {
    if (a == kNone || b == kNone) return kNone;
    return intern({1, static_cast<std::uint64_t>(a) << 32 | b});
  }
  // Readable form, for explanations: leaves are r<rank>.
  std::string show(std::uint32_t id) const {
    if (id == kNone) return "(unwritten)";
    const auto& [kind, v] = terms_[id - 1];
    if (kind == 0) return "r" + std::to_string(v >> 40);
    return "(" + show(static_cast<std::uint32_t>(v >> 32)) + " . " + show(static_cast<std::uint32_t>(v)) + ")";
  }

 private:
  using Term = std::pair<int, std::uint64_t>;
  std::uint32_t intern(Term t) {
    auto [it, fresh] = ids_.emplace(t, static_cast<std::uint32_t>(terms_.size() + 1));
    if (fresh) terms_.push_back(t);
    return it->second;
  }
  struct TermHash {
    std::size_t operator()(const Term& t) const noexcept {
      return std::hash<std::uint64_t>{}(t.second * 2 + static_cast<std::uint64_t>(t.first));
    }
  };
  std::unordered_map<Term, std::uint32_t, TermHash> ids_;
  std::vector<Term> terms_;
};

struct RankState {
  Schedule s;
  std::array<std::vector<std::uint32_t>, 3> buf;  // input, output, scratch
  std::vector<std::uint32_t> missing;
  std::vector<bool> done;
};

std::vector<std::uint32_t>& buffer(RankState& st, BufferId b) { return st.buf[static_cast<std::size_t>(b)]; }

std::vector<std::uint32_t> read(RankState& st, const Region& r) {
  auto& v = buffer(st, r.buffer);
  if (r.offset + r.count > v.size()) throw Error(ErrorCode::internal, "determinism check: a step reads past a buffer");
  return {v.begin() + static_cast<std::ptrdiff_t>(r.offset), v.begin() + static_cast<std::ptrdiff_t>(r.offset + r.count)};
}

void write(RankState& st, const Region& r, const std::vector<std::uint32_t>& values) {
  auto& v = buffer(st, r.buffer);
  if (r.offset + r.count > v.size()) throw Error(ErrorCode::internal, "determinism check: a step writes past a buffer");
  std::copy(values.begin(), values.end(), v.begin() + static_cast<std::ptrdiff_t>(r.offset));
}

// Sizes of input and output per rank for collective c, count elements (AlgoArgs convention).
std::pair<std::size_t, std::size_t> buffer_sizes(Collective c, std::size_t count, int n) {
  const auto nn = static_cast<std::size_t>(n);
  switch (c) {
    case Collective::reduce_scatter: return {count * nn, count};
    case Collective::allgather: return {count, count * nn};
    case Collective::all_to_all:
    case Collective::all_to_allv: return {count * nn, count * nn};
    case Collective::allreduce:
    case Collective::broadcast:
    case Collective::reduce:
    case Collective::send:
    case Collective::recv:
    case Collective::barrier: return {count, count};
  }
  return {count, count};
}

// Rank r's schedule and buffers: the input holds the leaves (r, element), the output and scratch nothing yet.
RankState start_rank(const algo::Algorithm& alg, algo::AlgoArgs a, int r, Expressions& ex) {
  const auto [in_size, out_size] = buffer_sizes(alg.collective, a.count, a.nranks);
  RankState st;
  a.rank = r;
  ScheduleBuilder b;
  alg.build(a, b);
  st.s = std::move(b).finish();
  st.buf[0].resize(in_size);
  for (std::size_t i = 0; i < in_size; ++i) st.buf[0][i] = ex.leaf(r, i);
  st.buf[1].assign(out_size, Expressions::kNone);
  // Broadcast is in place: the root's output is its input.
  if (alg.collective == Collective::broadcast && r == a.root) st.buf[1] = st.buf[0];
  st.buf[2].assign(st.s.scratch_count, Expressions::kNone);
  st.missing.resize(st.s.steps.size());
  st.done.assign(st.s.steps.size(), false);
  return st;
}

// Every rank's schedule run on expressions instead of numbers (steps in
// dependency order, receives matched to sends by (sender, receiver, tag)).
class SymbolicRun {
 public:
  SymbolicRun(const algo::Algorithm& alg, const algo::AlgoArgs& a, Expressions& ex) : alg_(alg), ex_(ex) {
    for (int r = 0; r < a.nranks; ++r) {
      RankState& st = ranks_.emplace_back(start_rank(alg, a, r, ex));
      for (StepId i = 0; i < st.s.steps.size(); ++i)
        if ((st.missing[i] = st.s.steps[i].num_deps) == 0) ready_.emplace_back(r, i);
    }
  }

  // The output buffers; throws if the schedules deadlock.
  std::vector<std::vector<std::uint32_t>> outputs() && {
    while (!ready_.empty()) {
      const auto [r, i] = ready_.back();
      ready_.pop_back();
      RankState& st = rank(r);
      const Step& step = st.s.steps[i];
      switch (step.kind) {
        case StepKind::send: run_send(r, i, step); break;
        case StepKind::recv: run_recv(r, i, step); break;
        case StepKind::copy:
          write(st, step.dst, read(st, step.src));
          complete(r, i);
          break;
        case StepKind::reduce: run_reduce(r, i, step); break;
      }
    }
    std::size_t total = 0;
    for (const auto& st : ranks_) total += st.s.steps.size();
    if (finished_ != total)
      throw Error(ErrorCode::internal, "determinism check: '" + std::string(alg_.name) + "' on " +
                                           std::to_string(ranks_.size()) + " ranks deadlocks in the symbolic run");
    std::vector<std::vector<std::uint32_t>> out;
    for (auto& st : ranks_) out.push_back(std::move(st.buf[1]));
    return out;
  }

 private:
  using Channel = std::tuple<int, int, std::uint32_t>;  // sender, receiver, tag

  RankState& rank(int r) { return ranks_[static_cast<std::size_t>(r)]; }

  void complete(int r, StepId i) {
    RankState& st = rank(r);
    st.done[i] = true;
    ++finished_;
    for (StepId d : st.s.dependents_of(i))
      if (--st.missing[d] == 0) ready_.emplace_back(r, d);
  }

  void deliver(int r, StepId i, const std::vector<std::uint32_t>& values) {
    write(rank(r), rank(r).s.steps[i].dst, values);
    complete(r, i);
  }

  void run_send(int r, StepId i, const Step& step) {
    const Channel ch{r, step.peer, step.tag};
    auto values = read(rank(r), step.src);
    if (auto w = waiting_.find(ch); w != waiting_.end() && !w->second.empty()) {
      const StepId rs = w->second.front();
      w->second.pop_front();
      deliver(step.peer, rs, values);
    } else {
      sent_[ch].push_back(std::move(values));
    }
    complete(r, i);
  }

  void run_recv(int r, StepId i, const Step& step) {
    const Channel ch{step.peer, r, step.tag};
    if (auto m = sent_.find(ch); m != sent_.end() && !m->second.empty()) {
      const auto values = std::move(m->second.front());
      m->second.pop_front();
      deliver(r, i, values);
    } else {
      waiting_[ch].push_back(i);
    }
  }

  void run_reduce(int r, StepId i, const Step& step) {
    RankState& st = rank(r);
    const auto x = read(st, step.src), y = read(st, step.src2);
    std::vector<std::uint32_t> z(x.size());
    for (std::size_t k = 0; k < x.size(); ++k) z[k] = ex_.node(x[k], y[k]);
    write(st, step.dst, z);
    complete(r, i);
  }

  const algo::Algorithm& alg_;
  Expressions& ex_;
  std::vector<RankState> ranks_;
  std::vector<std::pair<int, StepId>> ready_;
  std::map<Channel, std::deque<std::vector<std::uint32_t>>> sent_;
  std::map<Channel, std::deque<StepId>> waiting_;  // posted receives without a message yet
  std::size_t finished_ = 0;
};

// The rank-ordered fold of input element `element` over all ranks.
std::uint32_t fold(Expressions& ex, int n, std::size_t element) {
  std::uint32_t f = ex.leaf(0, element);
  for (int r = 1; r < n; ++r) f = ex.node(f, ex.leaf(r, element));
  return f;
}

// What output element i of `rank` must hold; kNone where the collective defines nothing.
std::uint32_t expected(Expressions& ex, Collective c, int n, int rank, int root, std::size_t count, std::size_t i) {
  const auto r = static_cast<std::size_t>(rank);
  switch (c) {
    case Collective::allreduce: return fold(ex, n, i);
    case Collective::reduce: return rank == root ? fold(ex, n, i) : Expressions::kNone;
    case Collective::reduce_scatter: return fold(ex, n, r * count + i);
    case Collective::allgather: return ex.leaf(static_cast<int>(i / count), i % count);
    case Collective::broadcast: return ex.leaf(root, i);
    case Collective::all_to_all: return ex.leaf(static_cast<int>(i / count), r * count + i % count);
    case Collective::all_to_allv:
    case Collective::send:
    case Collective::recv:
    case Collective::barrier: return Expressions::kNone;
  }
  return Expressions::kNone;
}

}  // namespace

bool reduces(Collective c) noexcept {
  switch (c) {
    case Collective::allreduce:
    case Collective::reduce_scatter:
    case Collective::reduce: return true;
    case Collective::allgather:
    case Collective::broadcast:
    case Collective::all_to_all:
    case Collective::all_to_allv:
    case Collective::send:
    case Collective::recv:
    case Collective::barrier: return false;
  }
  return false;
}

namespace {

// One configuration: false (and *why) if some defined output element is not the rank-ordered fold.
bool ordered_at(const algo::Algorithm& alg, int nranks, int root, std::size_t count, std::size_t chunk,
                std::string* why) {
  const algo::AlgoArgs a{
      .collective = alg.collective, .nranks = nranks, .count = count, .root = root, .chunk_elems = chunk};
  Expressions ex;
  const auto out = SymbolicRun(alg, a, ex).outputs();
  for (int r = 0; r < nranks; ++r)
    for (std::size_t i = 0; i < out[static_cast<std::size_t>(r)].size(); ++i) {
      const std::uint32_t want = expected(ex, alg.collective, nranks, r, root, count, i);
      const std::uint32_t got = out[static_cast<std::size_t>(r)][i];
      if (want == Expressions::kNone || got == want) continue;
      if (why) {
        const bool rooted = alg.collective == Collective::reduce || alg.collective == Collective::broadcast;
        *why = "on " + std::to_string(nranks) + " ranks" + (rooted ? " (root " + std::to_string(root) + ")" : "") +
               ", " + std::to_string(count) + " elements in chunks of " + std::to_string(chunk) + ": rank " +
               std::to_string(r) + " element " + std::to_string(i) + " is " + ex.show(got) + ", not " +
               ex.show(want);
      }
      return false;
    }
  return true;
}

}  // namespace

bool rank_ordered(const algo::Algorithm& alg, int nranks, std::string* why) {
  // Without a reduction there is no order to fix: data moves unchanged.
  if (!reduces(alg.collective)) return true;
  const auto n = static_cast<std::size_t>(nranks);
  // Fewer elements than ranks (empty blocks), not divisible, one element;
  // the symbolic run costs O(n^2 count) for direct algorithms, so large
  // groups get the essential shapes only.
  std::vector<std::size_t> counts{1, std::max<std::size_t>(1, n - 1), n + 1};
  if (n <= 16) counts.push_back(3 * n + 2);
  // reduce_scatter's count is per rank's block (all blocks equal): a few elements cover its chunk shapes.
  if (alg.collective == Collective::reduce_scatter) counts = {1, 3, 5};
  std::vector<int> roots{0};
  if (alg.collective == Collective::reduce && nranks > 1) roots = {0, 1, nranks - 1};
  for (const int root : roots)
    for (const std::size_t count : counts)
      for (const std::size_t chunk : {count, std::size_t{1}, std::size_t{2}})
        if (!ordered_at(alg, nranks, root, count, chunk, why)) return false;
  return true;
}

}  // namespace comm
