// Discrete-event simulation of the schedules of all ranks (see cost_model.hpp).
//
// Semantics, chosen to match host transports that send eagerly:
//  - a step becomes ready when all its dependencies have finished;
//  - a send starts when it is ready and both the sender's send port and the
//    receiver's receive port are free, whether or not the receive is posted
//    yet (eager; a rendezvous model would only delay transfers whose
//    receive is posted late, which our schedules avoid by posting receives
//    early). The data arrives alpha + bytes/beta after the start, and the
//    send step finishes after bytes/beta (its buffer is free again); where
//    the link has a measured transfer curve, it stands for bytes/beta
//    (link_transfer_us);
//  - ports and compute units are granted as time goes on, never booked ahead:
//    a step that finds one busy waits until it frees (on a compute unit the
//    rank's own reduces and copies first, then the one ready first), so a
//    reduce that became ready before a transfer due later is not pushed
//    behind it (booked ahead, a two-rank tree over loopback TCP at 64 MiB was
//    predicted at 61.7 ms: every chunk's way up before any reduce; 40.3
//    granted in time, 29-32 measured);
//  - a message holds both ports for step_overhead_us + bytes/beta: the
//    per-message cost of posting and matching (LogP's gap) limits the message
//    rate of a port, so n-1 tiny messages from one rank are not free, yet an
//    isolated message still costs exactly alpha + bytes/beta;
//  - a receive finishes at max(ready, arrival);
//  - a message larger than the link's rndv_threshold_bytes arrives (and
//    frees its send buffer) rndv_extra_us later: the handshake of a
//    rendezvous protocol, which is latency, not port occupancy;
//  - reduce and copy steps run one at a time on the rank's compute unit, for
//    step_overhead_us + bytes / rate; zero-element local steps are free;
//  - on a link whose receiver copies the data (shared memory), the transfer
//    also holds the receiver's compute unit: it waits for the receiver's
//    reduce/copy steps and they wait for it;
//  - a collective whose data exceeds compute.cache_bytes uses the large-data
//    bandwidths and rates (memory-bound, not cache-bound);
//  - the whole operation costs op_overhead_us more (call set-up and wait).
// Steps ready at the same time: local steps and receives before sends, then
// round-robin over the ranks, each rank's earlier steps first, which makes
// the prediction deterministic.

#include "select/cost_model.hpp"

#include <comm/error.hpp>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <queue>
#include <string>
#include <utility>
#include <vector>

