// Building blocks shared by several algorithms that belong to no single
// collective: block layouts, ring positions and the ordered fold.

#include "algorithms/builders.hpp"

#include <bit>

#include <algorithm>

namespace comm::algo {

std::size_t BlockLayout::max_len() const {
  return len.empty() ? 0 : *std::max_element(len.begin(), len.end());
}

BlockLayout BlockLayout::balanced(std::size_t count, int n) {
  const Partition p{count, static_cast<std::size_t>(n)};
  BlockLayout L;
  for (std::size_t j = 0; j < p.parts; ++j) {
    L.in_off.push_back(p.offset(j));
    L.out_off.push_back(p.offset(j));
    L.len.push_back(p.size(j));
  }
  return L;
}

BlockLayout BlockLayout::uniform(std::size_t count, int n, bool input_strided, bool output_strided) {
  BlockLayout L;
  for (std::size_t j = 0; j < static_cast<std::size_t>(n); ++j) {
    L.in_off.push_back(input_strided ? j * count : 0);
    L.out_off.push_back(output_strided ? j * count : 0);
    L.len.push_back(count);
  }
  return L;
}

PowerOfTwoFold::PowerOfTwoFold(int rank, int n)
    : p(static_cast<int>(std::bit_floor(static_cast<unsigned>(n)))),
      m(n - p),
      rounds(std::countr_zero(static_cast<unsigned>(p))),
      folded_out(rank < 2 * m && rank % 2 == 0),
      absorbs(rank < 2 * m && rank % 2 == 1),
      virtual_rank(rank < 2 * m ? rank / 2 : rank - m) {}

bool build_trivial_reduction(const AlgoArgs& a, ScheduleBuilder& b) {
  if (a.count == 0) return true;
  if (a.nranks != 1) return false;
  b.copy(out_region(0, a.count), in_region(0, a.count));
  return true;
}

void fold_out(ScheduleBuilder& b, int rank, std::size_t count, std::uint32_t fold_tag, std::uint32_t unfold_tag) {
  const StepId sent = b.send(rank + 1, in_region(0, count), fold_tag);
  b.recv(rank + 1, out_region(0, count), unfold_tag, {sent});
}

RingView RingView::of_rank(int rank, int n) { return {rank, n, mod(rank + 1LL, n), mod(rank - 1LL, n)}; }

RingView RingView::of_order(const std::vector<int>& order, int rank) {
  const int n = static_cast<int>(order.size());
  const auto it = std::find(order.begin(), order.end(), rank);
  if (it == order.end())
    throw Error(ErrorCode::internal, "ring: rank " + std::to_string(rank) + " is not on the ring it builds");
  const int pos = static_cast<int>(it - order.begin());
  return {pos, n, order[static_cast<std::size_t>(mod(pos + 1LL, n))], order[static_cast<std::size_t>(mod(pos - 1LL, n))]};
}

std::vector<int> node_aware_order(const AlgoArgs& a) {
  std::vector<int> order;
  order.reserve(static_cast<std::size_t>(a.nranks));
  if (a.hosts && a.hosts->num_hosts() > 1)
    for (const auto& members : a.hosts->members) order.insert(order.end(), members.begin(), members.end());
  else
    for (int r = 0; r < a.nranks; ++r) order.push_back(r);
  return order;
}

HostGroups HostGroups::of(std::vector<std::vector<int>> members, int nranks) {
  HostGroups h;
  h.host_of.assign(static_cast<std::size_t>(nranks), -1);
  h.local_index.assign(static_cast<std::size_t>(nranks), -1);
  for (std::size_t g = 0; g < members.size(); ++g) {
    if (members[g].empty()) throw Error(ErrorCode::invalid_argument, "host " + std::to_string(g) + " has no ranks");
    for (std::size_t i = 0; i < members[g].size(); ++i) {
      const int r = members[g][i];
      if (r < 0 || r >= nranks || h.host_of[static_cast<std::size_t>(r)] >= 0)
        throw Error(ErrorCode::invalid_argument, "host layout: rank " + std::to_string(r) +
                                                     " is outside [0, " + std::to_string(nranks) +
                                                     ") or on two hosts");
      h.host_of[static_cast<std::size_t>(r)] = static_cast<int>(g);
      h.local_index[static_cast<std::size_t>(r)] = static_cast<int>(i);
    }
  }
  for (int r = 0; r < nranks; ++r)
    if (h.host_of[static_cast<std::size_t>(r)] < 0)
      throw Error(ErrorCode::invalid_argument, "host layout: rank " + std::to_string(r) + " is on no host");
  h.members = std::move(members);
  return h;
}

HostGroups HostGroups::single(int nranks) {
  std::vector<int> all(static_cast<std::size_t>(nranks));
  for (int r = 0; r < nranks; ++r) all[static_cast<std::size_t>(r)] = r;
  return of({std::move(all)}, nranks);
}

StepId fold_in_order(ScheduleBuilder& b, const std::vector<Region>& x, const std::vector<StepId>& x_ready,
                     Region acc, Region dst, const std::vector<StepId>& final_deps) {
  Deps last;
  for (StepId s : final_deps) last.add(s);
  if (x.size() == 1) {
    last.add(x_ready[0]);
    return b.copy(dst, x[0], last);
  }
  // Intermediate results go to `acc`, never to dst: dst may alias an operand
  // (in-place all-reduce), which must stay intact until its turn in the fold.
  const std::size_t k = x.size();
  StepId prev = kNoStep;
  Region cur = x[0];
  for (std::size_t i = 1; i + 1 < k; ++i) {
    Deps d{prev, x_ready[i]};
    if (i == 1) d.add(x_ready[0]);
    prev = b.reduce(acc, cur, x[i], d);
    cur = acc;
  }
  Deps d{prev, x_ready[k - 1]};
  if (k == 2) d.add(x_ready[0]);
  for (StepId s : final_deps) d.add(s);
  return b.reduce(dst, cur, x[k - 1], d);
}

}  // namespace comm::algo
