#pragma once
// The communicator's private state. communicator.cpp creates it (store
// namespace, peer table, transport, links, selector, engines) and splits it;
// operations.cpp runs calls through the engines (numbering, progress,
// waiting, deadlines, stalls, failure); communicator_api.cpp validates the
// public calls and turns each into a Call; diag/diagnostics.cpp holds the
// consistency check and flight-recorder dumps.

#include "diag/flight_recorder.hpp"
#include "core/peer_notes.hpp"
#include "engine/direct/direct_run.hpp"
#include "engine/engine.hpp"
#include "select/selector.hpp"
#include "util/log.hpp"

#include <comm/communicator.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace comm::calib {
class Scratch;  // select/calibration_measure.hpp
}  // namespace comm::calib

namespace comm {
struct CacheCheck;  // select/tuning.hpp
}
namespace comm::direct {
class DirectEngine;
struct DirectAlgorithm;
}

namespace comm::detail {

void register_live(const CommunicatorImpl* c);
void unregister_live(const CommunicatorImpl* c) noexcept;

class CommunicatorImpl {
 public:
  static std::unique_ptr<CommunicatorImpl> create(const Config& config, std::shared_ptr<Store> base);
  // Where a communicator's ranks sit in the store they bootstrapped from:
  // `root` is that store, root_ranks[r] the store-client rank of rank r
  // (split keeps the mapping, so a death the store records is named right).
  struct Lineage {
    std::shared_ptr<Store> root;
    std::vector<int> root_ranks;
  };
  static std::unique_ptr<CommunicatorImpl> create(const Config& config, std::shared_ptr<Store> base, Lineage lineage);
  ~CommunicatorImpl();

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  const Config& config() const noexcept { return config_; }
  Transport& transport() noexcept { return *transport_; }
  const PeerTable& peers() const noexcept { return *peers_; }
  Selector& selector() noexcept { return *selector_; }
  const LinkMatrix& links() const noexcept { return selector_->links(); }
  const std::shared_ptr<Store>& store() const noexcept { return store_; }
  // Payload bytes this rank's schedules and sends have sent to each peer.
  const std::vector<std::uint64_t>& bytes_sent() const noexcept { return bytes_sent_; }

  std::shared_ptr<Operation> start(const Call& call);
  // A blocking all-reduce that repeats the last one (core/repeat_allreduce.cpp):
  // runs it and returns true, or returns false for start() to take it.
  bool repeat_allreduce(const void* in, void* out, std::size_t count, DataType dtype, ReduceOp op,
                        const CallOptions& opts);
  // Progresses until `op` is no longer running or `limit` passes; throws the
  // operation's error if it failed. Returns true if it completed.
  bool wait(Operation& op, std::optional<Clock::time_point> limit = std::nullopt);
  bool test(Operation& op);

  void abort() noexcept;
  bool failed() const noexcept { return failed_.load(std::memory_order_acquire); }
  bool aborted() const noexcept { return aborted_.load(std::memory_order_acquire); }
  std::unique_ptr<CommunicatorImpl> split(int color, int key);
  // The flight recorder as JSON; `reason` says why it is dumped.
  std::string flight_recorder_json(const std::string& reason = "request") const;
  // Writes the dump to Config::dump_dir (if set) or stderr; never throws.
  void dump_flight_recorder(const std::string& reason) const noexcept;

  // Resolves the algorithm name a call will run (per-call name, override, cost model).
  std::string_view resolve_algorithm(const Call& call);
  // This communicator's log context (level, subsystems, file, rank).
  const log::Context& log_context() const noexcept { return *log_; }

