#include "engine/plan_cache.hpp"

#include <algorithm>

namespace comm::detail {

algo::AlgoArgs algo_args(const Call& call, int rank, int world_size, std::size_t chunk_bytes) {
  algo::AlgoArgs args;
  args.collective = call.collective;
  args.rank = rank;
  args.nranks = world_size;
  args.count = call.count;
  args.elem_size = dtype_size(call.dtype);
  args.root = call.root;
  args.chunk_elems = std::max<std::size_t>(1, chunk_bytes / args.elem_size);
  args.in_place = call.in_place();  // any other overlap the engine copies away
  args.send_counts = call.send_counts;
  args.send_displs = call.send_displs;
  args.recv_counts = call.recv_counts;
  args.recv_displs = call.recv_displs;
  return args;
}

std::shared_ptr<const Schedule> PlanCache::get(const algo::Algorithm& a, const algo::AlgoArgs& args) {
  const bool cacheable = args.collective != Collective::all_to_allv;
  const Key key{&a, args.count, args.elem_size, args.root, args.chunk_elems, args.in_place};
  if (cacheable) {
    for (auto& [k, s] : recent_)
      if (s && k == key) return s;
    if (auto it = plans_.find(key); it != plans_.end()) {
      recent_[recent_next_++ % recent_.size()] = *it;
      return it->second;
    }
  }
  algo::AlgoArgs with_hosts = args;
  if (!hosts_.members.empty()) with_hosts.hosts = &hosts_;
  ScheduleBuilder b;
  a.build(with_hosts, b);
  auto s = std::make_shared<const Schedule>(std::move(b).finish());
  if (cacheable) {
    constexpr std::size_t kMaxPlans = 512;
    if (plans_.size() >= kMaxPlans) plans_.clear();
    plans_.emplace(key, s);
    recent_[recent_next_++ % recent_.size()] = {key, s};
  }
  return s;
}

ScratchPool::Lease ScratchPool::acquire(std::size_t bytes) {
  auto best = free_.end();
  for (auto it = free_.begin(); it != free_.end(); ++it)
    if (it->size >= bytes && (best == free_.end() || it->size < best->size)) best = it;
  if (best != free_.end()) {
    Lease l = std::move(*best);
    free_.erase(best);
    return l;
  }
  return {std::make_unique<std::byte[]>(bytes), bytes};
}

void ScratchPool::release(Lease lease) noexcept {
  if (!lease.data) return;
  constexpr std::size_t kKeep = 4;
  if (free_.size() >= kKeep) {
    // Drop the smallest: large buffers are the expensive ones to fault in again.
    auto smallest = std::min_element(free_.begin(), free_.end(),
                                     [](const Lease& a, const Lease& b) { return a.size < b.size; });
    if (smallest->size >= lease.size) return;
    *smallest = std::move(lease);
    return;
  }
  free_.push_back(std::move(lease));
}

}  // namespace comm::detail
