// Every algorithm's schedules, run without any transport: an interpreter in
// this file executes all ranks' schedules in memory (sends matched to
// receives by (source, destination, tag)) on float and int data, and the
// results are compared with references computed directly here. It also
// checks the schedules themselves: every send meets exactly one receive of
// the same size, nothing deadlocks, and no two unordered steps of a rank
// touch the same element when one of them writes it (which would be a data
// race in the executor, e.g. overwriting an in-place input still being sent).

#include "sweep_sizes.hpp"
#include "algorithms/algorithm.hpp"

#include <comm/schedule.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

using namespace comm;

namespace {

enum class Op { sum, max };

template <class T>
T apply(Op op, T a, T b) {
  return op == Op::sum ? static_cast<T>(a + b) : std::max(a, b);
}

template <class T>
struct RankData {
  std::vector<T> input, output, scratch;
  bool alias = false;  // input and output are one buffer (stored in `output`)
};

// ---- the interpreter --------------------------------------------------------

template <class T>
class Interpreter {
 public:
  Interpreter(const std::vector<Schedule>& s, std::vector<RankData<T>>& d, Op op) : sched_(s), data_(d), op_(op) {}

  // "" when every step ran and every message was consumed; else what went wrong.
  std::string run() {
    const int n = static_cast<int>(sched_.size());
    std::vector<std::vector<std::uint32_t>> missing(n);
    std::vector<std::vector<StepId>> ready(n), blocked(n);
    std::size_t total = 0, done = 0;
    for (int r = 0; r < n; ++r) {
      const auto& s = sched_[r];
      total += s.steps.size();
      for (std::size_t i = 0; i < s.steps.size(); ++i) {
        missing[r].push_back(s.steps[i].num_deps);
        if (s.steps[i].num_deps == 0) ready[r].push_back(static_cast<StepId>(i));
      }
    }
    for (bool progress = true; progress && err_.empty();) {
      progress = false;
      for (int r = 0; r < n && err_.empty(); ++r) {
        for (StepId s : blocked[r]) ready[r].push_back(s);
        blocked[r].clear();
        for (std::size_t k = 0; k < ready[r].size() && err_.empty(); ++k) {
          const StepId s = ready[r][k];
          if (!execute(r, s)) {
            blocked[r].push_back(s);
            continue;
          }
          progress = true;
          ++done;
          for (StepId d : sched_[r].dependents_of(s))
            if (--missing[r][d] == 0) ready[r].push_back(d);
        }
        ready[r].clear();
      }
    }
    if (!err_.empty()) return err_;
    if (done != total) {
      std::string e = "deadlock: " + std::to_string(total - done) + " of " + std::to_string(total) +
                      " steps never ran; blocked receives:";
      for (int r = 0; r < n; ++r)
        for (StepId s : blocked[r])
          e += " rank " + std::to_string(r) + "<-" + std::to_string(sched_[r].steps[s].peer) + " tag " +
               std::to_string(sched_[r].steps[s].tag) + ";";
      return e;
    }
    if (!messages_.empty()) {
      const auto& [key, v] = *messages_.begin();
      return "unmatched send " + std::to_string(std::get<0>(key)) + "->" + std::to_string(std::get<1>(key)) +
             " tag " + std::to_string(std::get<2>(key));
    }
    return "";
  }

 private:
  // The elements `g` names on rank r; out of bounds sets err_ (callers check it).
  T* at(int r, const Region& g) {
    RankData<T>& d = data_[r];
    std::vector<T>* v = &d.scratch;
    if (g.buffer == BufferId::input) v = d.alias ? &d.output : &d.input;
    if (g.buffer == BufferId::output) v = &d.output;
    if (g.offset + g.count > v->size()) {
      err_ = "rank " + std::to_string(r) + " step touches elements [" + std::to_string(g.offset) + ", " +
             std::to_string(g.offset + g.count) + ") of a buffer of " + std::to_string(v->size());
      return v->data();
    }
    return v->data() + g.offset;
  }