 private:
  CommunicatorImpl() = default;
  std::string connect();  // returns where the link figures came from
  [[noreturn]] void creation_failed(const std::exception& e);
  void create_engines();
  void create_selector(const LinkMatrix& links, const ComputeParams& compute, NativeProfile native,
                       const std::vector<OverrideRule>& overrides);
  // Times comm's own all-reduce algorithms through the engines (start-up
  // calibration, select/tuning.hpp AlgorithmTimer) within what
  // `calibration_elapsed_us` leaves of the calibration's target
  // (select/timing_plan.hpp), its calls' buffers in `scratch`; collective.
  // `native`: the transport's own algorithms' calibrated curves, which gain
  // a point where time_native_choice times one.
  NativeProfile time_algorithms(double calibration_elapsed_us, calib::Scratch& scratch, NativeProfile& native);
  // Where the corrected model, `measured` set, would choose one of the
  // transport's own algorithms at `bytes` past the end of its calibrated
  // curve, times that algorithm there (one untimed call, one timed), adds the
  // point to its curve in `native` and to the selector's, and looks again;
  // not where the calibration, `so_far_us` into it, would pass
  // kCalibrationCapUs by the estimate. Returns the time it took (the slowest
  // rank's). Collective.
  double time_native_choice(std::size_t bytes, NativeProfile& native, const NativeProfile& measured,
                            calib::Scratch& scratch, double so_far_us);
  // Times single (algorithm, size) all-reduce points the same way: the
  // check of a cached tuning (select/tuning.hpp PointTimer, which says which
  // of `checks` it times); collective.
  std::vector<double> time_points(const std::vector<CacheCheck>& checks);
  std::vector<bool> points_to_check(const std::vector<CacheCheck>& checks) const;
  // One size of time_algorithms: the windows touched (quiesce_windows) once
  // or per direct-memory turn, `warmup` untimed rounds, then timed ones
  // while the size has spent less than `budget_us` on every rank, at least
  // `min_rounds` (`iterations`); this rank's times per candidate. A
  // candidate refused at this size becomes names.size().
  std::vector<std::vector<double>> time_rounds(const std::vector<std::string>& names,
                                               std::vector<std::size_t>& candidates, Call& call, int warmup,
                                               int min_rounds, double budget_us, int& iterations);
  void slowest_rank(std::vector<double>& times);
  // slowest_rank over `times` and what the work since `began` took, in one
  // exchange; returns that time (the slowest rank's), `times` as they were
  // but each the slowest rank's.
  double slowest_rank_took(std::vector<double>& times, std::chrono::steady_clock::time_point began);
  // What every rank plans time_algorithms with, by the slowest rank's clock:
  // the time calibration took before it (`calibration_elapsed_us` here) and
  // one barrier's time (select/timing_plan.hpp TimingCost::sync_us, the
  // median of a few); collective.
  std::pair<double, double> timing_start(double calibration_elapsed_us);
  // Before timing a size over the direct engine: once every rank is here no
  // peer still reads this rank's window (a peer may read it after this rank
  // returned from a call), so its data region is written afresh
  // (DirectEngine::touch_windows), then read by the peers
  // (read_peer_windows), as back-to-back calls leave it. Collective; nothing
  // without the engine.
  void quiesce_windows();
  void log_choices(std::string_view transport_why, std::string_view tuning) const;
  void log_choice(const Operation& op, const Call& call);
  Engine& engine_for(const Call& call, std::string_view algorithm);
  // resolve_algorithm and engine_for for a collective, answered from that
  // collective's last call when this one repeats it (what they answer is
  // fixed for the communicator's life: a decode loop that alternates
  // collectives pays for them once per collective).
  std::pair<std::string_view, Engine*> resolve(const Call& call);
  void check_usable() const;
  void check_memory(const Call& call) const;
  bool progress_all();
  // Fails every running operation; `cause` is the rank blamed (-1: none).
  void fail_all(ErrorCode code, const std::string& message, Operation* culprit, int cause = -1) noexcept;
  void check_deadlines(Clock::time_point now);  // and check_local_peers
  void check_local_peers(Clock::time_point now);
  // For a timed-out op: text naming the ranks that hold it up, and the one to blame (-1: none).
  std::pair<std::string, int> explain_timeout(const Operation& op, const std::vector<int>& peers);
  void diagnose_stall(Operation& op);
  void fail_from_run(Operation& op);
  // An engine's start() threw for `op`: records and fails it (and, unless it
  // was a usage error, the communicator), then throws the error it now has.
  [[noreturn]] void fail_started(Operation& op, const Error& e);
  void arm_repeat(const Call& call, const Operation& op);
  void note_repeat(OpState state);
  // Fails `op` (and every other) for a failure seen through `peer`, naming
  // whom the store says is to blame (see fail_from_run).
  void fail_through(Operation& op, ErrorCode code, std::string message, int peer);
  void fail_blaming(Operation& op, ErrorCode code, std::string message, int peer, Culprit c);
  int name_cause(std::string& message, std::chrono::milliseconds budget);
  void remember_call(const Operation& op);
  void record_posted(const Operation& op, OpState state = OpState::posted);  // its flight record
  void check_consistency(const Call& call, std::string_view algorithm);
  std::shared_ptr<Operation> acquire_operation();
  std::shared_ptr<Operation> run_internal(Collective c, const void* in, void* out, std::size_t count,
                                          DataType dtype);