namespace comm {
namespace {

struct Ready {
  double t;
  std::uint32_t local;  // the step's index within its rank's schedule
  std::uint32_t step;   // global step index; ranks' steps are numbered consecutively
  bool transfer = false;  // a send: it yields a compute unit to local steps (Resource)
  // At the same time, local steps and receives go before sends (LocalStepsFirst);
  // then ties go round-robin over the ranks (each rank's first ready step,
  // then each one's second, ...): taking one rank's whole queue first would
  // give every receiver's port to it first (a direct exchange would then
  // serialise into n-1 rounds per rank instead of n-1 permutations).
  bool operator>(const Ready& o) const {
    if (t != o.t) return t > o.t;
    if (transfer != o.transfer) return transfer;
    return local != o.local ? local > o.local : step > o.step;
  }
};

// Microseconds to move `bytes` at `gbps` GB/s (1e9 B/s = 1e3 B/us).
double transfer_us(double bytes, double gbps) { return bytes / (std::max(gbps, 1e-12) * 1e3); }

// Network links (a NIC: tcp, ib) have ports of their own beside those of the
// links inside a host (shared memory, PCIe, NVLink): a GPU's NIC and its
// NVLinks, or a socket and a shared-memory copy, move data at the same time.
std::size_t port_class(LinkKind k) {
  switch (k) {
    case LinkKind::tcp:
    case LinkKind::ib: return 1;
    case LinkKind::self:
    case LinkKind::shm:
    case LinkKind::pcie:
    case LinkKind::nvlink:
    case LinkKind::nvswitch: return 0;
  }
  return 0;
}

// (receiver, sender, tag) in one integer: 20 bits per rank, 24 for the tag
// (schedule tags are < 2^kScheduleTagBits <= 2^24); groups are far smaller than 2^20 ranks.
static_assert(kScheduleTagBits <= 24);
std::uint64_t match_key(int receiver, int sender, std::uint32_t tag) {
  return (static_cast<std::uint64_t>(receiver) << 44) | (static_cast<std::uint64_t>(sender) << 24) | tag;
}

// Every rank's schedule for one call; steps are numbered consecutively over the ranks.
struct GroupSchedules {
  std::vector<Schedule> sched;      // per rank
  std::vector<std::uint32_t> base;  // base[r]: global index of rank r's first step; base[n]: the total
};

GroupSchedules build_schedules(const algo::Algorithm& algorithm, const algo::AlgoArgs& args) {
  const auto n = static_cast<std::size_t>(args.nranks);
  GroupSchedules g{std::vector<Schedule>(n), std::vector<std::uint32_t>(n + 1, 0)};
  for (std::size_t r = 0; r < n; ++r) {
    algo::AlgoArgs a = args;
    a.rank = static_cast<int>(r);
    ScheduleBuilder b;
    algorithm.build(a, b);
    g.sched[r] = std::move(b).finish();
    g.base[r + 1] = g.base[r] + static_cast<std::uint32_t>(g.sched[r].steps.size());
  }
  return g;
}

// Of the steps waiting for a compute unit, the rank's own reduces and copies
// go before transfers into it: the executor runs every ready local step
// before it progresses the transport again. Otherwise the one ready first.
struct LocalStepsFirst {
  bool operator()(const Ready& a, const Ready& b) const { return a.transfer != b.transfer ? a.transfer : a > b; }
};

// A port or compute unit: busy until free_at; the steps waiting for it; the
// first of them is back in the event queue (a wake) for when it frees, so
// that nothing books it ahead of time.
struct Resource {
  double free_at = 0.0;
  std::priority_queue<Ready, std::vector<Ready>, LocalStepsFirst> waiting;
  bool wake_pending = false;
};

// Receives sorted by (receiver, sender, tag), found by binary search: cheaper
// than a hash map for the ~1e5 steps of a deep pipeline.
struct RecvKey {
  std::uint64_t key;  // match_key(receiver, sender, tag)
  std::uint32_t step;
  bool operator<(const RecvKey& o) const { return key < o.key; }
};

// One run of the discrete-event simulation described at the top of this file.
class Simulation {
 public:
  Simulation(const GroupSchedules& g, const algo::AlgoArgs& args, const LinkMatrix& links,
             const ComputeParams& compute, const std::string& what)
      : g_(g), args_(args), links_(links), compute_(compute), what_(what), n_(args.nranks), total_(g.base.back()),
        // Data past the cache streams from memory: slower links and compute (see ComputeModel::cache_bytes).
        large_(compute.cache_bytes > 0 && args.count * args.elem_size > compute.cache_bytes),
        reduce_gbps_(pick(compute.reduce_gbps, compute.reduce_large_gbps)),
        copy_gbps_(pick(compute.copy_gbps, compute.copy_large_gbps)), owner_(total_), missing_(total_),
        ready_at_(total_, 0.0), arrival_(total_, -1.0), posted_(total_, -1.0), woken_by_(total_, kNotWoken),
        // A send and a receive port per rank and port class (port_class: a NIC
        // moves data beside NVLink or shared memory), then a compute unit per rank.
        resources_(5 * static_cast<std::size_t>(n_)) {}