  // False only for a receive whose message has not been sent yet.
  bool execute(int r, StepId id) {
    const Step& st = sched_[r].steps[id];
    const int n = static_cast<int>(sched_.size());
    switch (st.kind) {
      case StepKind::send: {
        if (st.peer < 0 || st.peer >= n) return fail("send to rank " + std::to_string(st.peer));
        const T* p = at(r, st.src);
        if (!err_.empty()) return true;
        auto key = std::make_tuple(r, st.peer, st.tag);
        if (messages_.count(key))
          return fail("rank " + std::to_string(r) + " sends tag " + std::to_string(st.tag) + " to rank " +
                      std::to_string(st.peer) + " twice");
        messages_[key].assign(p, p + st.src.count);
        return true;
      }
      case StepKind::recv: {
        if (st.peer < 0 || st.peer >= n) return fail("recv from rank " + std::to_string(st.peer));
        auto it = messages_.find(std::make_tuple(st.peer, r, st.tag));
        if (it == messages_.end()) return false;
        if (it->second.size() != st.dst.count)
          return fail("rank " + std::to_string(st.peer) + " sends " + std::to_string(it->second.size()) +
                      " elements, rank " + std::to_string(r) + " receives " + std::to_string(st.dst.count) +
                      " (tag " + std::to_string(st.tag) + ")");
        T* p = at(r, st.dst);
        if (err_.empty()) std::copy(it->second.begin(), it->second.end(), p);
        messages_.erase(it);
        return true;
      }
      case StepKind::reduce: {
        if (st.src.count != st.dst.count || st.src2.count != st.dst.count) return fail("reduce of unequal lengths");
        const T* a = at(r, st.src);
        const T* b = at(r, st.src2);
        T* d = at(r, st.dst);
        if (!err_.empty()) return true;
        std::vector<T> tmp(st.dst.count);
        for (std::size_t i = 0; i < tmp.size(); ++i) tmp[i] = apply(op_, a[i], b[i]);
        std::copy(tmp.begin(), tmp.end(), d);
        return true;
      }
      case StepKind::copy: {
        if (st.src.count != st.dst.count) return fail("copy of unequal lengths");
        const T* a = at(r, st.src);
        T* d = at(r, st.dst);
        if (!err_.empty()) return true;
        std::vector<T> tmp(a, a + st.src.count);
        std::copy(tmp.begin(), tmp.end(), d);
        return true;
      }
    }
    return true;
  }

  bool fail(std::string e) {
    if (err_.empty()) err_ = std::move(e);
    return true;
  }

