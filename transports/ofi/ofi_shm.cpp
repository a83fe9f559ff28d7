// What libfabric's shm provider needs from the `ofi` transport (libfabric
// 1.17, Debian 12):
//
// - It is never chosen automatically. Every send takes a process-shared spin
//   lock in the receiver's region (prov/shm: smr_generic_sendmsg and the SAR
//   paths lock peer_smr->lock), and progress takes the one in the rank's own
//   region; a rank killed while holding one leaves every later taker spinning
//   in pthread_spin_lock forever, beyond any timeout (seen: 2 in 27 kills).
//   comm's `shm` and `ucx` transports carry same-host traffic instead.
// - Named explicitly (COMM_OFI_PROVIDER=shm or FI_PROVIDER=shm) for ranks in
//   separate processes it runs with a warning, under a watchdog that ends a
//   process stuck in the provider (ProviderWatchdog, ofi_transport.hpp).
// - Ranks that are threads of one process are refused: two endpoints in one
//   process crash inside the provider (SIGSEGV in its region locking once
//   messages reach ~120 KB, in about half the runs, with the regions' names
//   made unique too).
// - Regions get comm's own names ("comm-ofi-<pid>-<rank>-<n>"), so the files
//   a dead rank leaves in /dev/shm are known and removed: by the transport
//   when it sees a local peer's process gone, and by commrun.

#include "ofi_transport.hpp"

#include "util/log.hpp"
#include "util/process.hpp"

#include <cstdio>
#include <cstdlib>
#include <unistd.h>

namespace comm {
namespace ofi {

namespace {
using namespace std::chrono_literals;
constexpr auto kWatchdogPoll = 200ms;
// No provider call takes this long unless it cannot return.
constexpr auto kStuckAfter = 3s;
}  // namespace

std::string shm_region_name(long pid, int rank) {
  static std::atomic<unsigned> endpoints{0};
  return detail::comm_shm_prefix("ofi", pid) + std::to_string(rank) + "-" + std::to_string(endpoints.fetch_add(1));
}

ProviderWatchdog::ProviderWatchdog(std::function<std::string()> diagnose, std::function<void()> before_exit, int rank,
                                   std::chrono::milliseconds stuck_after, std::chrono::milliseconds give_up_after)
    : diagnose_(std::move(diagnose)), before_exit_(std::move(before_exit)), rank_(rank), stuck_after_(stuck_after),
      give_up_after_(give_up_after) {
  thread_ = std::thread([this] { run(); });
}

ProviderWatchdog::~ProviderWatchdog() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void ProviderWatchdog::enter() noexcept {
  entered_ns_.store(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(),
                    std::memory_order_release);
}

void ProviderWatchdog::run() {
  std::unique_lock lk(mu_);
  while (!cv_.wait_for(lk, kWatchdogPoll, [this] { return stop_; })) {
    const std::int64_t since = entered_ns_.load(std::memory_order_acquire);
    if (since == 0) continue;
    const auto inside = Clock::now().time_since_epoch() - std::chrono::nanoseconds(since);
    if (inside < stuck_after_) continue;
    std::string why;
    try {
      why = diagnose_();
    } catch (...) {
    }
    if (why.empty() && inside < give_up_after_) continue;
    if (why.empty()) why = "no peer is known dead (a stopped one may hold the provider's lock)";
    std::fprintf(stderr,
                 "comm[%d] error: ofi watchdog: a call into libfabric's shm provider has not returned for %.0f s "
                 "and cannot: %s. The provider's shared-memory lock is lost, and a thread stuck in a spin lock "
                 "cannot be unwound, so this process exits (code 70). Use COMM_TRANSPORT=shm or ucx, or "
                 "COMM_OFI_PROVIDER='tcp;ofi_rxm', where a dead peer is an error instead.\n",
                 rank_, std::chrono::duration<double>(inside).count(), why.c_str());
    std::fflush(stderr);
    try {
      before_exit_();
    } catch (...) {
    }
    std::_Exit(70);
  }
}

void OfiTransport::check_shm_use() {
  for (int a = 0; a < size_; ++a)
    for (int b = a + 1; b < size_; ++b)
      if (peers_->same_process(a, b))
        throw Error(ErrorCode::invalid_config,
                    "ofi transport: provider shm cannot run ranks that are threads of one process (ranks " +
                        std::to_string(a) + " and " + std::to_string(b) + " are both in process " +
                        std::to_string((*peers_)[a].pid) +
                        "): libfabric's shm crashes there (SIGSEGV in its region locking from ~120 KB messages, "
                        "about half the runs). Use COMM_OFI_PROVIDER='tcp;ofi_rxm', or the local transport for "
                        "ranks that are threads.");
  if (size_ == 1) return;
  COMM_WARN("ofi: provider shm was asked for explicitly: a rank killed inside it can leave the others spinning in "
            "libfabric forever (its shared-memory lock is never released); a watchdog then ends the stuck process "
            "(exit code 70) naming the dead rank. COMM_TRANSPORT=shm or ucx fail such a job cleanly instead.");
  watchdog_ = std::make_unique<ProviderWatchdog>(
      [this] { return dead_local_peers(); }, [this] { remove_regions_before_exit(); }, rank_, kStuckAfter,
      std::max<std::chrono::milliseconds>(timeout_, kStuckAfter));
}

// Runs on the watchdog's thread: reads only what never changes after creation.
std::string OfiTransport::dead_local_peers() const {
  const auto& me = procs_[static_cast<std::size_t>(rank_)];
  std::string dead;
  for (int p = 0; p < size_; ++p) {
    const auto& proc = procs_[static_cast<std::size_t>(p)];
    if (p == rank_ || !same_host_[static_cast<std::size_t>(p)] || proc.pidns != me.pidns || process_alive(proc))
      continue;
    dead += (dead.empty() ? "rank " : ", rank ") + std::to_string(p) + " (pid " + std::to_string(proc.pid) + ")";
  }
  return dead.empty() ? dead : dead + " died, probably holding the provider's lock";
}

// The files a dead same-host peer's regions left in /dev/shm (16 MiB each).
void OfiTransport::remove_regions_of(int peer) noexcept {
  const auto& proc = procs_[static_cast<std::size_t>(peer)];
  const auto& me = procs_[static_cast<std::size_t>(rank_)];
  if (!is_shm() || !same_host_[static_cast<std::size_t>(peer)] || proc.pidns != me.pidns || process_alive(proc))
    return;
  if (const auto n = detail::remove_shm_files_of(proc.pid))
    COMM_INFO("ofi: removed " << n << " shared-memory file(s) of dead rank " << peer << " (pid " << proc.pid << ")");
}

// Every dead same-host peer's (remove_regions_of); the identities may be
// missing when creation failed early.
void OfiTransport::remove_dead_peers_regions() noexcept {
  for (int p = 0; p < size_; ++p)
    if (p != rank_ && static_cast<std::size_t>(p) < procs_.size()) remove_regions_of(p);
}

// Runs on the watchdog's thread as it ends the process: this process's own
// regions (the endpoint is never closed) and those of the dead local peers
// (this rank would have removed them on seeing the failure).
void OfiTransport::remove_regions_before_exit() noexcept {
  detail::remove_shm_files_of(static_cast<long>(::getpid()));
  remove_dead_peers_regions();
}

}  // namespace ofi
}  // namespace comm