  // When the last step finishes; throws if a send finds no receive or the schedules deadlock.
  double run() {
    index_steps();
    while (!queue_.empty()) {
      const Ready e = queue_.top();
      queue_.pop();
      const auto ru = static_cast<std::size_t>(owner_[e.step]);
      const Step& st = g_.sched[ru].steps[e.step - g_.base[ru]];
      switch (st.kind) {
        case StepKind::reduce:
        case StepKind::copy: run_local(e, st); break;
        case StepKind::send: run_send(e, st); break;
        case StepKind::recv: run_recv(e); break;
      }
    }
    if (finished_ != total_)
      throw Error(ErrorCode::internal, what_ + ": the schedules deadlock (" + std::to_string(total_ - finished_) +
                                           " of " + std::to_string(total_) +
                                           " steps never ran: a receive without a matching send, or a cycle)");
    return end_;
  }

 private:
  double pick(double normal, double big) const { return large_ && big > 0 ? big : normal; }

  static constexpr std::uint32_t kNotWoken = ~std::uint32_t{0};
  std::size_t send_port(std::size_t rank, LinkKind k) const { return 2 * rank + port_class(k); }
  std::size_t recv_port(std::size_t rank, LinkKind k) const {
    return 2 * static_cast<std::size_t>(n_) + 2 * rank + port_class(k);
  }
  std::size_t compute_unit(std::size_t rank) const { return 4 * static_cast<std::size_t>(n_) + rank; }

  // Puts the first step waiting for resource r back in the event queue for
  // when r frees, unless one is there already.
  void wake_next(std::size_t r) {
    Resource& res = resources_[r];
    if (res.wake_pending || res.waiting.empty()) return;
    Ready next = res.waiting.top();
    res.waiting.pop();
    next.t = std::max(next.t, res.free_at);
    woken_by_[next.step] = static_cast<std::uint32_t>(r);
    res.wake_pending = true;
    queue_.push(next);
  }

  // Whether step `e` may start now (at e.t) with every resource in `needed`;
  // if one is busy, `e` waits for it. The caller books them, then calls booked().
  bool acquire(const Ready& e, std::initializer_list<std::size_t> needed) {
    const std::uint32_t woken = woken_by_[e.step];
    if (woken != kNotWoken) {
      resources_[woken].wake_pending = false;
      woken_by_[e.step] = kNotWoken;
    }
    std::size_t busiest = *needed.begin();
    for (const std::size_t r : needed)
      if (resources_[r].free_at > resources_[busiest].free_at) busiest = r;
    if (resources_[busiest].free_at <= e.t) return true;
    resources_[busiest].waiting.push(e);
    wake_next(busiest);
    if (woken != kNotWoken && woken != busiest) wake_next(woken);  // free now: its next may go
    return false;
  }

  // After a step booked `needed`: their waiting steps wait for the new free times.
  void booked(std::initializer_list<std::size_t> needed) {
    for (const std::size_t r : needed) wake_next(r);
  }

  // Owners and dependency counts of all steps, the steps ready at time 0, and the sorted receives.
  void index_steps() {
    for (int r = 0; r < n_; ++r) {
      const Schedule& s = g_.sched[static_cast<std::size_t>(r)];
      for (std::size_t i = 0; i < s.steps.size(); ++i) {
        const std::uint32_t g = g_.base[static_cast<std::size_t>(r)] + static_cast<std::uint32_t>(i);
        owner_[g] = r;
        missing_[g] = s.steps[i].num_deps;
        if (missing_[g] == 0) queue_.push({0.0, static_cast<std::uint32_t>(i), g, s.steps[i].kind == StepKind::send});
        const Step& st = s.steps[i];
        if ((st.kind == StepKind::send || st.kind == StepKind::recv) && (st.peer < 0 || st.peer >= n_))
          throw Error(ErrorCode::internal, what_ + ": rank " + std::to_string(r) + " step " + std::to_string(i) +
                                               " names peer " + std::to_string(st.peer) + ", outside the group");
        if (st.kind == StepKind::recv) recvs_.push_back({match_key(r, st.peer, st.tag), g});
      }
    }
    std::sort(recvs_.begin(), recvs_.end());
    for (std::size_t i = 1; i < recvs_.size(); ++i)
      if (recvs_[i].key == recvs_[i - 1].key) {
        const std::uint64_t k = recvs_[i].key;
        throw Error(ErrorCode::internal, what_ + ": rank " + std::to_string(k >> 44) +
                                             " posts two receives from rank " + std::to_string((k >> 24) & 0xfffff) +
                                             " with tag " + std::to_string(k & 0xffffff));
      }
    matched_.assign(recvs_.size(), false);
  }

