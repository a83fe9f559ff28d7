#include "nccl_plan.hpp"

#include <deque>

namespace comm::nccl {

namespace {

class Planner {
 public:
  explicit Planner(const Schedule& s) : s_(s), where_(s.steps.size(), Where::none) {}

  std::vector<Wave> run() {
    for (StepId i = 0; i < s_.steps.size(); ++i) {
      // Receives this step needs are posted now (with the ones before them),
      // and a step that needs a message of the open group starts a new wave
      // (a receive too: deferred, it then waits only for completed steps).
      for (StepId d : s_.deps_of(i))
        if (where_[d] == Where::pending) post_through(d);
      if (needs_open_group(i)) close();
      const StepKind k = s_.steps[i].kind;
      if (k == StepKind::recv) {  // deferred: see close()
        pending_.push_back(i);
        where_[i] = Where::pending;
      } else if (k == StepKind::send) {
        add_message(i);
      } else {
        open_.local.push_back(i);
        where_[i] = Where::issued;
      }
    }
    while (!pending_.empty()) post_through(pending_.back());
    if (!open_.local.empty() || !open_.messages.empty()) close();
    return std::move(waves_);
  }

 private:
  enum class Where : char { none, pending, in_group, issued };

  bool needs_open_group(StepId i) const {
    for (StepId d : s_.deps_of(i))
      if (where_[d] == Where::in_group) return true;
    return false;
  }
  void add_message(StepId i) {
    open_.messages.push_back(i);
    where_[i] = Where::in_group;
    (s_.steps[i].kind == StepKind::send ? sends_ : recvs_) += 1;
  }
  // Posts pending receives in schedule order up to and including `id`.
  void post_through(StepId id) {
    while (where_[id] == Where::pending) {
      add_message(pending_.front());
      pending_.pop_front();
    }
  }
  // Closes the open wave. Receives are posted lazily (a receive posted too
  // early blocks the stream until its sender gets there), but a group takes
  // as many pending receives as it has sends beyond its receives: in a round
  // of a symmetric algorithm a rank receives as much as it sends, so the
  // peers' matching sends are in their corresponding group.
  void close() {
    while (sends_ > recvs_ && !pending_.empty()) {
      add_message(pending_.front());
      pending_.pop_front();
    }
    for (StepId m : open_.messages) where_[m] = Where::issued;
    waves_.push_back(std::move(open_));
    open_ = {};
    sends_ = recvs_ = 0;
  }

  const Schedule& s_;
  std::vector<Where> where_;
  std::deque<StepId> pending_;  // deferred receives, schedule order
  std::vector<Wave> waves_;
  Wave open_;
  std::size_t sends_ = 0, recvs_ = 0;
};

}  // namespace

std::vector<Wave> plan_waves(const Schedule& s) { return Planner(s).run(); }

}  // namespace comm::nccl