  const std::vector<Schedule>& sched_;
  std::vector<RankData<T>>& data_;
  Op op_;
  std::map<std::tuple<int, int, std::uint32_t>, std::vector<T>> messages_;
  std::string err_;
};

// ---- data-race check ----------------------------------------------------------

// Two steps of one rank that access the same element, one of them writing,
// must be ordered by the dependencies (a receive writes at any time between
// being posted and completing). A reduce/copy's destination must equal or be
// disjoint from its sources.
std::string check_races(const Schedule& s, std::size_t in_size, std::size_t out_size, bool alias) {
  const std::size_t m = s.steps.size();
  const std::size_t words = (m + 63) / 64;
  std::vector<std::uint64_t> anc(m * words, 0);
  for (std::size_t i = 0; i < m; ++i)
    for (StepId d : s.deps_of(static_cast<StepId>(i))) {
      for (std::size_t w = 0; w < words; ++w) anc[i * words + w] |= anc[d * words + w];
      anc[i * words + d / 64] |= std::uint64_t{1} << (d % 64);
    }
  auto before = [&](std::size_t a, std::size_t b) { return (anc[b * words + a / 64] >> (a % 64)) & 1; };
  auto base = [&](BufferId b) -> std::size_t {
    switch (b) {
      case BufferId::input: return 0;
      case BufferId::output: return alias ? 0 : in_size;
      case BufferId::scratch: return in_size + out_size;
    }
    return 0;
  };
  struct Access {
    std::size_t addr;
    std::uint32_t step;
    bool write;
  };
  std::vector<Access> acc;
  auto add = [&](const Region& g, std::uint32_t step, bool write) {
    for (std::size_t i = 0; i < g.count; ++i) acc.push_back({base(g.buffer) + g.offset + i, step, write});
  };
  for (std::size_t i = 0; i < m; ++i) {
    const Step& st = s.steps[i];
    const auto id = static_cast<std::uint32_t>(i);
    switch (st.kind) {
      case StepKind::send: add(st.src, id, false); break;
      case StepKind::recv: add(st.dst, id, true); break;
      case StepKind::reduce:
      case StepKind::copy: {
        for (const Region* src : {&st.src, &st.src2}) {
          if (st.kind == StepKind::copy && src == &st.src2) continue;
          const std::size_t a = base(src->buffer) + src->offset, d = base(st.dst.buffer) + st.dst.offset;
          const bool disjoint = a + src->count <= d || d + st.dst.count <= a;
          if (!disjoint && a != d) return "step " + std::to_string(i) + " partially overlaps its source";
          add(*src, id, false);
        }
        add(st.dst, id, true);
        break;
      }
    }
  }
  // Bucket the accesses by element; a counting sort is stable, so each
  // bucket stays in step order (x.step < y.step below).
  std::size_t space = 0;
  for (const Access& a : acc) space = std::max(space, a.addr + 1);
  std::vector<std::size_t> first(space + 1, 0);
  for (const Access& a : acc) ++first[a.addr + 1];
  for (std::size_t i = 0; i < space; ++i) first[i + 1] += first[i];
  std::vector<Access> by_addr(acc.size());
  std::vector<std::size_t> fill(first.begin(), first.end() - 1);
  for (const Access& a : acc) by_addr[fill[a.addr]++] = a;
  for (std::size_t e = 0; e < space; ++e)
    for (std::size_t i = first[e]; i < first[e + 1]; ++i)
      for (std::size_t j = i + 1; j < first[e + 1]; ++j) {
        const Access &x = by_addr[i], &y = by_addr[j];
        if (x.step == y.step || (!x.write && !y.write)) continue;
        if (!before(x.step, y.step))
          return "steps " + std::to_string(x.step) + " and " + std::to_string(y.step) + " race on element " +
                 std::to_string(e) + " (no dependency orders them)";
      }
  return "";
}

// ---- one case -------------------------------------------------------------

struct Case {
  const algo::Algorithm* alg;
  int n;
  std::size_t count;
  std::size_t chunk;
  int root;
  bool in_place;
  const algo::HostGroups* hosts = nullptr;  // null: one host
  std::string str() const {
    std::string layout;
    if (hosts)
      for (const auto& m : hosts->members) {
        layout += layout.empty() ? " hosts=" : "|";
        for (std::size_t i = 0; i < m.size(); ++i) layout += (i ? "," : "") + std::to_string(m[i]);
      }
    return std::string(to_string(alg->collective)) + "/" + std::string(alg->name) + " n=" + std::to_string(n) +
           " count=" + std::to_string(count) + " chunk=" + std::to_string(chunk) + " root=" + std::to_string(root) +
           (in_place ? " in-place" : "") + layout;
  }
};

// Host layouts for algorithms that read AlgoArgs::hosts: even and uneven
// hosts, hosts of one rank, and ranks interleaved across hosts.
std::vector<algo::HostGroups> host_layouts(int n) {
  std::vector<std::vector<std::vector<int>>> shapes;
  auto blocks = [n](std::vector<int> sizes) {
    std::vector<std::vector<int>> m;
    int r = 0;
    for (int k : sizes) {
      m.emplace_back();
      for (int i = 0; i < k && r < n; ++i) m.back().push_back(r++);
    }
    return m;
  };
  if (n >= 2) shapes.push_back(blocks({n / 2, n - n / 2}));
  // Large groups: the even split and the interleaving only (the sweep's cost grows with n).
  if (n >= 3 && n <= 9) shapes.push_back(blocks({n - 1, 1}));
  if (n >= 4 && n <= 9) shapes.push_back(blocks({n - 2, 1, 1}));
  if (n >= 3) {
    std::vector<std::vector<int>> interleaved(3);
    for (int r = 0; r < n; ++r) interleaved[static_cast<std::size_t>(r % 3)].push_back(r);
    shapes.push_back(interleaved);
  }
  std::vector<algo::HostGroups> out;
  for (auto& m : shapes) out.push_back(algo::HostGroups::of(m, n));
  return out;
}

bool reads_hosts(const algo::Algorithm& a) {
  return a.name.find("hierarchical") != std::string_view::npos || a.name == "ring";
}

// all_to_allv pattern: rank i sends cnt(i, j) elements to j; zero included.
std::size_t vcount(std::size_t count, int i, int j) { return static_cast<std::size_t>((i + 2 * j) % 3) * count / 2; }

struct VLayout {
  std::vector<std::size_t> sc, sd, rc, rd;
  std::size_t in_size = 0, out_size = 0;
};
// Displacements leave gaps (1 element between send blocks, 2 between
// receive blocks, receive blocks in reverse rank order) so misplaced data shows.
VLayout vlayout(std::size_t count, int n, int r) {
  VLayout v;
  for (int j = 0; j < n; ++j) {
    v.sc.push_back(vcount(count, r, j));
    v.sd.push_back(v.in_size);
    v.in_size += v.sc.back() + 1;
  }
  v.rc.assign(n, 0);
  v.rd.assign(n, 0);
  for (int j = n - 1; j >= 0; --j) {
    v.rc[j] = vcount(count, j, r);
    v.rd[j] = v.out_size;
    v.out_size += v.rc[j] + 2;
  }
  return v;
}

enum class Data { exact, random };

template <class T>
T value(Data kind, int r, std::size_t i, std::mt19937& rng) {
  if (kind == Data::random) return static_cast<T>(std::uniform_real_distribution<double>(-1, 1)(rng));
  return static_cast<T>(static_cast<long long>((r * 131 + static_cast<long long>(i) * 31) % 17) - 8);
}

constexpr double kSentinel = -999;

// Runs one case; returns "" or a failure description. With `races`, also
// checks every rank's schedule for data races.
template <class T>
std::string run_case(const Case& c, Op op, Data kind, bool races) {
  const int n = c.n;
  const std::size_t count = c.count;
  const auto nn = static_cast<std::size_t>(n);
  const Collective coll = c.alg->collective;
  std::vector<VLayout> vl;
  for (int r = 0; r < n; ++r) vl.push_back(vlayout(count, n, r));
  std::vector<Schedule> sched;
  std::vector<RankData<T>> data(nn);
  std::mt19937 rng(static_cast<unsigned>(n * 1000 + count));
  for (int r = 0; r < n; ++r) {
    algo::AlgoArgs a;
    a.collective = coll;
    a.rank = r;
    a.nranks = n;
    a.count = count;
    a.elem_size = sizeof(T);
    a.root = c.root;
    a.chunk_elems = c.chunk;
    a.in_place = c.in_place;
    a.hosts = c.hosts;
    a.send_counts = vl[r].sc;
    a.send_displs = vl[r].sd;
    a.recv_counts = vl[r].rc;
    a.recv_displs = vl[r].rd;
    ScheduleBuilder b;
    c.alg->build(a, b);
    sched.push_back(std::move(b).finish());
    std::size_t in = count, out = count;
    switch (coll) {
      case Collective::reduce_scatter: in = nn * count; break;
      case Collective::allgather: out = nn * count; break;
      case Collective::all_to_all: in = out = nn * count; break;
      case Collective::all_to_allv:
        in = vl[r].in_size;
        out = vl[r].out_size;
        if (c.in_place) in = out = std::max(in, out);  // one buffer holds both layouts
        break;
      case Collective::barrier: in = out = 0; break;
      case Collective::allreduce:
      case Collective::broadcast:
      case Collective::reduce:
      case Collective::send:
      case Collective::recv: break;
    }
    RankData<T>& d = data[r];
    d.alias = c.in_place || coll == Collective::broadcast;
    d.input.resize(in);
    for (std::size_t i = 0; i < in; ++i) d.input[i] = value<T>(kind, r, i, rng);
    d.output.assign(out, static_cast<T>(kSentinel));
    if (d.alias) d.output = (coll == Collective::broadcast && r != c.root) ? d.output : d.input;
    d.scratch.assign(sched.back().scratch_count, static_cast<T>(kSentinel + 1));
    if (races) {
      const std::string e = check_races(sched.back(), in, out, d.alias);
      if (!e.empty()) return "rank " + std::to_string(r) + ": " + e;
    }
    if (coll == Collective::broadcast && r == c.root)
      for (const Step& st : sched.back().steps)
        if ((st.kind == StepKind::recv || st.kind == StepKind::reduce || st.kind == StepKind::copy) &&
            st.dst.buffer != BufferId::scratch && st.dst.count)
          return "the broadcast root writes its buffer";
    if (coll == Collective::reduce && r != c.root)
      for (const Step& st : sched.back().steps)
        if (st.dst.buffer == BufferId::output && st.dst.count) return "a non-root reduce rank writes its output";
  }
  if (coll == Collective::barrier && n > 1)
    for (int r = 0; r < n; ++r)
      if (sched[r].steps.empty()) return "rank " + std::to_string(r) + " takes no part in the barrier";
  // The inputs as the ranks hold them before the run (the interpreter overwrites aliased ones).
  std::vector<std::vector<T>> in0;
  for (auto& d : data) in0.push_back(d.alias && coll != Collective::broadcast ? d.output : d.input);
  const std::string e = Interpreter<T>(sched, data, op).run();
  if (!e.empty()) return e;

  auto fold = [&](auto elem) {  // op over ranks, rank order, in double for the random floats
    double acc = static_cast<double>(elem(0));
    T exact = elem(0);
    for (int q = 1; q < n; ++q) {
      acc = op == Op::sum ? acc + static_cast<double>(elem(q)) : std::max(acc, static_cast<double>(elem(q)));
      exact = apply(op, exact, elem(q));
    }
    return std::make_pair(exact, acc);
  };
  auto mismatch = [&](int r, std::size_t i, double got, double want) {
    return "rank " + std::to_string(r) + " element " + std::to_string(i) + ": got " + std::to_string(got) +
           ", expected " + std::to_string(want);
  };
  auto compare = [&](int r, std::size_t i, T got, std::pair<T, double> want) -> std::string {
    if (kind == Data::exact) {
      if (got != want.first) return mismatch(r, i, got, want.first);
    } else if (std::abs(static_cast<double>(got) - want.second) > 1e-4 * (1 + std::abs(want.second))) {
      return mismatch(r, i, got, want.second);
    }
    return "";
  };
  for (int r = 0; r < n; ++r) {
    const std::vector<T>& out = data[r].output;
    for (std::size_t i = 0; i < out.size(); ++i) {
      std::pair<T, double> want{static_cast<T>(kSentinel), kSentinel};
      auto copy_of = [&](T v) { want = {v, static_cast<double>(v)}; };
      switch (coll) {
        case Collective::allreduce: want = fold([&](int q) { return in0[q][i]; }); break;
        case Collective::reduce_scatter: want = fold([&](int q) { return in0[q][r * count + i]; }); break;
        case Collective::reduce:
          if (r == c.root)
            want = fold([&](int q) { return in0[q][i]; });
          else if (c.in_place)
            copy_of(in0[r][i]);  // a non-root's buffer is its input: untouched
          break;
        case Collective::allgather: copy_of(in0[i / count][i % count]); break;
        case Collective::broadcast: copy_of(in0[c.root][i]); break;
        case Collective::all_to_all: copy_of(in0[i / count][r * count + i % count]); break;
        case Collective::all_to_allv:
          if (c.in_place) copy_of(in0[r][i]);  // gaps keep what the one buffer held
          for (int j = 0; j < n; ++j)
            if (i >= vl[r].rd[j] && i < vl[r].rd[j] + vl[r].rc[j]) copy_of(in0[j][vl[j].sd[r] + i - vl[r].rd[j]]);
          break;
        case Collective::barrier:
        case Collective::send:
        case Collective::recv: break;
      }
      if (auto m = compare(r, i, out[i], want); !m.empty()) return m;
    }
  }
  // All-reduce results must be bit-identical on every rank.
  if (coll == Collective::allreduce)
    for (int r = 1; r < n; ++r)
      if (count && std::memcmp(data[r].output.data(), data[0].output.data(), count * sizeof(T)) != 0)
        return "rank " + std::to_string(r) + " holds different bits than rank 0";
  return "";
}

const std::vector<int>& kWorldSizes = test::sweep_world_sizes();

std::vector<std::size_t> counts_for(int n) {
  std::set<std::size_t> s{0, 1, 7, static_cast<std::size_t>(n - 1), static_cast<std::size_t>(n + 1), 1001};
  return {s.begin(), s.end()};
}

std::vector<int> roots_for(Collective c, int n) {
  if (c != Collective::broadcast && c != Collective::reduce) return {0};
  std::set<int> s{0, n / 2, n - 1};
  return {s.begin(), s.end()};
}

bool reduces(Collective c) {
  return c == Collective::allreduce || c == Collective::reduce_scatter || c == Collective::reduce;
}

bool same_size(Collective c) {
  return c == Collective::allreduce || c == Collective::reduce || c == Collective::all_to_all ||
         c == Collective::all_to_allv;
}

void sweep(Collective coll) {
  int cases = 0;
  for (const algo::Algorithm& alg : algo::all_algorithms()) {
    if (alg.collective != coll) continue;
    for (int n : kWorldSizes) {
      std::vector<algo::HostGroups> layouts;
      if (reads_hosts(alg)) layouts = host_layouts(n);
      std::vector<const algo::HostGroups*> hosts{nullptr};
      for (const auto& l : layouts) hosts.push_back(&l);
      for (const algo::HostGroups* h : hosts)
        for (std::size_t count : counts_for(n))
          for (std::size_t chunk : {std::size_t{1}, std::size_t{3}, std::size_t{1} << 20})
            for (int root : roots_for(coll, n))
              for (bool in_place : {false, true}) {
                // Exact aliasing (AlgoArgs::in_place) exists where input and output have one size.
                if (in_place && !same_size(coll)) continue;
                const Case c{&alg, n, count, chunk, root, in_place, h};
                INFO(c.str());
                ++cases;
                CHECK_MESSAGE(run_case<float>(c, Op::sum, Data::exact, true) == "", "float sum");
                CHECK_MESSAGE(run_case<std::int32_t>(c, Op::max, Data::exact, false) == "", "int32 max");
                if (reduces(coll))
                  CHECK_MESSAGE(run_case<float>(c, Op::sum, Data::random, false) == "", "random float sum");
              }
    }
  }
  CHECK(cases > 0);
}

}  // namespace