  void finish(std::uint32_t g, double t) {
    ++finished_;
    end_ = std::max(end_, t);
    const auto ru = static_cast<std::size_t>(owner_[g]);
    for (StepId d : g_.sched[ru].dependents_of(g - g_.base[ru])) {
      const std::uint32_t dg = g_.base[ru] + d;
      ready_at_[dg] = std::max(ready_at_[dg], t);
      if (--missing_[dg] == 0) queue_.push({ready_at_[dg], d, dg, g_.sched[ru].steps[d].kind == StepKind::send});
    }
  }

  // A reduce or copy: one at a time on the rank's compute unit.
  void run_local(const Ready& e, const Step& st) {
    if (st.dst.count == 0) {
      finish(e.step, e.t);
      return;
    }
    const std::size_t cpu = compute_unit(static_cast<std::size_t>(owner_[e.step]));
    if (!acquire(e, {cpu})) return;
    const double bytes = static_cast<double>(st.dst.count * args_.elem_size);
    const double rate = st.kind == StepKind::reduce ? reduce_gbps_ : copy_gbps_;
    const double end = e.t + compute_.step_overhead_us + transfer_us(bytes, rate);
    resources_[cpu].free_at = end;
    booked({cpu});
    finish(e.step, end);
  }

  // The global index of the receive that matches rank r's send step `st`; throws if there is none left.
  std::uint32_t match_receive(int r, const Step& st) {
    const std::uint64_t key = match_key(st.peer, r, st.tag);
    const auto it = std::lower_bound(recvs_.begin(), recvs_.end(), RecvKey{key, 0});
    const auto idx = static_cast<std::size_t>(it - recvs_.begin());
    if (it == recvs_.end() || it->key != key || matched_[idx])
      throw Error(ErrorCode::internal, what_ + ": rank " + std::to_string(r) + " sends tag " +
                                           std::to_string(st.tag) + " to rank " + std::to_string(st.peer) +
                                           ", which posts no matching receive");
    matched_[idx] = true;
    return it->step;
  }

  void run_send(const Ready& e, const Step& st) {
    const int r = owner_[e.step];
    const auto ru = static_cast<std::size_t>(r);
    const auto pu = static_cast<std::size_t>(st.peer);
    const LinkInfo& link = links_.at(r, st.peer);
    const std::size_t bytes = st.src.count * args_.elem_size;
    const double xfer = link_transfer_us(link, bytes, large_);
    // A rendezvous handshake delays the data, not the ports: a rank keeps
    // posting other messages meanwhile.
    const double handshake = bytes > link.rndv_threshold_bytes ? link.rndv_extra_us : 0.0;
    // A receiver that copies the data itself cannot reduce meanwhile (its
    // compute unit is needed; without it the send port stands in twice).
    const std::size_t sp = send_port(ru, link.kind), rp = recv_port(pu, link.kind);
    const std::size_t cpu = link.receiver_copies ? compute_unit(pu) : sp;
    if (!acquire(e, {sp, rp, cpu})) return;
    const double start = e.t;
    resources_[sp].free_at = resources_[rp].free_at = start + compute_.step_overhead_us + xfer;
    if (link.receiver_copies) resources_[cpu].free_at = start + handshake + xfer;
    booked({sp, rp, cpu});
    const double arrive = start + link.alpha_us + handshake + xfer;
    const std::uint32_t rg = match_receive(r, st);
    finish(e.step, start + handshake + xfer);
    if (posted_[rg] >= 0)
      finish(rg, std::max(posted_[rg], arrive));
    else
      arrival_[rg] = arrive;
  }

