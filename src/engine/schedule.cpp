#include <comm/error.hpp>
#include <comm/schedule.hpp>

#include <string>

namespace comm {

StepId ScheduleBuilder::add(Step s, std::span<const StepId> deps) {
  const auto id = static_cast<StepId>(steps_.size());
  for (StepId d : deps)
    if (d >= id)
      throw Error(ErrorCode::internal, "schedule step " + std::to_string(id) +
                                           " depends on step " + std::to_string(d) +
                                           ", which is not earlier");
  s.first_dep = static_cast<std::uint32_t>(deps_.size());
  s.num_deps = static_cast<std::uint32_t>(deps.size());
  deps_.insert(deps_.end(), deps.begin(), deps.end());
  steps_.push_back(s);
  return id;
}

StepId ScheduleBuilder::send(int peer, Region src, std::uint32_t tag, std::span<const StepId> deps) {
  return add({.kind = StepKind::send, .peer = peer, .tag = tag, .src = src}, deps);
}

StepId ScheduleBuilder::recv(int peer, Region dst, std::uint32_t tag, std::span<const StepId> deps) {
  return add({.kind = StepKind::recv, .peer = peer, .tag = tag, .dst = dst}, deps);
}

StepId ScheduleBuilder::reduce(Region dst, Region a, Region b, std::span<const StepId> deps) {
  return add({.kind = StepKind::reduce, .src = a, .src2 = b, .dst = dst}, deps);
}

StepId ScheduleBuilder::copy(Region dst, Region src, std::span<const StepId> deps) {
  return add({.kind = StepKind::copy, .src = src, .dst = dst}, deps);
}

void ScheduleBuilder::need_scratch(std::size_t count) {
  if (count > scratch_) scratch_ = count;
}

Schedule ScheduleBuilder::finish() && {
  Schedule out;
  const std::size_t n = steps_.size();
  for (std::size_t i = 0; i < n; ++i) {
    const Step& s = steps_[i];
    if ((s.kind == StepKind::send || s.kind == StepKind::recv) && s.tag >= (1u << kScheduleTagBits))
      throw Error(ErrorCode::internal, "schedule step " + std::to_string(i) + " has tag " +
                                           std::to_string(s.tag) + " >= 2^" + std::to_string(kScheduleTagBits));
  }
  out.dependents_begin.assign(n + 1, 0);
  for (StepId d : deps_) out.dependents_begin[d + 1]++;
  for (std::size_t i = 0; i < n; ++i) out.dependents_begin[i + 1] += out.dependents_begin[i];
  out.dependents.resize(deps_.size());
  std::vector<std::uint32_t> fill(out.dependents_begin.begin(), out.dependents_begin.end() - 1);
  for (std::size_t i = 0; i < n; ++i) {
    const Step& s = steps_[i];
    for (std::uint32_t k = 0; k < s.num_deps; ++k)
      out.dependents[fill[deps_[s.first_dep + k]]++] = static_cast<StepId>(i);
  }
  out.steps = std::move(steps_);
  out.deps = std::move(deps_);
  out.scratch_count = scratch_;
  return out;
}

}  // namespace comm
