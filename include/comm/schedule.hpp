#pragma once
/// \file schedule.hpp
/// Schedules: what an algorithm produces and what executors and the cost model
/// consume. A schedule is one rank's DAG of point-to-point and local steps over
/// three buffers (the caller's input, the caller's output, and scratch the
/// executor allocates). Offsets and counts are in elements of the call's dtype.
/// Public because stream-ordered transports (NCCL) run schedules themselves.

#include <comm/export.hpp>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

namespace comm {

/// Step tags are below 2^kScheduleTagBits; the core puts the operation's
/// kind, call signature and sequence number above them.
inline constexpr int kScheduleTagBits = 16;

enum class BufferId : std::uint8_t { input, output, scratch };

/// `count` elements starting at element `offset` of `buffer`.
struct Region {
  BufferId buffer = BufferId::input;
  std::size_t offset = 0;
  std::size_t count = 0;
};

enum class StepKind : std::uint8_t {
  send,    ///< send `src` to `peer` with `tag`
  recv,    ///< receive from `peer` with `tag` into `dst` (exactly dst.count elements)
  reduce,  ///< dst = src (op) src2, elementwise; dst may alias src or src2 exactly
  copy,    ///< dst = src
};

using StepId = std::uint32_t;

struct Step {
  StepKind kind = StepKind::copy;
  int peer = -1;            ///< send/recv only
  std::uint32_t tag = 0;    ///< send/recv only; < 2^kScheduleTagBits; unique per (direction, peer) within one schedule
  Region src{};
  Region src2{};
  Region dst{};
  std::uint32_t first_dep = 0;  ///< index into Schedule::deps
  std::uint32_t num_deps = 0;
};

/// One rank's schedule, finalised (dependents computed) and immutable.
struct COMM_API Schedule {
  std::vector<Step> steps;
  std::vector<StepId> deps;            ///< concatenated dependency lists
  std::vector<std::uint32_t> dependents_begin;  ///< size steps+1, CSR into dependents
  std::vector<StepId> dependents;
  std::size_t scratch_count = 0;       ///< elements of scratch the executor must provide

  std::span<const StepId> deps_of(StepId s) const {
    return {deps.data() + steps[s].first_dep, steps[s].num_deps};
  }
  std::span<const StepId> dependents_of(StepId s) const {
    return {dependents.data() + dependents_begin[s], dependents_begin[s + 1] - dependents_begin[s]};
  }
};

/// Builds a Schedule. Dependencies must name earlier steps. Steps with a zero
/// count are legal and complete immediately (sends/recvs of zero elements are
/// still exchanged so both sides agree).
class COMM_API ScheduleBuilder {
 public:
  StepId send(int peer, Region src, std::uint32_t tag, std::span<const StepId> deps = {});
  StepId recv(int peer, Region dst, std::uint32_t tag, std::span<const StepId> deps = {});
  StepId reduce(Region dst, Region a, Region b, std::span<const StepId> deps = {});
  StepId copy(Region dst, Region src, std::span<const StepId> deps = {});
  StepId send(int peer, Region src, std::uint32_t tag, std::initializer_list<StepId> deps) {
    return send(peer, src, tag, std::span<const StepId>(deps.begin(), deps.size()));
  }
  StepId recv(int peer, Region dst, std::uint32_t tag, std::initializer_list<StepId> deps) {
    return recv(peer, dst, tag, std::span<const StepId>(deps.begin(), deps.size()));
  }
  StepId reduce(Region dst, Region a, Region b, std::initializer_list<StepId> deps) {
    return reduce(dst, a, b, std::span<const StepId>(deps.begin(), deps.size()));
  }
  StepId copy(Region dst, Region src, std::initializer_list<StepId> deps) {
    return copy(dst, src, std::span<const StepId>(deps.begin(), deps.size()));
  }
  /// Requests at least `count` elements of scratch.
  void need_scratch(std::size_t count);
  std::size_t size() const noexcept { return steps_.size(); }
  /// Validates (deps point backwards, tags in range) and computes dependents.
  Schedule finish() &&;

 private:
  StepId add(Step s, std::span<const StepId> deps);
  std::vector<Step> steps_;
  std::vector<StepId> deps_;
  std::size_t scratch_ = 0;
};

}  // namespace comm