  Config config_;
  std::shared_ptr<const log::Context> log_;
  int rank_ = 0;
  int size_ = 1;
  std::shared_ptr<Store> base_store_;
  std::shared_ptr<Store> plain_store_;  // this communicator's namespace
  std::shared_ptr<Store> store_;        // the same, with watchful waits (core/watchful_store.hpp)
  Lineage lineage_;
  std::shared_ptr<const PeerTable> peers_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<Selector> selector_;
  PlanCache plans_;
  // Created once from what the transport offers; null when not offered.
  std::unique_ptr<Engine> schedule_engine_;  // host executor or stream engine
  std::unique_ptr<Engine> native_engine_;
  std::unique_ptr<direct::DirectEngine> direct_engine_;  // peer memory, when offered
  struct Resolved {
    std::size_t bytes = 0;
    std::string asked;  // CallOptions::algorithm ("" or "auto": the selector's choice)
    std::string_view algorithm;
    Engine* engine = nullptr;
  };
  std::array<Resolved, std::size(kAllCollectives)> last_resolved_{};  // by collective
  // The last all-reduce when it ran on the direct engine, for repeat_allreduce:
  // a call with the same count, dtype, op and algorithm request passes every
  // check it passed and runs the same algorithm and plan.
  struct Repeat {
    bool armed = false;
    std::size_t count = 0;
    std::string asked;  // CallOptions::algorithm
    direct::PreparedCall prepared;
    direct::DirectRun run;  // its arguments; the buffers, timeout and note are set per call
    Operation op;           // its numbers and arguments; never pooled nor active
  };
  Repeat repeat_;
  std::uint64_t next_id_ = 0;
  std::uint64_t next_seq_ = 0;
  std::uint64_t next_internal_seq_ = 0;
  std::uint64_t splits_ = 0;
  std::uint64_t generation_ = 0;  // which communicator of this store this is
  std::vector<std::shared_ptr<Operation>> active_;
  std::vector<std::uint64_t> bytes_sent_;  // per peer, see bytes_sent()
  // Operations the user no longer holds are reused (with their engine state).
  std::vector<std::shared_ptr<Operation>> operation_pool_;
  // The last collectives' signatures, published when a call stalls so that
  // mismatched calls are named (see diagnose_stall).
  struct RecentCall {
    bool used = false;
    std::uint64_t signature = 0;
    Operation call;  // its numbers and arguments only (no engine state)
  };
  std::array<RecentCall, 16> recent_calls_{};
  std::unique_ptr<StallProbe> stall_probe_;  // of the operation being waited for
  std::shared_ptr<StallNoteOrder> stall_note_order_ = std::make_shared<StallNoteOrder>();
  std::chrono::milliseconds stall_after_{1000};
  Clock::time_point next_liveness_check_{};  // see check_local_peers
  std::atomic<bool> aborted_{false};
  std::atomic<bool> failed_{false};
  mutable std::mutex failure_mu_;
  std::string first_error_;
  FlightRecorder recorder_;
  // Per collective, the size buckets whose algorithm choice was logged (debug).
  std::array<std::uint64_t, std::size(kAllCollectives)> logged_buckets_{};
};

}  // namespace comm::detail
