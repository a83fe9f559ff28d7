// Operations: a call is checked, numbered and handed to its engine; running
// operations are advanced, waited for, timed out, diagnosed when they stall,
// and failed — in one place for every engine.

#include "core/communicator_impl.hpp"
#include "engine/direct/cpu_executor.hpp"
#include "util/c_locale.hpp"
#include "engine/progress.hpp"
#include "engine/tags.hpp"
#include "util/coarse_clock.hpp"
#include "util/log.hpp"
#include "util/process.hpp"

#include <algorithm>
#include <cstdio>
#include <tuple>

namespace comm::detail {
namespace {

std::string join_ranks(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

const CallOptions kDefaultOptions{};

}  // namespace

void CommunicatorImpl::check_usable() const {
  if (aborted_.load(std::memory_order_acquire) || failed()) {
    std::lock_guard lk(failure_mu_);
    throw Error(ErrorCode::communicator_failed,
                "communicator (rank " + std::to_string(rank_) + ") has failed: " +
                    (first_error_.empty() ? std::string("it was aborted") : first_error_) +
                    "; create a new communicator");
  }
}

void CommunicatorImpl::check_memory(const Call& call) const {
  if (call.collective == Collective::barrier) return;  // moves no user buffer
  const TransportCaps caps = transport_->caps();
  if (call.memory == MemoryKind::cuda && !caps.cuda_memory)
    throw Error(ErrorCode::unsupported, std::string(to_string(call.collective)) +
                                            ": a CUDA device buffer was given to transport '" + config_.transport +
                                            "', which can only move host memory; use COMM_TRANSPORT=nccl or host buffers");
  if (call.memory == MemoryKind::host && !caps.host_memory)
    throw Error(ErrorCode::unsupported, std::string(to_string(call.collective)) +
                                            ": a host buffer was given to transport '" + config_.transport +
                                            "', which moves only CUDA device memory; pass device buffers");
}

std::string_view CommunicatorImpl::resolve_algorithm(const Call& call) {
  const std::string_view asked = call.options ? std::string_view(call.options->algorithm) : std::string_view{};
  if (!asked.empty() && asked != "auto") {
    const auto& names = selector_->names(call.collective);
    const auto it = std::find(names.begin(), names.end(), asked);
    if (it == names.end()) {
      std::string valid;
      for (auto& n : names) valid += (valid.empty() ? "" : ", ") + n;
      throw Error(ErrorCode::unknown_algorithm, std::string(to_string(call.collective)) + ": no algorithm '" +
                                                    std::string(asked) + "' on transport '" + config_.transport +
                                                    "' (valid: " + valid + ")");
    }
    selector_->check_deterministic(call.collective, *it);
    return *it;
  }
  return selector_->choose(call.collective, call.bytes());
}

std::shared_ptr<Operation> CommunicatorImpl::start(const Call& call) {
  log::Scope log_scope(log_.get());
  check_usable();
  check_memory(call);
  std::string_view algorithm = "p2p";
  Engine* chosen = nullptr;
  if (call.p2p()) {
    chosen = &engine_for(call, algorithm);
    if (chosen == native_engine_.get()) algorithm = "native";
  } else {
    std::tie(algorithm, chosen) = resolve(call);
  }
  Engine& engine = *chosen;
  if (call.collective == Collective::allreduce) repeat_.armed = false;
  engine.check(call, algorithm);
  if (config_.check && !call.internal && !call.p2p()) check_consistency(call, algorithm);

  // Only now, with every usage check passed, does the operation get numbers:
  // every rank numbers the same calls, or their tags would diverge.
  auto op = acquire_operation();
  op->collective = call.collective;
  op->algorithm = algorithm;
  op->dtype = call.dtype;
  op->op = call.op;
  op->root = call.root;
  op->bytes = call.bytes();
  op->timeout = call.options && call.options->timeout.count() > 0 ? call.options->timeout : config_.timeout;
  op->engine = &engine;
  op->id = next_id_++;
  op->seq = call.p2p() ? 0 : call.internal ? next_internal_seq_++ : next_seq_++;
  op->signature = call.p2p() ? 0 : call_signature(call.collective, call.dtype, call.op, call.root);
  op->started = util::coarse_now();  // deadlines are seconds away: a tick's precision will do
  op->deadline = op->started + op->timeout;
  record_posted(*op);
  if (!call.p2p() && !call.internal) {
    remember_call(*op);
    log_choice(*op, call);
  }

  try {
    engine.start(*op, call);
  } catch (const Error& e) {
    fail_started(*op, e);
  }
  if (op->state == Operation::State::done) {
    recorder_.update(op->id, OpState::done, 1, 1);
    if (call.collective == Collective::allreduce) arm_repeat(call, *op);
    return op;
  }
  active_.push_back(op);
  progress_all();
  return op;
}

void CommunicatorImpl::record_posted(const Operation& op, OpState state) {
  recorder_.post(op.id, op.seq, op.collective, op.algorithm, op.bytes, op.dtype, op.op, op.root,
                 recorder_.us_at(op.started), state);
}

void CommunicatorImpl::fail_started(Operation& op, const Error& e) {
  op.state = Operation::State::failed;
  op.code = e.code();
  op.message = op.describe() + ": " + e.what();
  int cause = cause_of(e);
  if (const auto* wait = dynamic_cast<const direct::WaitFailure*>(&e)) {
    // A direct-memory wait: the ranks it waited for may themselves be stuck
    // behind another one (timeout), or have left because another one failed
    // first (peer_failed, the one that left published why): blame that one,
    // as for a schedule.
    if (e.code() == ErrorCode::timeout) {
      const auto [why, culprit] = explain_timeout(op, wait->missing());
      op.message += why;
      cause = culprit;
    } else {
      // What the store or the launcher knows comes first: a peer that closed
      // its communicator after another rank died, or failed on a peer read of
      // a rank killed mid-call, is not the one to blame. Where nothing is
      // known, the one rank waited on is, in this rank's note too: the ranks
      // waiting on this one would otherwise blame this one ("rank 2 failed
      // because rank 0 failed first", rank 0 having read dead rank 1's buffer).
      const std::vector<int>& missing = wait->missing();
      Culprit c = find_culprit(store_, lineage_.root, lineage_.root_ranks, rank_, missing,
                               std::chrono::milliseconds(300));
      const int peer = c.source == Culprit::Source::note ? c.note.rank : missing.size() == 1 ? missing.front() : -1;
      if (c.source != Culprit::Source::none && peer >= 0) {
        recorder_.update(op.id, OpState::failed, 0, 1, op.message);
        fail_blaming(op, op.code, op.message, peer, std::move(c));
        throw Error(op.code, op.message);
      }
      if (e.code() == ErrorCode::peer_failed && missing.size() == 1) cause = missing.front();
    }
  }
  if (cause < 0 && e.code() == ErrorCode::peer_failed && std::string_view(e.what()).find("rank ") == std::string_view::npos)
    cause = name_cause(op.message, std::chrono::milliseconds(1000));
  recorder_.update(op.id, OpState::failed, 0, 1, op.message);
  if (!e.is_usage()) fail_all(e.code(), op.message, &op, cause);
  throw Error(op.code, op.message);
}

std::pair<std::string_view, Engine*> CommunicatorImpl::resolve(const Call& call) {
  const std::string_view asked = call.options ? std::string_view(call.options->algorithm) : std::string_view{};
  Resolved& last = last_resolved_[static_cast<std::size_t>(call.collective)];
  if (last.engine && last.bytes == call.bytes() && last.asked == asked) return {last.algorithm, last.engine};
  const std::string_view algorithm = resolve_algorithm(call);
  Engine& engine = engine_for(call, algorithm);
  last.bytes = call.bytes();
  last.asked = asked;
  last.algorithm = algorithm;
  last.engine = &engine;
  return {algorithm, &engine};
}

std::shared_ptr<Operation> CommunicatorImpl::run_internal(Collective c, const void* in, void* out,
                                                          std::size_t count, DataType dtype) {
  Call call;
  call.collective = c;
  call.input = in;
  call.output = out;
  call.count = count;
  call.in_bytes = in ? count * dtype_size(dtype) : 0;
  call.out_bytes = out ? (c == Collective::allgather ? count * static_cast<std::size_t>(size_) : count) *
                             dtype_size(dtype)
                       : 0;
  call.dtype = dtype;
  call.options = &kDefaultOptions;
  call.internal = true;
  return start(call);
}

std::shared_ptr<Operation> CommunicatorImpl::acquire_operation() {
  // Only the pool holds it: neither the user (Work) nor active_ does.
  for (auto& pooled : operation_pool_)
    if (pooled.use_count() == 1) {
      Operation& op = *pooled;
      op.state = Operation::State::running;
      op.stall_checked = false;
      op.message.clear();
      return pooled;
    }
  auto op = std::make_shared<Operation>();
  op->comm = this;
  constexpr std::size_t kPoolSize = 8;
  if (operation_pool_.size() < kPoolSize) operation_pool_.push_back(op);
  return op;
}

bool CommunicatorImpl::progress_all() {
  bool moved = transport_->progress();
  for (std::size_t i = 0; i < active_.size();) {
    Operation& op = *active_[i];
    moved = op.run->advance() || moved;
    if (op.run->failed()) {
      fail_from_run(op);
      return true;
    }
    if (op.run->done()) {
      op.state = Operation::State::done;
      recorder_.update(op.id, OpState::done, op.run->steps_done(), op.run->steps_total());
      active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(i));
      moved = true;
      continue;
    }
    ++i;
  }
  return moved;
}

void CommunicatorImpl::fail_all(ErrorCode code, const std::string& message, Operation* culprit, int cause) noexcept {
  {
    std::lock_guard lk(failure_mu_);
    if (first_error_.empty()) first_error_ = message;
  }
  const bool first = !failed_.exchange(true, std::memory_order_acq_rel);
  COMM_LOG_AT(LogLevel::warn, log::Subsystem::coll, message);
  // Before anything is cancelled (which may close connections), so that the
  // peers that see them close can quote why, and blame whom this rank blames.
  if (first) publish_failure(store_, rank_, code, message, cause == rank_ ? -1 : cause);
  for (auto& op : active_) {
    if (op->run) op->run->cancel();
    if (op->state != Operation::State::running) continue;
    op->state = Operation::State::failed;
    if (op.get() == culprit) {
      op->code = code;
      op->message = message;
    } else {
      op->code = code == ErrorCode::aborted ? code : ErrorCode::communicator_failed;
      op->message = op->describe() + " failed because " + message;
    }
    recorder_.update(op->id, OpState::failed, op->run ? op->run->steps_done() : 0,
                     op->run ? op->run->steps_total() : 0, op->message);
  }
  active_.clear();
  if (first && !config_.dump_dir.empty()) dump_flight_recorder(std::string(to_string(code)));
}

// A same-host peer whose process is gone can never answer, and not every
// transport notices: UCX over shared memory reports a dead peer only when a
// rendezvous read touches its memory, so ranks waiting for an eager message
// from it would wait out their timeout. Once an operation has waited
// stall_after_, the processes of same-host peers are looked up in /proc
// (every kLivenessPeriod), which costs nothing while calls complete.
void CommunicatorImpl::check_local_peers(Clock::time_point now) {
  if (now < next_liveness_check_ || peers_->host_ranks(rank_).size() < 2) return;
  Operation* stalled = nullptr;
  for (auto& op : active_)
    if (now - op->started >= stall_after_) stalled = op.get();
  if (!stalled) return;
  constexpr auto kLivenessPeriod = std::chrono::milliseconds(100);
  next_liveness_check_ = now + kLivenessPeriod;
  const PeerTable& t = *peers_;
  for (int r : t.host_ranks(rank_)) {
    const PeerInfo& p = t[r];
    if (r == rank_ || t.same_process(rank_, r) || !t.pid_visible(rank_, r) ||
        process_alive(static_cast<long>(p.pid), p.start_ticks))
      continue;
    fail_through(*stalled, ErrorCode::peer_failed,
                 stalled->describe() + ": rank " + std::to_string(r) + " (pid " + std::to_string(p.pid) +
                     ", on this host) has exited",
                 r);
    return;
  }
}

void CommunicatorImpl::check_deadlines(Clock::time_point now) {
  check_local_peers(now);
  for (auto& op : active_) {
    if (now < op->deadline) continue;
    const auto peers = op->run->waiting_on();
    const std::string secs = util::fixed(std::chrono::duration<double>(op->timeout).count(), 1);
    std::string msg = op->describe() + " timed out after " + secs + " s on rank " + std::to_string(rank_) +
                      " at step " + std::to_string(op->run->steps_done()) + " of " +
                      std::to_string(op->run->steps_total());
    if (!peers.empty()) msg += "; still waiting on rank(s) " + join_ranks(peers);
    const auto [why, cause] = explain_timeout(*op, peers);
    msg += why + " (raise COMM_TIMEOUT if the peers are merely slow)";
    fail_all(ErrorCode::timeout, msg, op.get(), cause);
    return;
  }
}

// Who holds up a collective that timed out: the ranks waited on, directly or
// through the ranks they wait on (their stall notes say), that never said
// they are in it — a frozen rank, one stuck outside comm, or one far behind.
// Read within a bound: the store's host may be the frozen one.
std::pair<std::string, int> CommunicatorImpl::explain_timeout(const Operation& op, const std::vector<int>& peers) {
  if (op.collective == Collective::send || op.collective == Collective::recv || peers.empty()) return {"", -1};
  constexpr auto kBudget = std::chrono::milliseconds(500);
  const auto notes = read_stall_notes(store_, size_, kBudget);
  if (!notes) {
    const auto& roots = lineage_.root_ranks;
    const auto host = std::find(roots.begin(), roots.end(), 0) - roots.begin();
    if (host == rank_ || host >= size_) return {"; the store did not answer within 0.5 s", -1};
    return {"; the store did not answer within 0.5 s: rank " + std::to_string(host) +
                ", which hosts it, may be frozen too",
            static_cast<int>(host)};
  }
  const std::vector<Holdup> culprits = holding_up(*notes, peers, op.seq, rank_);
  std::string why;
  for (const Holdup& h : culprits) {
    const auto& note = (*notes)[static_cast<std::size_t>(h.rank)];
    // An earlier collective's kind is not known here, only its number.
    const std::string which = h.seq == op.seq ? std::string(to_string(op.collective)) + " #" + std::to_string(h.seq)
                                              : "collective #" + std::to_string(h.seq);
    if (h.via >= 0)
      why += "; rank " + std::to_string(h.via) + " is still in " + which + ", waiting on rank " +
             std::to_string(h.rank);
    why += "; rank " + std::to_string(h.rank) + " has not entered " + which + " (" +
           (!note ? std::string("it sent no progress note")
                  : std::string(note->waiting ? "its last progress note is from #" : "it last noted moving on past #") +
                        std::to_string(note->seq)) +
           "): it is frozen, stuck outside comm, or far behind";
  }
  return {why, culprits.size() == 1 ? culprits.front().rank : -1};
}

void CommunicatorImpl::remember_call(const Operation& op) {
  RecentCall& r = recent_calls_[op.seq % recent_calls_.size()];
  r.used = true;
  r.signature = op.signature;
  copy_call(r.call, op);
}

// A collective waiting longer than stall_after_ may be waiting for messages
// that can never match: the other rank called something else (the call
// signature is part of every tag, engine/tags.hpp). A background probe
// publishes this rank's recent calls and compares them with what the ranks
// it waits on published (core/peer_notes.hpp); a different signature for the
// same collective number fails the communicator naming both calls.
void CommunicatorImpl::diagnose_stall(Operation& op) {
  if (op.collective == Collective::send || op.collective == Collective::recv || !op.run) return;
  if (!op.stall_checked) {
    op.stall_checked = true;
    std::vector<CallNote> notes;
    for (const RecentCall& r : recent_calls_)
      if (r.used) notes.push_back({r.call.seq, r.signature, r.call.describe()});
    stall_probe_ = std::make_unique<StallProbe>(store_, rank_, std::move(notes), op.run->waiting_on(), op.seq,
                                                op.signature, stall_note_order_);
    return;
  }
  if (!stall_probe_) return;
  if (const auto theirs = stall_probe_->mismatch())
    fail_all(ErrorCode::mismatch,
             op.describe() + " on rank " + std::to_string(rank_) + " does not match " + *theirs +
                 "; every rank must make the same collective calls (collective, dtype, op and root) in the same order",
             &op);
  // Another rank failed and said so, and this rank's transport has not
  // noticed (Gloo misses some closed connections): the collective cannot
  // complete.
  else if (const auto f = stall_probe_->failure()) {
    const int cause = f->culprit() == rank_ ? f->rank : f->culprit();
    fail_all(f->code == ErrorCode::mismatch ? ErrorCode::mismatch : ErrorCode::peer_failed,
             op.describe() + " failed because rank " + std::to_string(cause) + " failed" +
                 (cause == f->rank ? "" : " (as rank " + std::to_string(f->rank) + " reports)") + ": " + f->message,
             &op, cause);
  }
}

// A peer failure whose error names no rank (a native collective's "connection
// reset by peer", a direct-memory wait that saw a peer go): what the store and
// the launcher say died first is appended to `message` (creation_failed uses
// it too). Returns that rank, or -1 when nothing is known within `budget`.
int CommunicatorImpl::name_cause(std::string& message, std::chrono::milliseconds budget) {
  const Culprit c = find_culprit(store_, lineage_.root, lineage_.root_ranks, rank_, {}, budget);
  if (c.rank < 0 || c.rank == rank_) return -1;
  message += "; the cause: rank " + std::to_string(c.rank) + " failed first (" +
             (c.source == Culprit::Source::note ? c.note.message : c.reason) + ")";
  return c.rank;
}

// An operation failed because of `peer` (its connection closed, a message
// failed, the transport named it as the cause, or its process is gone). The
// error names whom the store says is to blame (core/peer_notes.hpp
// find_culprit): what `peer` blamed when it failed first, or the rank the
// store server saw die, or the
// store's host when the store itself is gone; a rank that merely left
// because another one died is never taken for the culprit.
void CommunicatorImpl::fail_from_run(Operation& op) {
  fail_through(op, op.run->error_code(), op.describe() + ": " + op.run->error_message(), op.run->error_peer());
}

void CommunicatorImpl::fail_through(Operation& op, ErrorCode code, std::string message, int peer) {
  if (peer < 0 || peer == rank_ || code == ErrorCode::mismatch)
    return fail_all(code, message, &op, code == ErrorCode::mismatch ? -1 : peer);
  fail_blaming(op, code, std::move(message), peer,
               find_culprit(store_, lineage_.root, lineage_.root_ranks, rank_, {peer}, std::chrono::milliseconds(1000)));
}

// fail_through once the store has been asked: `c` is what it says of `peer`.
void CommunicatorImpl::fail_blaming(Operation& op, ErrorCode code, std::string message, int peer, Culprit c) {
  int cause = c.rank >= 0 && c.rank != rank_ ? c.rank : peer;
  const std::string through = cause == peer ? "" : "; this rank noticed it through rank " + std::to_string(peer);
  switch (c.source) {
    case Culprit::Source::note:
      code = c.note.code;
      message = op.describe() + " failed because rank " + std::to_string(cause) + " failed first" +
                (cause == peer ? "" : " (as rank " + std::to_string(peer) + " reports)") + ": " + c.note.message;
      break;
    case Culprit::Source::launcher:
    case Culprit::Source::lost:
      if (cause != peer)
        message = op.describe() + " failed because rank " + std::to_string(cause) + " died (" + c.reason + ")" + through;
      else
        message += " (rank " + std::to_string(cause) + " died: " + c.reason + ")";
      code = ErrorCode::peer_failed;
      break;
    case Culprit::Source::store_gone:
      if (cause != peer)
        message = op.describe() + " failed because rank " + std::to_string(cause) +
                  " died (it hosted the store, which is gone: " + c.reason + ")" + through;
      break;
    case Culprit::Source::none:
      break;
  }
  op.code = code;  // also for an operation no longer active (a direct-memory call, fail_started)
  op.message = message;
  fail_all(code, message, &op, cause);
}

// Level debug, subsystem coll: which algorithm a collective runs and why,
// once per collective and size bucket (the selector's unit of decision).
void CommunicatorImpl::log_choice(const Operation& op, const Call& call) {
  if (!log::enabled(LogLevel::debug, log::Subsystem::coll)) return;
  const int b = Selector::bucket_of(op.bytes);
  std::uint64_t& seen = logged_buckets_[static_cast<std::size_t>(op.collective)];
  if (seen & (std::uint64_t{1} << b)) return;
  seen |= std::uint64_t{1} << b;
  const char* source = "CallOptions::algorithm";
  const bool named = call.options && !call.options->algorithm.empty() && call.options->algorithm != "auto";
  double predicted = -1;
  try {
    if (!named) selector_->choose(op.collective, op.bytes, &source);
    predicted = selector_->predict(op.collective, op.algorithm, op.bytes);
  } catch (const Error&) {
    // The call already has its algorithm; a line without the prediction will do.
  }
  std::string why = source;
  if (predicted >= 0) {
    char us[32];
    std::snprintf(us, sizeof us, ", predicted %.3g us", predicted);
    why += us;
  }
  const std::size_t lo = b == 0 ? 0 : std::size_t{1} << b;
  COMM_LOG_AT(LogLevel::debug, log::Subsystem::coll,
              to_string(op.collective) << " #" << op.seq << " of " << op.bytes << " B runs " << op.algorithm << " ("
                                       << why << ") for sizes [" << lo << ", " << (std::size_t{2} << b) << ") B");
}

bool CommunicatorImpl::test(Operation& op) {
  log::Scope log_scope(log_.get());
  if (op.state == Operation::State::running) {
    if (aborted_.load(std::memory_order_acquire))
      fail_all(ErrorCode::aborted, "communicator aborted by Communicator::abort()", nullptr);
    else {
      progress_all();
      if (op.state == Operation::State::running) check_deadlines(Clock::now());
    }
  }
  if (op.state == Operation::State::failed) throw Error(op.code, op.message);
  return op.state == Operation::State::done;
}

bool CommunicatorImpl::wait(Operation& op, std::optional<Clock::time_point> limit) {
  log::Scope log_scope(log_.get());
  const auto running = [&] { return op.state == Operation::State::running; };
  // Nothing moved: check abort, deadlines and stalls, then sleep in the engine.
  const auto idle = [&](Clock::time_point until) {
    if (aborted_.load(std::memory_order_acquire)) {
      fail_all(ErrorCode::aborted, "communicator aborted by Communicator::abort()", nullptr);
      return;
    }
    const auto now = Clock::now();
    check_deadlines(now);
    if (running() && now - op.started >= stall_after_) diagnose_stall(op);
    if (!running()) return;
    // About to sleep: record how far each operation got, for flight-recorder
    // dumps (kept off the busy path, where it would cost a lock per poll).
    for (auto& a : active_) recorder_.update(a->id, OpState::posted, a->run->steps_done(), a->run->steps_total());
    op.engine->wait(std::min(until, op.deadline));
  };
  const bool finished = progress_until([&] { return !running(); }, [&] { return progress_all(); }, idle,
                                       limit.value_or(Clock::time_point::max()));
  if (!running()) {
    // A stalled collective that completed: the others must not take this
    // rank to be still waiting in it (core/peer_notes.hpp holding_up).
    if (stall_probe_ && op.state != Operation::State::failed) stall_probe_->moved_on();
    stall_probe_.reset();
  }
  if (op.state == Operation::State::failed) throw Error(op.code, op.message);
  return finished;
}

void CommunicatorImpl::abort() noexcept {
  aborted_.store(true, std::memory_order_release);
  if (schedule_engine_) schedule_engine_->interrupt();
  if (native_engine_) native_engine_->interrupt();
  if (transport_) transport_->interrupt();
}

}  // namespace comm::detail
