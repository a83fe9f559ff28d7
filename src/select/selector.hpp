#pragma once
// Chooses an algorithm per (collective, message size). Order of authority:
// a per-call name (checked by the communicator), then the override rules
// (COMM_ALGO), then the cost model. The cost model's choice is made per
// power-of-two size bucket [2^b, 2^(b+1)), evaluated at 2^b, lazily on first
// use, and cached. Inputs are identical on every rank (the link matrix is
// exchanged at creation), so every rank chooses identically.
//
// "Message size" is the larger of the per-rank input and output buffers in
// bytes (allreduce: the buffer; allgather: the gathered output; reduce_scatter
// and all_to_all: the whole input).

#include "algorithms/algorithm.hpp"
#include "select/cost_model.hpp"
#include "select/native_profile.hpp"
#include "select/override_parser.hpp"

#include <comm/communicator.hpp>

#include <array>
#include <bit>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace comm {

// Algorithms an engine other than the schedule executor offers by name, with
// the cost model's prediction for each (the direct-memory engine).
class AlgorithmOffer {
 public:
  virtual ~AlgorithmOffer() = default;
  virtual std::vector<std::string> algorithms(Collective c) const = 0;
  // Predicted microseconds for a message of `bytes` (see "message size" above); negative: cannot run it.
  virtual double predict_us(Collective c, std::string_view name, std::size_t bytes,
                            const ComputeParams& compute) const = 0;
  // Why `name` cannot run at any size on this communicator (for comm-info's notes
  // and errors), or "" when it can at some.
  virtual std::string unavailable(Collective c, std::string_view name) const = 0;
};

class Selector {
 public:
  // `schedules_runnable` false: the transport runs only its native collectives
  // (a stream-ordered transport built without its stream engine).
  // `direct`: the direct-memory engine's algorithms, when the transport offers peer memory.
  // `hosts`: the group's hosts (hierarchical algorithms and node-aware rings
  // are modelled on them); empty = every rank on one host.
  Selector(int nranks, LinkMatrix links, ComputeParams compute, std::size_t chunk_bytes,
           std::vector<OverrideRule> overrides, NativeCollectives* native, bool schedules_runnable = true,
           const AlgorithmOffer* direct = nullptr, algo::HostGroups hosts = {});

  // Algorithm names that exist for `c` (ours, the direct engine's, then the
  // transport's native ones). They, and the name choose() returns, live as
  // long as the lists name_lists() shares.
  const std::vector<std::string>& names(Collective c) const { return *per_coll_[index(c)].names; }
  // The names of every collective, shared: a communicator that replaces its
  // selector (calibration) hands the new one the old one's lists
  // (share_names), so the names its flight records, pooled operations and
  // engines hold stay valid and the same addresses.
  using NameLists = std::array<std::vector<std::string>, std::size(kAllCollectives)>;
  std::shared_ptr<const NameLists> name_lists() const noexcept { return names_; }
  // Takes `names` (equal to this selector's own; throws internal if not) in place of its own.
  void share_names(std::shared_ptr<const NameLists> names);
  bool is_native(Collective c, std::string_view name) const;
  // Why the direct engine's `name` cannot run here at any size ("" if it can, or is not its).
  std::string why_not(Collective c, std::string_view name) const {
    return direct_ ? direct_->unavailable(c, name) : std::string();
  }
  bool is_direct(Collective c, std::string_view name) const;

  // The algorithm to run for `bytes` of `c` and why ("override" or "cost model").
  const std::string& choose(Collective c, std::size_t bytes, const char** source = nullptr);

  std::vector<CandidateCost> candidates(Collective c, std::size_t bytes);
  std::vector<SelectionRange> table(Collective c, std::size_t max_bytes);

  // Predicted time of `name` for `bytes` (negative if it has no prediction).
  double predict(Collective c, std::string_view name, std::size_t bytes) const;

  // The size bucket of `bytes`: b for [2^b, 2^(b+1)), 0 also for 0 bytes.
  static int bucket_of(std::size_t bytes) {
    return bytes == 0 ? 0 : static_cast<int>(std::bit_width(bytes)) - 1;
  }

  // Measured times of the native algorithms (calibration or tuning file):
  // they predict those algorithms from now on, so the cost model can choose
  // them. Clears the cached choices.
  void set_native_profile(NativeProfile profile);

