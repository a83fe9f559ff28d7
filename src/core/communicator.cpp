// The communicator engine: creation, operation lifecycle, progress, failure.

#include "select/calibration.hpp"
#include "core/communicator_impl.hpp"
#include "core/peer_table.hpp"
#include "util/log.hpp"
#include "engine/reduce_kernels.hpp"
#include "select/tuning_file.hpp"

#include <algorithm>
#include <cstring>
#include <sstream>

namespace comm::detail {
namespace {

// Wire tag layout (kTagBits = 48): bits 46-47 say what kind of message this
// is, so collectives, user send/recv, the library's own checks and start-up
// calibration (kind 3) can never match each other. Then 22 bits of sequence
// number and the schedule step's 24-bit tag.
constexpr std::uint64_t kInternalTag = 0;
constexpr std::uint64_t kCollectiveTag = std::uint64_t{1} << 46;
constexpr std::uint64_t kP2pTag = std::uint64_t{2} << 46;
constexpr int kSeqShift = 24;
constexpr std::uint64_t kSeqMask = (std::uint64_t{1} << 22) - 1;
// Longest a waiter sleeps before re-checking abort and deadlines.
constexpr auto kWaitSlice = std::chrono::milliseconds(50);

std::string serialize_links(Transport& t) {
  std::ostringstream os;
  os.precision(17);
  for (int p = 0; p < t.size(); ++p) {
    const LinkInfo l = t.link(p);
    os << static_cast<int>(l.kind) << ' ' << l.alpha_us << ' ' << l.beta_gbps << ' ' << l.rndv_threshold_bytes << ' '
       << l.rndv_extra_us << ' ' << l.beta_large_gbps << ' ' << (l.receiver_copies ? 1 : 0) << ' ' << l.detail
       << '\n';
  }
  return os.str();
}

void parse_links(const std::string& text, int from, LinkMatrix& m) {
  std::istringstream is(text);
  for (int p = 0; p < m.n; ++p) {
    int kind = 0, receiver_copies = 0;
    LinkInfo l;
    if (!(is >> kind >> l.alpha_us >> l.beta_gbps >> l.rndv_threshold_bytes >> l.rndv_extra_us >> l.beta_large_gbps >>
          receiver_copies))
      throw Error(ErrorCode::store_failure, "link exchange: malformed link row from rank " + std::to_string(from));
    l.kind = static_cast<LinkKind>(kind);
    l.receiver_copies = receiver_copies != 0;
    std::getline(is, l.detail);
    if (!l.detail.empty() && l.detail.front() == ' ') l.detail.erase(0, 1);
    m.links[static_cast<std::size_t>(from) * m.n + p] = std::move(l);
  }
}

std::string join_ranks(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

}  // namespace

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

std::string Operation::describe() const {
  std::string s = std::string(to_string(collective)) + " #" + std::to_string(seq) + " (" + std::string(algorithm) + ", " +
                  std::to_string(bytes) + " B " + std::string(to_string(dtype));
  if (collective == Collective::allreduce || collective == Collective::reduce ||
      collective == Collective::reduce_scatter)
    s += " " + std::string(to_string(op));
  return s + ")";
}

std::unique_ptr<CommunicatorImpl> CommunicatorImpl::create(const Config& config, std::shared_ptr<Store> base) {
  if (config.world_size < 1)
    throw Error(ErrorCode::invalid_config, "world size " + std::to_string(config.world_size) + " must be at least 1");
  if (config.rank < 0 || config.rank >= config.world_size)
    throw Error(ErrorCode::invalid_config, "rank " + std::to_string(config.rank) + " is outside [0, " +
                                               std::to_string(config.world_size) + ")");
  if (config.chunk_bytes == 0) throw Error(ErrorCode::invalid_config, "chunk size must be at least 1 byte");
  if (config.timeout.count() <= 0) throw Error(ErrorCode::invalid_config, "timeout must be positive");
  log::set_level(config.log_level);
  log::set_rank(config.rank);

  std::unique_ptr<CommunicatorImpl> c(new CommunicatorImpl());
  c->config_ = config;
  c->rank_ = config.rank;
  c->size_ = config.world_size;
  c->recorder_.resize(config.flight_recorder_size);
  auto overrides = parse_override(config.algo_override);  // usage errors before any connection

  if (!base) {
    if (!config.store.empty())
      base = make_store(config);
    else if (config.world_size == 1)
      base = make_memory_store();
    else
      throw Error(ErrorCode::invalid_config,
                  "world size " + std::to_string(config.world_size) +
                      " needs a store to meet the other ranks: set COMM_STORE (host:port or file:/dir), "
                      "run under commrun, or pass a Store to Communicator::create");
  }
  // Each communicator created on a store gets its own key namespace; ranks
  // create communicators in the same order, so the counters agree.
  const auto generation = base->add("comm/created/" + std::to_string(config.rank), 1);
  c->base_store_ = base;
  c->generation_ = static_cast<std::uint64_t>(generation);
  c->store_ = make_prefix_store(base, "c" + std::to_string(generation) + "/");

  // The one exchange every transport and the selector rely on: who is where.
  c->peers_ = std::make_shared<const PeerTable>(exchange_peers(*c->store_, config, config.timeout));
  if (c->config_.transport.empty()) c->config_.transport = default_transport(*c->peers_);
  TransportInit init{config.rank, config.world_size, c->store_, &c->config_, c->peers_};
  c->transport_ = create_transport(c->config_.transport, init);
  c->caps_ = c->transport_->caps();

  // Every rank learns every link so that all ranks select identically.
  LinkMatrix links;
  links.n = c->size_;
  links.links.resize(static_cast<std::size_t>(c->size_) * c->size_);
  c->store_->set("links/" + std::to_string(c->rank_), serialize_links(*c->transport_));
  for (int r = 0; r < c->size_; ++r)
    parse_links(c->store_->get("links/" + std::to_string(r), config.timeout), r, links);

  // Measured figures replace the transports' nominal ones: from a tuning file,
  // or measured now (and then saved to the tuning file, if one is named).
  ComputeParams compute{};
  if (c->caps_.cuda_memory && !c->caps_.host_memory) {
    // Device-side reductions and copies run at HBM speed; every step costs
    // about one kernel launch.
    compute.reduce_gbps = 1000;
    compute.copy_gbps = 1000;
    compute.step_overhead_us = 4;
  }
  if (config.calibrate) {
    calibrate_links(*c->transport_, *c->store_, c->rank_, c->size_, links, compute, config.timeout);
    if (!config.tuning_file.empty() && c->rank_ == 0) save_tuning(config.tuning_file, links, compute);
  } else if (!config.tuning_file.empty()) {
    load_tuning_agreed(config.tuning_file, *c->store_, c->rank_, links, compute, config.timeout);
  }
  // A stream-ordered transport without a stream engine can run only its own collectives.
  const bool schedules_runnable = !c->caps_.stream_ordered || c->transport_->stream_engine() != nullptr;
  c->selector_ = std::make_unique<Selector>(c->size_, std::move(links), compute, config.chunk_bytes,
                                            std::move(overrides), c->transport_->native(), schedules_runnable);
  register_live(c.get());
  COMM_INFO("communicator rank " << c->rank_ << "/" << c->size_ << " on transport " << c->config_.transport
                                 << " ready; " << c->peers_->num_hosts() << " host(s): " << c->peers_->describe());
  return c;
}

CommunicatorImpl::~CommunicatorImpl() {
  unregister_live(this);
  for (auto& op : operation_pool_) op->comm = nullptr;
  for (auto& op : active_) {
    if (op->exec) op->exec->cancel();
    if (op->state == Operation::State::running) {
      op->state = Operation::State::failed;
      op->code = ErrorCode::aborted;
      op->message = op->describe() + ": the communicator was destroyed before it completed";
    }
    op->comm = nullptr;
  }
  active_.clear();
  if (stream_scratch_ && transport_ && transport_->stream_engine())
    transport_->stream_engine()->release_scratch(stream_scratch_);
}

void CommunicatorImpl::check_usable() const {
  if (aborted_.load(std::memory_order_acquire) || failed()) {
    std::lock_guard lk(failure_mu_);
    throw Error(ErrorCode::communicator_failed,
                "communicator (rank " + std::to_string(rank_) + ") has failed: " +
                    (first_error_.empty() ? std::string("it was aborted") : first_error_) +
                    "; create a new communicator");
  }
}

std::string_view CommunicatorImpl::resolve_algorithm(const Call& call) {
  const std::string_view asked = call.options ? call.options->algorithm : std::string_view{};
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
    return *it;
  }
  return selector_->choose(call.collective, selection_bytes(call));
}

std::shared_ptr<const Schedule> CommunicatorImpl::plan(const algo::Algorithm& a, const algo::AlgoArgs& args) {
  const bool cacheable = args.collective != Collective::all_to_allv;
  const PlanKey key{&a, args.count, args.elem_size, args.root, args.chunk_elems};
  if (cacheable) {
    for (auto& [k, s] : recent_plans_)
      if (s && k == key) return s;
    if (auto it = plans_.find(key); it != plans_.end()) {
      recent_plans_[recent_next_++ % recent_plans_.size()] = *it;
      return it->second;
    }
  }
  ScheduleBuilder b;
  a.build(args, b);
  auto s = std::make_shared<const Schedule>(std::move(b).finish());
  if (cacheable) {
    constexpr std::size_t kMaxPlans = 512;
    if (plans_.size() >= kMaxPlans) plans_.clear();
    plans_.emplace(key, s);
    recent_plans_[recent_next_++ % recent_plans_.size()] = {key, s};
  }
  return s;
}

std::shared_ptr<Operation> CommunicatorImpl::start(const Call& call) {
  check_usable();
  if (call.memory == MemoryKind::cuda && !caps_.cuda_memory)
    throw Error(ErrorCode::unsupported, std::string(to_string(call.collective)) +
                                            ": a CUDA device buffer was given to transport '" + config_.transport +
                                            "', which can only move host memory; use COMM_TRANSPORT=nccl or host buffers");
  if (call.memory == MemoryKind::host && !caps_.host_memory)
    throw Error(ErrorCode::unsupported, std::string(to_string(call.collective)) +
                                            ": a host buffer was given to transport '" + config_.transport +
                                            "', which moves only CUDA device memory; pass device buffers");

  auto op = acquire_operation();
  op->collective = call.collective;
  op->dtype = call.dtype;
  op->op = call.op;
  op->root = call.root;
  op->bytes = selection_bytes(call);
  op->timeout = call.options && call.options->timeout.count() > 0 ? call.options->timeout : config_.timeout;

  const bool p2p = call.collective == Collective::send || call.collective == Collective::recv;
  if (p2p) {
    op->algorithm = "p2p";  // a literal: lives forever
  } else {
    op->algorithm = resolve_algorithm(call);
    if (config_.check && !call.internal) check_consistency(call, op->algorithm);
  }
  // Only now, with every usage check passed, does the operation get numbers.
  op->id = next_id_++;
  op->seq = p2p ? 0 : call.internal ? next_internal_seq_++ : next_seq_++;
  op->started = Clock::now();
  op->deadline = op->started + op->timeout;
  recorder_.record({op->id, op->seq, op->collective, op->algorithm, op->bytes, op->dtype, op->op, op->root,
                    OpState::posted, 0, 0, recorder_.now_us(), -1, {}});

  if (p2p && caps_.stream_ordered) {
    // Stream-ordered transports move point-to-point data with their own send/recv.
    if (!transport_->native())
      throw Error(ErrorCode::unsupported, "transport '" + config_.transport + "' offers no send/recv");
    op->algorithm = "native";
    return run_native(std::move(op), call);
  }
  if (!p2p && selector_->is_native(call.collective, op->algorithm)) return run_native(std::move(op), call);

  const std::size_t esize = dtype_size(call.dtype);
  std::shared_ptr<const Schedule> schedule;
  std::uint64_t tag_base;
  algo::AlgoArgs args;
  const algo::Algorithm* algorithm = nullptr;
  if (p2p) {
    ScheduleBuilder b;
    const Region whole{call.collective == Collective::send ? BufferId::input : BufferId::output, 0, call.count};
    if (call.collective == Collective::send)
      b.send(call.root, whole, 0);
    else
      b.recv(call.root, whole, 0);
    schedule = std::make_shared<const Schedule>(std::move(b).finish());
    tag_base = kP2pTag | (call.options ? call.options->tag : 0u);
  } else {
    algorithm = algo::find_algorithm(call.collective, op->algorithm);
    args.collective = call.collective;
    args.rank = rank_;
    args.nranks = size_;
    args.count = call.count;
    args.elem_size = esize;
    args.root = call.root;
    args.chunk_elems = std::max<std::size_t>(1, config_.chunk_bytes / esize);
    args.send_counts = call.send_counts;
    args.send_displs = call.send_displs;
    args.recv_counts = call.recv_counts;
    args.recv_displs = call.recv_displs;
    if (algorithm->eligible && !algorithm->eligible(args))
      throw Error(ErrorCode::unsupported, std::string(to_string(call.collective)) + ": algorithm '" +
                                              std::string(op->algorithm) + "' cannot run on " + std::to_string(size_) +
                                              " ranks (" + std::string(algorithm->summary) + ")");
    if (caps_.stream_ordered) return run_streamed(std::move(op), call, *algorithm, args);
    schedule = plan(*algorithm, args);
    tag_base = (call.internal ? kInternalTag : kCollectiveTag) | ((op->seq & kSeqMask) << kSeqShift);
  }

  ExecBuffers bufs{static_cast<const std::byte*>(call.input), static_cast<std::byte*>(call.output), nullptr};
  // A partially overlapping input would be overwritten while still being
  // read; snapshot it (exact aliasing is the supported in-place form).
  const auto* in_lo = static_cast<const std::byte*>(call.input);
  const auto* out_lo = static_cast<const std::byte*>(call.output);
  if (in_lo && out_lo && in_lo != out_lo && in_lo < out_lo + call.out_bytes && out_lo < in_lo + call.in_bytes) {
    op->input_copy.assign(in_lo, in_lo + call.in_bytes);
    bufs.input = op->input_copy.data();
  } else if (in_lo && in_lo == out_lo && call.in_bytes != call.out_bytes) {
    op->input_copy.assign(in_lo, in_lo + call.in_bytes);
    bufs.input = op->input_copy.data();
  }
  if (schedule->scratch_count) {
    op->scratch = scratch_pool_.acquire(schedule->scratch_count * esize);
    bufs.scratch = op->scratch.data.get();
  }
  if (call.op == ReduceOp::avg &&
      (call.collective == Collective::allreduce || call.collective == Collective::reduce_scatter ||
       (call.collective == Collective::reduce && call.root == rank_))) {
    op->avg_data = call.output;
    op->avg_count = call.out_bytes / esize;
  }
  if (!op->exec) op->exec = std::make_unique<Execution>(*transport_);
  op->exec->start(std::move(schedule), bufs, call.dtype, call.op, tag_base);
  active_.push_back(op);
  progress_all();
  return op;
}

std::shared_ptr<Operation> CommunicatorImpl::acquire_operation() {
  // Only the pool holds it: neither the user (Work) nor active_ does.
  for (auto& pooled : operation_pool_)
    if (pooled.use_count() == 1) {
      Operation& op = *pooled;
      op.input_copy.clear();
      op.avg_data = nullptr;
      op.avg_count = 0;
      op.state = Operation::State::running;
      op.message.clear();
      return pooled;
    }
  auto op = std::make_shared<Operation>();
  op->comm = this;
  constexpr std::size_t kPoolSize = 8;
  if (operation_pool_.size() < kPoolSize) operation_pool_.push_back(op);
  return op;
}

std::shared_ptr<Operation> CommunicatorImpl::run_native(std::shared_ptr<Operation> op, const Call& call) {
  CollectiveArgs a;
  a.collective = call.collective;
  a.send = call.input;
  a.recv = call.output;
  a.count = call.count;
  a.dtype = call.dtype;
  a.op = call.op;
  a.root = call.root;
  a.send_counts = call.send_counts.empty() ? nullptr : call.send_counts.data();
  a.send_displs = call.send_displs.empty() ? nullptr : call.send_displs.data();
  a.recv_counts = call.recv_counts.empty() ? nullptr : call.recv_counts.data();
  a.recv_displs = call.recv_displs.empty() ? nullptr : call.recv_displs.data();
  a.memory = call.memory;
  a.stream = call.options ? call.options->stream : nullptr;
  a.timeout = op->timeout;
  a.sequence = op->seq;
  NativeCollectives* native = transport_->native();
  std::string why;
  if (!native->supports(a, op->algorithm, &why))
    throw Error(ErrorCode::unsupported, op->describe() + ": " + why);
  try {
    native->run(a, op->algorithm);
  } catch (const Error& e) {
    op->state = Operation::State::failed;
    op->code = e.code();
    op->message = op->describe() + ": " + e.what();
    recorder_.update(op->id, OpState::failed, 0, 1, op->message);
    if (!e.is_usage()) fail_all(e.code(), op->message, op.get());
    throw Error(op->code, op->message);
  }
  op->state = Operation::State::done;
  recorder_.update(op->id, OpState::done, 1, 1);
  return op;
}

std::shared_ptr<Operation> CommunicatorImpl::run_streamed(std::shared_ptr<Operation> op, const Call& call,
                                                          const algo::Algorithm& a, const algo::AlgoArgs& args) {
  StreamEngine* engine = transport_->stream_engine();
  auto schedule = plan(a, args);
  const std::size_t scratch_bytes = schedule->scratch_count * args.elem_size;
  if (scratch_bytes > stream_scratch_bytes_) {
    if (stream_scratch_) engine->release_scratch(stream_scratch_);
    stream_scratch_ = nullptr;
    stream_scratch_bytes_ = 0;
    stream_scratch_ = engine->allocate_scratch(scratch_bytes);
    stream_scratch_bytes_ = scratch_bytes;
  }
  ScheduleBuffers bufs{call.input, call.output, stream_scratch_};
  try {
    engine->enqueue(*schedule, bufs, call.dtype, call.op, size_, op->seq, call.options ? call.options->stream : nullptr);
  } catch (const Error& e) {
    op->state = Operation::State::failed;
    op->code = e.code();
    op->message = op->describe() + ": " + e.what();
    recorder_.update(op->id, OpState::failed, 0, schedule->steps.size(), op->message);
    if (!e.is_usage()) fail_all(e.code(), op->message, op.get());
    throw Error(op->code, op->message);
  }
  op->state = Operation::State::done;
  recorder_.update(op->id, OpState::done, schedule->steps.size(), schedule->steps.size());
  return op;
}

void CommunicatorImpl::finish(Operation& op) {
  if (op.avg_data && op.avg_count) kernels::finish_avg(op.avg_data, op.avg_count, op.dtype, size_);
  op.state = Operation::State::done;
  recorder_.update(op.id, OpState::done, op.exec->steps_done(), op.exec->steps_total());
  scratch_pool_.release(std::move(op.scratch));
  op.input_copy = {};
}

bool CommunicatorImpl::progress_all() {
  bool moved = transport_->progress();
  for (std::size_t i = 0; i < active_.size();) {
    Operation& op = *active_[i];
    moved = op.exec->advance() || moved;
    if (op.exec->failed()) {
      const std::string msg = op.describe() + ": " + op.exec->error_message();
      fail_all(op.exec->error_code(), msg, &op);
      return true;
    }
    if (op.exec->done()) {
      finish(op);
      active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(i));
      moved = true;
      continue;
    }
    ++i;
  }
  return moved;
}