  void run_recv(const Ready& e) {
    if (arrival_[e.step] >= 0)
      finish(e.step, std::max(e.t, arrival_[e.step]));
    else
      posted_[e.step] = e.t;
  }

  const GroupSchedules& g_;
  const algo::AlgoArgs& args_;
  const LinkMatrix& links_;
  const ComputeParams& compute_;
  const std::string& what_;
  const int n_;
  const std::size_t total_;
  const bool large_;
  const double reduce_gbps_, copy_gbps_;
  std::vector<int> owner_;
  std::vector<std::uint32_t> missing_;
  std::vector<double> ready_at_;
  std::vector<double> arrival_;  // recv: when its message arrived (-1: not yet)
  std::vector<double> posted_;   // recv: when it became ready (-1: not yet)
  std::vector<std::uint32_t> woken_by_;  // the resource whose wake a queued step is (kNotWoken: none)
  std::vector<RecvKey> recvs_;
  std::vector<bool> matched_;
  std::priority_queue<Ready, std::vector<Ready>, std::greater<>> queue_;
  std::vector<Resource> resources_;
  std::size_t finished_ = 0;
  double end_ = 0.0;
};

}  // namespace

double link_transfer_us(const LinkInfo& link, std::size_t bytes, bool from_memory) {
  const auto b = static_cast<double>(bytes);
  if (from_memory && link.beta_large_gbps > 0) return transfer_us(b, link.beta_large_gbps);
  const auto& curve = link.transfer_curve;
  if (curve.empty()) return transfer_us(b, link.beta_gbps);
  const auto above = std::lower_bound(curve.begin(), curve.end(), bytes,
                                      [](const auto& point, std::size_t n) { return point.first < n; });
  if (above == curve.end()) return curve.back().second + transfer_us(b - static_cast<double>(curve.back().first),
                                                                     link.beta_gbps);
  const auto [lo_bytes, lo_us] = above == curve.begin() ? std::pair<std::size_t, double>{0, 0.0} : *(above - 1);
  const double f = static_cast<double>(bytes - lo_bytes) / static_cast<double>(above->first - lo_bytes);
  return lo_us + f * (above->second - lo_us);
}

double predict_us(const algo::Algorithm& algorithm, const algo::AlgoArgs& args, const LinkMatrix& links,
                  const ComputeParams& compute) {
  const int n = args.nranks;
  const std::string what = "cost model for " + std::string(to_string(algorithm.collective)) + " '" +
                           std::string(algorithm.name) + "' on " + std::to_string(n) + " ranks";
  if (n < 1 || links.n != n || links.links.size() != static_cast<std::size_t>(n) * n)
    throw Error(ErrorCode::invalid_argument, what + ": the link matrix is for " + std::to_string(links.n) +
                                                 " ranks; pass an n x n matrix for the group");
  const GroupSchedules schedules = build_schedules(algorithm, args);
  if (schedules.base.back() == 0) return 0.0;
  return compute.op_overhead_us + Simulation(schedules, args, links, compute, what).run();
}

std::size_t busiest_sends(const algo::Algorithm& algorithm, const algo::AlgoArgs& args) {
  std::size_t most = 0;
  for (const Schedule& schedule : build_schedules(algorithm, args).sched)
    most = std::max<std::size_t>(most, std::count_if(schedule.steps.begin(), schedule.steps.end(),
                                                     [](const Step& s) { return s.kind == StepKind::send; }));
  return most;
}

ComputeParams default_compute(const TransportCaps& caps) {
  ComputeParams compute{};
  if (caps.cuda_memory && !caps.host_memory) {
    compute.reduce_gbps = 1000;
    compute.copy_gbps = 1000;
    compute.step_overhead_us = 4;
  }
  return compute;
}

}  // namespace comm