TEST_CASE("schedules: allreduce") { sweep(Collective::allreduce); }
TEST_CASE("schedules: reduce_scatter") { sweep(Collective::reduce_scatter); }
TEST_CASE("schedules: allgather") { sweep(Collective::allgather); }
TEST_CASE("schedules: broadcast") { sweep(Collective::broadcast); }
TEST_CASE("schedules: reduce") { sweep(Collective::reduce); }
TEST_CASE("schedules: all_to_all") { sweep(Collective::all_to_all); }
TEST_CASE("schedules: all_to_allv") { sweep(Collective::all_to_allv); }
TEST_CASE("schedules: barrier") { sweep(Collective::barrier); }

TEST_CASE("schedules: the registry lists the required algorithms under unique names") {
  const std::vector<std::pair<Collective, const char*>> required{
      {Collective::allreduce, "ring"},          {Collective::allreduce, "tree"},
      {Collective::allreduce, "direct"},        {Collective::allreduce, "twoshot"},
      {Collective::allreduce, "recursive_doubling"}, {Collective::allreduce, "rabenseifner"},
      {Collective::reduce_scatter, "ring"},     {Collective::reduce_scatter, "direct"},
      {Collective::allgather, "ring"},          {Collective::allgather, "direct"},
      {Collective::broadcast, "tree"},          {Collective::broadcast, "scatter_allgather"},
      {Collective::reduce, "tree"},             {Collective::reduce, "direct"},
      {Collective::all_to_all, "pairwise"},     {Collective::all_to_all, "bruck"},
      {Collective::all_to_allv, "pairwise"},    {Collective::barrier, "dissemination"},
      {Collective::allreduce, "hierarchical"},  {Collective::allreduce, "hierarchical_rail"},
      {Collective::reduce_scatter, "hierarchical"}, {Collective::allgather, "hierarchical"},
      {Collective::broadcast, "hierarchical"},  {Collective::reduce, "hierarchical"}};
  for (const auto& [c, name] : required) {
    INFO(to_string(c), " ", name);
    const algo::Algorithm* a = algo::find_algorithm(c, name);
    REQUIRE(a != nullptr);
    CHECK(a->name == name);
    CHECK(a->collective == c);
    CHECK(!a->summary.empty());
  }
  CHECK(algo::all_algorithms().size() == required.size());
  CHECK(algo::find_algorithm(Collective::allreduce, "no_such_algorithm") == nullptr);
  CHECK(algo::find_algorithm(Collective::barrier, "ring") == nullptr);
}

