// The communicator: creation (store namespace, peer table, transport, links,
// tuning, selector, engines), destruction and split.

#include "core/builtin_transports.hpp"
#include "core/communicator_impl.hpp"
#include "core/link_exchange.hpp"
#include "core/peer_table.hpp"
#include "bootstrap/launcher_env.hpp"
#include "core/watchful_store.hpp"
#include "engine/direct/direct_engine.hpp"
#include "select/tuning.hpp"
#include "util/log.hpp"

#include <algorithm>
#include <numeric>

namespace comm::detail {
namespace {

void validate(const Config& config) {
  if (config.world_size < 1)
    throw Error(ErrorCode::invalid_config, "world size " + std::to_string(config.world_size) + " must be at least 1");
  if (config.rank < 0 || config.rank >= config.world_size)
    throw Error(ErrorCode::invalid_config, "rank " + std::to_string(config.rank) + " is outside [0, " +
                                               std::to_string(config.world_size) + ")");
  if (config.chunk_bytes == 0) throw Error(ErrorCode::invalid_config, "chunk size must be at least 1 byte");
  if (config.timeout.count() <= 0) throw Error(ErrorCode::invalid_config, "timeout must be positive");
  if (!(config.calibration_busy_limit >= 0 && config.calibration_busy_limit <= 1))
    throw Error(ErrorCode::invalid_config, "calibration_busy_limit " + std::to_string(config.calibration_busy_limit) +
                                               " must be a share of the CPUs from 0 to 1");
}

std::shared_ptr<Store> base_store(const Config& config, std::shared_ptr<Store> given) {
  if (given) return given;
  if (!config.store.empty()) return make_store(config);
  if (std::string scheme = default_store_scheme(config.transport); !scheme.empty()) {
    Config meet = config;  // e.g. the mpi transport meets through MPI
    meet.store = scheme;
    return make_store(meet);
  }
  if (config.world_size == 1) return make_memory_store();
  const std::string hint = store_hint_from_env();
  throw Error(ErrorCode::invalid_config,
              "world size " + std::to_string(config.world_size) +
                  " needs a store to meet the other ranks: set COMM_STORE (host:port or file:/dir), "
                  "run under commrun, or pass a Store to Communicator::create" + (hint.empty() ? "" : "; " + hint));
}

}  // namespace

std::string Operation::describe() const {
  std::string s = std::string(to_string(collective)) + " #" + std::to_string(seq) + " (" + std::string(algorithm) + ", " +
                  std::to_string(bytes) + " B " + std::string(to_string(dtype));
  if (collective == Collective::allreduce || collective == Collective::reduce ||
      collective == Collective::reduce_scatter)
    s += " " + std::string(to_string(op));
  if (collective == Collective::broadcast || collective == Collective::reduce) s += ", root " + std::to_string(root);
  return s + ")";
}

std::unique_ptr<CommunicatorImpl> CommunicatorImpl::create(const Config& config, std::shared_ptr<Store> given) {
  return create(config, std::move(given), Lineage{});
}

std::unique_ptr<CommunicatorImpl> CommunicatorImpl::create(const Config& config, std::shared_ptr<Store> given,
                                                           Lineage lineage) {
  validate(config);
  // This communicator's log level, subsystems and file, for every line logged
  // on its behalf from here on (ranks as threads keep theirs apart).
  auto log_context = log::make_context(config);
  log::Scope log_scope(log_context);

  std::unique_ptr<CommunicatorImpl> c(new CommunicatorImpl());
  c->log_ = std::move(log_context);
  c->config_ = config;
  c->rank_ = config.rank;
  c->size_ = config.world_size;
  c->stall_after_ = std::min(config.timeout / 4, std::chrono::milliseconds(1000));
  c->recorder_.resize(config.flight_recorder_size);
  c->bytes_sent_.assign(static_cast<std::size_t>(config.world_size), 0);

  auto base = base_store(config, std::move(given));
  if (!lineage.root) {
    lineage.root = base;
    lineage.root_ranks.resize(static_cast<std::size_t>(config.world_size));
    std::iota(lineage.root_ranks.begin(), lineage.root_ranks.end(), 0);
  }
  // Each communicator created on a store gets its own key namespace; ranks
  // create communicators in the same order, so the counters agree.
  const auto generation = base->add("comm/created/" + std::to_string(config.rank), 1);
  c->base_store_ = base;
  c->generation_ = static_cast<std::uint64_t>(generation);
  c->plain_store_ = make_prefix_store(base, "c" + std::to_string(generation) + "/");
  // Waits for other ranks' keys end as soon as one of them is known to have
  // failed or died (core/watchful_store.hpp).
  c->store_ = make_watchful_store(c->plain_store_, lineage.root, c->rank_, lineage.root_ranks);
  c->lineage_ = std::move(lineage);
  std::string tuning;  // where the link figures came from, for the log
  try {
    tuning = c->connect();
  } catch (const std::exception& e) {
    c->creation_failed(e);
  }
  register_live(c.get());
  c->log_choices(config.transport.empty() ? "chosen for this job" : "named in the configuration", tuning);
  return c;
}

// Level info: what creation chose, in a few lines a user can grep.
void CommunicatorImpl::log_choices(std::string_view transport_why, std::string_view tuning) const {
  if (!log::enabled(LogLevel::info, log::Subsystem::init)) return;
  std::string hosts;  // one log line: describe() has one line per host
  for (char ch : peers_->describe()) hosts += ch == '\n' ? std::string("; ") : std::string(1, ch);
  while (hosts.ends_with("; ")) hosts.resize(hosts.size() - 2);
  COMM_INFO("communicator rank " << rank_ << "/" << size_ << " ready: transport " << config_.transport << " ("
                                 << transport_why << "); " << peers_->num_hosts() << " host(s): " << hosts);
  // One line per link kind out of this rank: kind, how many peers, figures.
  const LinkMatrix& m = links();
  for (LinkKind kind : kAllLinkKinds) {
    int peers = 0;
    const LinkInfo* first = nullptr;
    for (int p = 0; p < size_; ++p)
      if (const LinkInfo& l = m.at(rank_, p); p != rank_ && l.kind == kind && ++peers == 1) first = &l;
    if (first)
      COMM_INFO("links: " << peers << " peer(s) over " << to_string(kind) << ", alpha " << first->alpha_us
                          << " us, beta " << first->beta_gbps << " GB/s" << (first->detail.empty() ? "" : " (")
                          << first->detail << (first->detail.empty() ? "" : ")"));
  }
  COMM_INFO("tuning: " << tuning);
}

// Called from the handler of an exception `e` out of connect(); rethrows it,
// or a PeerError naming the rank that died first when `e` (a transport's
// error: "connection refused") does not.
void CommunicatorImpl::creation_failed(const std::exception& e) {
  const auto* err = dynamic_cast<const Error*>(&e);
  int cause = err ? cause_of(*err) : -1;
  std::string message = e.what();
  bool named = false;
  if (cause < 0 && err && !err->is_usage()) {
    cause = name_cause(message, std::chrono::milliseconds(300));
    named = cause >= 0;
  }
  // The others may be waiting for this rank's keys: tell them why it is not
  // coming (they quote it), before the process may exit.
  publish_failure(store_, rank_, err ? err->code() : ErrorCode::internal,
                  "creating the communicator failed: " + message, cause, std::chrono::seconds(1));
  // The store lives in this process (store-client rank 0): keep it up until
  // the others have read why, or they would blame its host.
  if (lineage_.root_ranks[static_cast<std::size_t>(rank_)] == 0)
    linger_until_peers_failed(*plain_store_, lineage_.root.get(), rank_, lineage_.root_ranks, std::chrono::seconds(2));
  if (named) throw PeerError(err->code(), message, cause);
  throw;
}

// Everything of creation that meets the other ranks or may fail on one rank only.
std::string CommunicatorImpl::connect() {
  const Config& config = config_;
  // A usage error, but one rank alone may have it: raised here, where it is
  // published to the others (create()), not before the ranks meet.
  auto overrides = parse_override(config.algo_override);
  // The one exchange every transport and the selector rely on: who is where.
  peers_ = std::make_shared<const PeerTable>(exchange_peers(*store_, config, config.timeout));
  plans_.set_hosts(algo::HostGroups::of(peers_->hosts, size_));
  if (config_.transport.empty()) config_.transport = default_transport(*peers_);
  TransportInit init{config.rank, config.world_size, store_, &config_, peers_};
  transport_ = create_transport(config_.transport, init);
  const TransportCaps caps = transport_->caps();

  // Every rank learns every link so that all ranks select identically.
  LinkMatrix links = exchange_links(*transport_, *store_, config.timeout);
  // Measured figures replace the transports' nominal ones: calibrated now or
  // reused from a tuning file (see select/tuning.hpp).
  ComputeParams compute = default_compute(caps);
  create_engines();
  // When it calibrates, it times our algorithms through the engines, over a
  // selector made from the figures just measured (the one kept).
  const algo::HostGroups& hosts = plans_.hosts();
  const int ranks_here = hosts.host_size(hosts.host_of[static_cast<std::size_t>(rank_)]);
  TuningOutcome tuned = tune_figures(
      *transport_, *store_, rank_, size_, ranks_here, config_, links, compute,
      [&](const LinkMatrix& measured, const ComputeParams& measured_compute, NativeProfile& native,
          double calibration_elapsed_us, calib::Scratch& scratch) {
        create_selector(measured, measured_compute, native, overrides);
        return time_algorithms(calibration_elapsed_us, scratch, native);
      },
      [&](const LinkMatrix& cached, const ComputeParams& cached_compute, const NativeProfile& native,
          const std::vector<CacheCheck>& points) {
        create_selector(cached, cached_compute, native, overrides);
        return time_points(points);
      });
  if (!selector_) create_selector(links, compute, std::move(tuned.native), overrides);
  selector_->set_measured_profile(tuned.measured);
  selector_->set_deterministic(config.deterministic);
  last_resolved_ = {};  // resolved before the measured profile
  return tuned.source;
}

void CommunicatorImpl::create_selector(const LinkMatrix& links, const ComputeParams& compute, NativeProfile native,
                                       const std::vector<OverrideRule>& overrides) {
  // Calibration replaces the selector a cache check made its calls through.
  // The choice the last resolution remembers goes with it; its names stay
  // (share_names), as flight records, pooled operations and the direct
  // engine hold views of them.
  last_resolved_ = {};
  std::shared_ptr<const Selector::NameLists> names = selector_ ? selector_->name_lists() : nullptr;
  selector_ = std::make_unique<Selector>(size_, links, compute, config_.chunk_bytes, overrides, transport_->native(),
                                         schedule_engine_ != nullptr, direct_engine_.get(), plans_.hosts());
  if (names) selector_->share_names(std::move(names));
  selector_->set_native_profile(std::move(native));
}

// Engines from what the transport offers: schedules run on the host executor
// over point-to-point, or on a CUDA stream when the transport is stream
// ordered (and offers a stream engine); native collectives when offered.
void CommunicatorImpl::create_engines() {
  const TransportCaps caps = transport_->caps();
  if (!caps.stream_ordered)
    schedule_engine_ = make_host_engine(*transport_, plans_, size_, config_.chunk_bytes, bytes_sent_.data());
  else if (StreamEngine* streams = transport_->stream_engine())
    schedule_engine_ = make_stream_engine(*transport_, *streams, plans_, size_, config_.chunk_bytes);
  if (NativeCollectives* native = transport_->native()) native_engine_ = make_native_engine(*transport_, *native);
  if (DirectMemory* memory = transport_->direct())
    direct_engine_ = std::make_unique<direct::DirectEngine>(*transport_, *memory, rank_, size_);
}

Engine& CommunicatorImpl::engine_for(const Call& call, std::string_view algorithm) {
  // send/recv: point-to-point on host transports; stream-ordered transports
  // move it with their own send/recv.
  if (direct_engine_ && !call.p2p() && selector_->is_direct(call.collective, algorithm)) return *direct_engine_;
  const bool native = call.p2p() ? transport_->caps().stream_ordered : selector_->is_native(call.collective, algorithm);
  Engine* e = native ? native_engine_.get() : schedule_engine_.get();
  if (!e)
    throw Error(ErrorCode::unsupported, std::string(to_string(call.collective)) + ": transport '" +
                                            config_.transport + "' offers no " +
                                            (native ? "native collectives or send/recv" : "point-to-point messages") +
                                            " to run '" + std::string(algorithm) + "'");
  return *e;
}

CommunicatorImpl::~CommunicatorImpl() {
  log::Scope log_scope(log_.get());
  unregister_live(this);
  // A failed communicator whose store lives in this process (store-client
  // rank 0): keep the store up until the others have failed too, so that
  // they can still read who failed first (they would blame this rank).
  if (failed() && size_ > 1 && lineage_.root_ranks[static_cast<std::size_t>(rank_)] == 0)
    linger_until_peers_failed(*plain_store_, lineage_.root.get(), rank_, lineage_.root_ranks,
                              std::chrono::seconds(2));
  for (auto& op : operation_pool_) op->comm = nullptr;
  for (auto& op : active_) {
    if (op->run) op->run->cancel();
    op->run.reset();
    if (op->state == Operation::State::running) {
      op->state = Operation::State::failed;
      op->code = ErrorCode::aborted;
      op->message = op->describe() + ": the communicator was destroyed before it completed";
    }
    op->comm = nullptr;
  }
  active_.clear();
  // Operations outlive the communicator (a Work may hold one): their engine
  // state refers to the transport, which goes now.
  for (auto& op : operation_pool_) op->run.reset();
}

std::unique_ptr<CommunicatorImpl> CommunicatorImpl::split(int color, int key) {
  check_usable();
  // Everyone learns everyone's (color, key) through this communicator.
  std::vector<std::int64_t> mine{color, key};
  std::vector<std::int64_t> all(2 * static_cast<std::size_t>(size_));
  wait(*run_internal(Collective::allgather, mine.data(), all.data(), 2, DataType::i64));
  const std::uint64_t split_id = splits_++;
  std::unique_ptr<CommunicatorImpl> sub;
  if (color >= 0) {
    std::vector<std::pair<std::int64_t, int>> members;
    for (int r = 0; r < size_; ++r)
      if (all[2 * static_cast<std::size_t>(r)] == color)
        members.emplace_back(all[2 * static_cast<std::size_t>(r) + 1], r);
    std::sort(members.begin(), members.end());
    Lineage lineage{lineage_.root, {}};
    for (const auto& m : members) lineage.root_ranks.push_back(lineage_.root_ranks[static_cast<std::size_t>(m.second)]);
    Config cfg = config_;
    cfg.world_size = static_cast<int>(members.size());
    for (std::size_t i = 0; i < members.size(); ++i)
      if (members[i].second == rank_) cfg.rank = static_cast<int>(i);
    auto store =
        make_prefix_store(plain_store_, "split" + std::to_string(split_id) + "/" + std::to_string(color) + "/");
    sub = create(cfg, std::move(store), std::move(lineage));
  }
  // Nobody leaves split() until every group has met through the store: the
  // store may live in rank 0's process, which could otherwise exit first.
  wait(*run_internal(Collective::barrier, nullptr, nullptr, 0, DataType::u8));
  return sub;
}

}  // namespace comm::detail