void CommunicatorImpl::fail_all(ErrorCode code, const std::string& message, Operation* culprit) noexcept {
  {
    std::lock_guard lk(failure_mu_);
    if (first_error_.empty()) first_error_ = message;
  }
  const bool first = !failed_.exchange(true, std::memory_order_acq_rel);
  COMM_WARN(message);
  for (auto& op : active_) {
    if (op->exec) op->exec->cancel();
    if (op->state != Operation::State::running) continue;
    op->state = Operation::State::failed;
    if (op.get() == culprit) {
      op->code = code;
      op->message = message;
    } else {
      op->code = code == ErrorCode::aborted ? code : ErrorCode::communicator_failed;
      op->message = op->describe() + " failed because " + message;
    }
    recorder_.update(op->id, OpState::failed, op->exec ? op->exec->steps_done() : 0,
                     op->exec ? op->exec->steps_total() : 0, op->message);
  }
  active_.clear();
  if (first && !config_.dump_dir.empty()) dump_flight_recorder(std::string(to_string(code)));
}

void CommunicatorImpl::check_deadlines(Clock::time_point now) {
  for (auto& op : active_) {
    if (now < op->deadline) continue;
    const auto peers = op->exec->waiting_on();
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.1f", std::chrono::duration<double>(op->timeout).count());
    std::string msg = op->describe() + " timed out after " + secs + " s on rank " + std::to_string(rank_) +
                      " at step " + std::to_string(op->exec->steps_done()) + " of " +
                      std::to_string(op->exec->steps_total());
    if (!peers.empty()) msg += "; still waiting on rank(s) " + join_ranks(peers);
    msg += " (raise COMM_TIMEOUT if the peers are merely slow)";
    fail_all(ErrorCode::timeout, msg, op.get());
    return;
  }
}