TEST_CASE("schedules: tiny chunks give many chunks, tags stay below 2^kScheduleTagBits") {
  // n=16, a large count and chunk 1: the chunk planner must cap the chunk
  // count so that schedules stay small and tags fit (finish() checks tags).
  const algo::Algorithm* ring = algo::find_algorithm(Collective::allreduce, "ring");
  REQUIRE(ring);
  algo::AlgoArgs a;
  a.nranks = 16;
  a.rank = 5;
  a.count = std::size_t{1} << 26;
  a.chunk_elems = 1;
  ScheduleBuilder b;
  ring->build(a, b);
  const Schedule s = std::move(b).finish();
  std::size_t sends = 0;
  for (const Step& st : s.steps) {
    CHECK(st.tag < (1u << comm::kScheduleTagBits));
    sends += st.kind == StepKind::send;
  }
  CHECK(sends > 2 * 15);           // more than one chunk per step
  CHECK(sends <= 2 * 15 * 128);    // but a bounded pipeline

  // A chunk larger than any block means one message per ring step.
  a.chunk_elems = ~std::size_t{0};
  ScheduleBuilder whole;
  ring->build(a, whole);
  const Schedule w = std::move(whole).finish();
  CHECK(std::count_if(w.steps.begin(), w.steps.end(), [](const Step& st) { return st.kind == StepKind::send; }) ==
        2 * 15);
}
