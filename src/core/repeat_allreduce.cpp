// The repeat path of a blocking all-reduce: decode runs the same small
// all-reduce dozens of times per token, and on the direct-memory engine the
// general path's checks, lookups and bookkeeping cost more than the exchange
// itself. A call that repeats the last all-reduce (same count, dtype, op and
// algorithm request; host buffers) passed every check that one passed, so it
// goes straight to the engine with the algorithm and plan it used. It keeps
// what the general path guarantees: the same call numbering (every rank
// numbers the same calls, whichever path each took), the flight record
// written before anything waits for a missing peer, the recent-call notes
// for mismatch diagnosis, and the same failure handling (fail_started).

#include "core/communicator_impl.hpp"
#include "engine/direct/direct_engine.hpp"
#include "util/coarse_clock.hpp"

namespace comm::detail {

void CommunicatorImpl::arm_repeat(const Call& call, const Operation& op) {
  if (call.internal || !direct_engine_ || op.engine != direct_engine_.get() || call.memory != MemoryKind::host ||
      config_.check)
    return;
  const direct::DirectAlgorithm* algorithm = direct_engine_->find(call.collective, op.algorithm);
  if (!algorithm) return;
  repeat_.count = call.count;
  repeat_.asked = call.options ? call.options->algorithm : std::string();
  copy_call(repeat_.op, op);
  repeat_.op.engine = op.engine;
  repeat_.run = direct::DirectRun{.signature = op.signature,
                                  .count = call.count,
                                  .in_bytes = op.bytes,
                                  .out_bytes = op.bytes,
                                  .dtype = op.dtype,
                                  .op = op.op,
                                  .root = op.root};
  repeat_.prepared = direct_engine_->prepare(*algorithm, repeat_.run);
  repeat_.armed = true;
}

namespace {

// The caller's algorithm request against the one the repeated call made,
// without a library call for the usual empty pair.
bool same_request(const std::string& a, const std::string& b) {
  return a.size() == b.size() && (a.empty() || a == b);
}

}  // namespace

bool CommunicatorImpl::repeat_allreduce(const void* in, void* out, std::size_t count, DataType dtype, ReduceOp op,
                                        const CallOptions& opts) {
  Operation& o = repeat_.op;
  if (!repeat_.armed || count != repeat_.count || dtype != o.dtype || op != o.op || (count > 0 && (!in || !out)) ||
      !same_request(opts.algorithm, repeat_.asked) || failed_.load(std::memory_order_relaxed) ||
      aborted_.load(std::memory_order_acquire))
    return false;
  o.id = next_id_++;
  o.seq = next_seq_++;
  o.timeout = opts.timeout.count() > 0 ? opts.timeout : config_.timeout;
  o.state = Operation::State::running;
  // The start time, the flight record and the recent-call note go in before
  // the call first waits for a peer that is not there yet (HostCall::note),
  // or, when the peers were always there, after the call as one finished
  // record (one write, not a posted record and its update): never between
  // this rank's signal and its look at the peers. A posted record ends with
  // FlightRecorder::finish, which leaves the entry's update to the next write.
  // The engine's deadline runs from its first wait that finds a flag missing
  // (HostCall::deadline), microseconds after the call began.
  struct Note {
    CommunicatorImpl* self;
    bool noted = false;
  } note{this};
  const auto write_notes = [](void* arg) {
    Note& n = *static_cast<Note*>(arg);
    n.self->note_repeat(OpState::posted);
    n.noted = true;
  };
  direct::DirectRun& run = repeat_.run;
  run.input = in;
  run.output = out;
  run.timeout = o.timeout;
  run.note = write_notes;
  run.note_arg = &note;
  try {
    direct_engine_->run(repeat_.prepared, run);
  } catch (const Error& e) {
    log::Scope log_scope(log_.get());
    repeat_.armed = false;
    if (!note.noted) write_notes(&note);  // it failed before waiting
    fail_started(o, e);
  }
  o.state = Operation::State::done;
  if (note.noted)
    recorder_.finish(o.id, recorder_.now_us());
  else
    note_repeat(OpState::done);
  return true;
}

// The repeated call's start, flight record (in `state`) and recent-call note.
void CommunicatorImpl::note_repeat(OpState state) {
  Operation& o = repeat_.op;
  o.started = util::coarse_now();
  o.deadline = o.started + o.timeout;
  record_posted(o, state);
  remember_call(o);
}

}  // namespace comm::detail