void CommunicatorImpl::throw_if_failed(const Operation& op) const {
  if (op.state == Operation::State::failed) throw Error(op.code, op.message);
}

bool CommunicatorImpl::test(Operation& op) {
  if (op.state == Operation::State::running) {
    if (aborted_.load(std::memory_order_acquire))
      fail_all(ErrorCode::aborted, "communicator aborted by Communicator::abort()", nullptr);
    else {
      progress_all();
      if (op.state == Operation::State::running) check_deadlines(Clock::now());
    }
  }
  throw_if_failed(op);
  return op.state == Operation::State::done;
}

bool CommunicatorImpl::wait(Operation& op, std::optional<Clock::time_point> limit) {
  while (op.state == Operation::State::running) {
    if (aborted_.load(std::memory_order_acquire)) {
      fail_all(ErrorCode::aborted, "communicator aborted by Communicator::abort()", nullptr);
      break;
    }
    if (progress_all()) continue;
    const auto now = Clock::now();
    check_deadlines(now);
    if (op.state != Operation::State::running) break;
    if (limit && now >= *limit) return false;
    // About to sleep: record how far each operation got, for flight-recorder
    // dumps (kept off the busy path, where it would cost a lock per poll).
    for (auto& a : active_) recorder_.update(a->id, OpState::posted, a->exec->steps_done(), a->exec->steps_total());
    auto until = std::min(op.deadline, now + kWaitSlice);
    if (limit) until = std::min(until, *limit);
    transport_->wait(until);
  }
  throw_if_failed(op);
  return true;
}

