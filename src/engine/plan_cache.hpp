#pragma once
// Plans (schedules built once per algorithm and shape, then reused) and the
// scratch memory schedules run with. Decode loops repeat a few sizes, so the
// hot path of a small collective is a hit in the recent-plans array.

#include "algorithms/algorithm.hpp"
#include "engine/operation.hpp"

#include <comm/schedule.hpp>

#include <array>
#include <cstddef>
#include <map>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

namespace comm::detail {

// The algorithm's view of a call (algorithms/algorithm.hpp conventions).
algo::AlgoArgs algo_args(const Call& call, int rank, int world_size, std::size_t chunk_bytes);

class PlanCache {
 public:
  // The schedule of `a` for `args`, built on first use, over the hosts set
  // below (args.hosts is filled in). all_to_allv plans depend on the counts
  // and are never cached.
  std::shared_ptr<const Schedule> get(const algo::Algorithm& a, const algo::AlgoArgs& args);
  // The communicator's hosts (fixed for its life, so not part of the key).
  void set_hosts(algo::HostGroups hosts) { hosts_ = std::move(hosts); }
  const algo::HostGroups& hosts() const noexcept { return hosts_; }

 private:
  algo::HostGroups hosts_;
  using Key = std::tuple<const algo::Algorithm*, std::size_t, std::size_t, int, std::size_t, bool>;
  std::map<Key, std::shared_ptr<const Schedule>> plans_;
  std::array<std::pair<Key, std::shared_ptr<const Schedule>>, 4> recent_{};
  std::size_t recent_next_ = 0;
};

// Scratch memory reused across operations (page faults on fresh large
// buffers would otherwise dominate large collectives).
class ScratchPool {
 public:
  struct Lease {
    std::unique_ptr<std::byte[]> data;
    std::size_t size = 0;
  };
  Lease acquire(std::size_t bytes);
  void release(Lease lease) noexcept;

 private:
  std::vector<Lease> free_;
};

}  // namespace comm::detail
