// Diagnostics that keep a job from hanging silently: the collective
// consistency check (COMM_CHECK) and flight-recorder dumps (on request, on
// timeout or failure, and on SIGUSR1).

#include "core/communicator_impl.hpp"
#include "util/log.hpp"

#include <csignal>
#include <cstdio>
#include <fcntl.h>
#include <mutex>
#include <set>
#include <thread>
#include <unistd.h>

namespace comm::detail {
namespace {

// ---- SIGUSR1: the handler only writes a byte to a pipe; a watcher thread
// (one per process, started with the first communicator) does the dumping,
// because a signal handler may not lock or allocate.

std::mutex g_live_mu;
std::set<const CommunicatorImpl*> g_live;
int g_signal_pipe[2] = {-1, -1};

void on_sigusr1(int) {
  const int saved = errno;
  const char byte = 1;
  [[maybe_unused]] auto n = ::write(g_signal_pipe[1], &byte, 1);
  errno = saved;
}

void watch_signals() {
  char byte;
  while (::read(g_signal_pipe[0], &byte, 1) > 0 || errno == EINTR) {
    std::lock_guard lk(g_live_mu);
    for (const CommunicatorImpl* c : g_live) c->dump_flight_recorder("SIGUSR1");
  }
}

void install_signal_dump() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction old {};
    if (sigaction(SIGUSR1, nullptr, &old) != 0) return;
    // Respect an application's own SIGUSR1 handler.
    if (old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO)) return;
    if (::pipe2(g_signal_pipe, O_CLOEXEC) != 0) return;
    std::thread(watch_signals).detach();
    struct sigaction sa {};
    sa.sa_handler = on_sigusr1;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, nullptr);
  });
}

// Fixed-size description of one call, compared across ranks by COMM_CHECK.
struct CallSignature {
  std::int64_t seq, collective, count, dtype, op, root, algorithm;
};

std::string describe(const CallSignature& s, Selector& selector) {
  const auto c = static_cast<Collective>(s.collective);
  const auto& algorithms = selector.names(c);
  std::string out = std::string(to_string(c)) + "(count=" + std::to_string(s.count) + ", " +
                    std::string(to_string(static_cast<DataType>(s.dtype)));
  if (c == Collective::allreduce || c == Collective::reduce || c == Collective::reduce_scatter)
    out += ", " + std::string(to_string(static_cast<ReduceOp>(s.op)));
  if (c == Collective::broadcast || c == Collective::reduce) out += ", root=" + std::to_string(s.root);
  if (s.algorithm >= 0 && static_cast<std::size_t>(s.algorithm) < algorithms.size())
    out += ", " + algorithms[static_cast<std::size_t>(s.algorithm)];
  return out + ")";
}

}  // namespace

void register_live(const CommunicatorImpl* c) {
  install_signal_dump();
  std::lock_guard lk(g_live_mu);
  g_live.insert(c);
}

void unregister_live(const CommunicatorImpl* c) noexcept {
  std::lock_guard lk(g_live_mu);
  g_live.erase(c);
}

std::string CommunicatorImpl::flight_recorder_json(const std::string& reason) const {
  json::Writer w;
  w.begin_object().member("rank", rank_).member("size", size_).member("pid", ::getpid());
  w.member("communicator", generation_).member("transport", config_.transport).member("reason", reason);
  w.member("failed", failed());
  recorder_.write_operations(w);
  return w.end_object().str();
}

void CommunicatorImpl::dump_flight_recorder(const std::string& reason) const noexcept {
  log::Scope log_scope(log_.get());  // also when the signal watcher thread dumps
  try {
    const std::string json = flight_recorder_json(reason) + "\n";
    if (config_.dump_dir.empty()) {
      std::fprintf(stderr, "comm[%d] flight recorder (%s): %s", rank_, reason.c_str(), json.c_str());
      return;
    }
    const std::string path = config_.dump_dir + "/comm-flight-" + std::to_string(::getpid()) + "-c" +
                             std::to_string(generation_) + ".json";
    if (FILE* f = std::fopen(path.c_str(), "w")) {
      std::fwrite(json.data(), 1, json.size(), f);
      std::fclose(f);
      COMM_INFO("flight recorder written to " << path << " (" << reason << ")");
    }
  } catch (...) {
    // Diagnostics must never turn a failure into a crash.
  }
}

void CommunicatorImpl::check_consistency(const Call& call, std::string_view algorithm) {
  const auto& names = selector_->names(call.collective);
  const auto algo_index = std::find(names.begin(), names.end(), algorithm) - names.begin();
  const CallSignature mine{static_cast<std::int64_t>(next_seq_), static_cast<std::int64_t>(call.collective),
                           call.collective == Collective::all_to_allv ? -1 : static_cast<std::int64_t>(call.count),
                           static_cast<std::int64_t>(call.dtype), static_cast<std::int64_t>(call.op),
                           static_cast<std::int64_t>(call.root), static_cast<std::int64_t>(algo_index)};
  std::vector<CallSignature> all(static_cast<std::size_t>(size_));
  constexpr std::size_t kWords = sizeof(CallSignature) / sizeof(std::int64_t);
  Call gather;
  gather.collective = Collective::allgather;
  gather.input = &mine;
  gather.output = all.data();
  gather.count = kWords;
  gather.in_bytes = sizeof mine;
  gather.out_bytes = all.size() * sizeof mine;
  gather.dtype = DataType::i64;
  gather.internal = true;
  CallOptions opts;
  opts.timeout = call.options && call.options->timeout.count() > 0 ? call.options->timeout : config_.timeout;
  gather.options = &opts;
  auto op = start(gather);
  wait(*op);
  // Collective, dtype, op, root, algorithm and (except all_to_allv) count must agree.
  for (int r = 0; r < size_; ++r) {
    const CallSignature& s = all[static_cast<std::size_t>(r)];
    const bool reduces = call.collective == Collective::allreduce || call.collective == Collective::reduce ||
                         call.collective == Collective::reduce_scatter;
    const bool rooted = call.collective == Collective::broadcast || call.collective == Collective::reduce;
    if (s.collective == mine.collective && s.count == mine.count && s.dtype == mine.dtype &&
        (!reduces || s.op == mine.op) && (!rooted || s.root == mine.root) && s.algorithm == mine.algorithm)
      continue;
    const int first = std::min(r, rank_), second = std::max(r, rank_);
    const CallSignature& a = first == rank_ ? mine : s;
    const CallSignature& b = first == rank_ ? s : mine;
    const std::string msg = std::string(to_string(call.collective)) + " #" + std::to_string(mine.seq) +
                            ": rank " + std::to_string(second) + " called " + describe(b, *selector_) + ", rank " +
                            std::to_string(first) + " called " + describe(a, *selector_) +
                            " (every rank must make the same collective calls in the same order)";
    fail_all(ErrorCode::mismatch, msg, nullptr);
    throw Error(ErrorCode::mismatch, msg);
  }
}

}  // namespace comm::detail