  // Measured times of our own algorithms (schedules and direct-memory) at a
  // ladder of sizes (calibration or tuning file): from now on the cost model's
  // prediction of such an algorithm is scaled by measured / predicted at the
  // ladder sizes, interpolated in log(size) between them and held beyond
  // them. The model keeps the shape (chunking, cache regimes, ranks), the
  // measurement sets the level. An algorithm measured over fewer sizes than
  // others (calibration times only the contenders at the ends) takes their
  // median change of ratio beyond its own outermost sizes (upwards from each
  // size measured to the next); there it is
  // extrapolated, and auto picks it over the best measured one only if it is
  // predicted kExtrapolatedMargin times faster. Where an algorithm that moves
  // the data alike (moves_alike) was measured at both ends, it takes that
  // one's change instead. Clears the cached choices.
  void set_measured_profile(const NativeProfile& measured);
  // How much faster than the best measured algorithm an extrapolated one
  // must be predicted to be picked.
  static constexpr double kExtrapolatedMargin = 1.3;
  // The model's own prediction, without the measured correction.
  double predict_model(Collective c, std::string_view name, std::size_t bytes) const;
  // How an algorithm moves the data at some sizes, size by size: its bare
  // model (predict_model) and the number of messages its busiest rank sends
  // (0 for algorithms without a schedule).
  struct Movement {
    std::vector<double> us;
    std::vector<std::size_t> sends;
  };
  Movement movement(Collective c, std::string_view name, std::initializer_list<std::size_t> sizes) const;
  // Whether two algorithms' movements (at the same sizes, in the same order)
  // have bare models within kSameMovement of each other and send messages
  // within kSameCut as many at every one of those sizes: they move the data
  // alike there (on 2 ranks ring, twoshot, rabenseifner and hierarchical_rail
  // all exchange halves; tree and hierarchical send the whole message up and
  // back). One size is not enough: on 2 TCP ranks tree and twoshot are
  // modelled 0.04 % apart at 8 MiB and 1.95x apart at 1 MiB. The model alone
  // is not enough either: past the chunk size ring cuts each half into
  // chunks and twoshot sends it whole, which the model calls equally fast,
  // and from memory the clock did not: over ofi shm at 32 MiB ring took
  // 1.4-1.6x twoshot's time (1 MiB chunks; 16 MiB ones: 1.0x), over UCX shm
  // 0.85x. At 8 MiB (four chunks a half) they measured within the noise of
  // single calls of each other (1.0-1.3x), so within kSameCut they still
  // count as alike: with kSameCut 2 the split reached 8 MiB, and Gloo's
  // twoshot, timed at neither 8 nor 32 MiB, was predicted at 2.2-2.8x its
  // time from 8 MiB on (select/timing_plan.cpp places the contenders).
  static constexpr double kSameMovement = 1.005;
  static constexpr std::size_t kSameCut = 4;
  static bool moves_alike(const Movement& a, const Movement& b);
  // The first half of moves_alike: bare models within kSameMovement.
  static bool modelled_alike(const std::vector<double>& bare_a, const std::vector<double>& bare_b);

  // Deterministic mode: only algorithms whose reduction order is the rank
  // order at every size (determinism.hpp) are chosen; override rules naming
  // another are invalid_config errors (thrown here). Clears cached choices.
  void set_deterministic(bool on);
  bool deterministic_mode() const { return deterministic_; }
  // Whether `name` qualifies for deterministic mode on this group.
  bool deterministic(Collective c, std::string_view name) const;
  // Throws invalid_argument if deterministic mode is on and `name` does not qualify.
  void check_deterministic(Collective c, std::string_view name) const;

  const LinkMatrix& links() const { return links_; }
  const algo::HostGroups& hosts() const { return hosts_; }
  const ComputeParams& compute() const { return compute_; }

 private:
  struct PerCollective {
    const std::vector<std::string>* names = nullptr;  // in names_
    std::vector<const algo::Algorithm*> ours;  // parallel to names; nullptr = native or direct
    std::vector<bool> direct;                  // parallel to names: the direct engine's
    std::array<int, 65> bucket_choice;         // index into names, -1 = not evaluated
    mutable std::vector<signed char> rank_ordered;  // parallel to names: -1 not computed yet, 0, 1
    // (index into names, bytes) -> the schedule's bare model (predict_model).
    mutable std::map<std::pair<std::size_t, std::size_t>, double> modelled;
    // (index into names, bytes) -> messages the schedule's busiest rank sends.
    mutable std::map<std::pair<std::size_t, std::size_t>, std::size_t> sends;
    // Parallel to names: the smallest and largest size the measured profile
    // has for ours and the direct engine's (empty, first > second: none).
    std::vector<std::pair<std::size_t, std::size_t>> measured_sizes;
    std::pair<std::size_t, std::size_t> measured_span{SIZE_MAX, 0};  // over all of them
  };
  // Whether names[i]'s prediction at `bytes` rests on its own measurements:
  // native algorithms always; ours between their outermost measured sizes,
  // and beyond the collective's outermost ones if measured there too.
  bool measured_at(const PerCollective& pc, std::size_t i, std::size_t bytes) const;
  static std::size_t index(Collective c) { return static_cast<std::size_t>(c); }
  algo::AlgoArgs model_args(Collective c, std::size_t bytes) const;
  int evaluate(Collective c, std::size_t bytes) const;
  double predict_native(Collective c, std::string_view name, std::size_t bytes) const;
  bool ordered(Collective c, std::size_t i) const;  // names[i] qualifies (cached)
  std::string qualifying(Collective c) const;       // "a, b" or "none"
  const OverrideRule* override_for(Collective c, std::size_t bytes) const;

  int nranks_;
  LinkMatrix links_;
  algo::HostGroups hosts_;
  ComputeParams compute_;
  std::size_t chunk_bytes_;
  std::vector<OverrideRule> overrides_;
  NativeCollectives* native_;
  NativeProfile native_profile_;
  // Per algorithm: (ladder bytes, measured / modelled), increasing bytes.
  NativeProfile corrections_;
  void extend_corrections();
  NativeProfile untimed_corrections() const;
  NativeProfile fill_between() const;  // points to add inside each curve's own span
  double bend_at(const NativeCurve& curve, const std::vector<std::pair<std::size_t, double>>& ends,
                 std::size_t m) const;
  // predict() as `points` (bytes, measured / modelled) correct the model.
  double corrected_us(Collective c, std::string_view name, const std::vector<std::pair<std::size_t, double>>& points,
                      std::size_t bytes) const;
  bool deterministic_ = false;
  const AlgorithmOffer* direct_;
  std::shared_ptr<const NameLists> names_;
  std::array<PerCollective, std::size(kAllCollectives)> per_coll_;
  mutable std::vector<std::size_t> uniform_counts_, uniform_displs_;  // all_to_allv modelling
};

}  // namespace comm