void CommunicatorImpl::abort() noexcept {
  aborted_.store(true, std::memory_order_release);
  if (transport_) transport_->interrupt();
}

std::unique_ptr<CommunicatorImpl> CommunicatorImpl::split(int color, int key) {
  check_usable();
  // Everyone learns everyone's (color, key) through this communicator.
  std::vector<std::int64_t> mine{color, key};
  std::vector<std::int64_t> all(2 * static_cast<std::size_t>(size_));
  Call call;
  call.collective = Collective::allgather;
  call.input = mine.data();
  call.output = all.data();
  call.count = 2;
  call.in_bytes = 2 * sizeof(std::int64_t);
  call.out_bytes = all.size() * sizeof(std::int64_t);
  call.dtype = DataType::i64;
  CallOptions opts;
  call.options = &opts;
  auto op = start(call);
  wait(*op);
  const std::uint64_t split_id = splits_++;
  std::unique_ptr<CommunicatorImpl> sub;
  if (color >= 0) {
    std::vector<std::pair<std::int64_t, int>> members;
    for (int r = 0; r < size_; ++r)
      if (all[2 * static_cast<std::size_t>(r)] == color)
        members.emplace_back(all[2 * static_cast<std::size_t>(r) + 1], r);
    std::sort(members.begin(), members.end());
    Config cfg = config_;
    cfg.world_size = static_cast<int>(members.size());
    for (std::size_t i = 0; i < members.size(); ++i)
      if (members[i].second == rank_) cfg.rank = static_cast<int>(i);
    auto store = make_prefix_store(store_, "split" + std::to_string(split_id) + "/" + std::to_string(color) + "/");
    sub = create(cfg, std::move(store));
  }
  // Nobody leaves split() until every group has met through the store: the
  // store may live in rank 0's process, which could otherwise exit first.
  Call barrier;
  barrier.collective = Collective::barrier;
  barrier.internal = true;
  barrier.options = &opts;
  auto done = start(barrier);
  wait(*done);
  return sub;
}

}  // namespace comm::detail
