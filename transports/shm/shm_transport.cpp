#include "shm_transport.hpp"

#include "util/log.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sched.h>
#include <sys/uio.h>

namespace comm {
namespace shm {
namespace {

// A setting from Config::transport_options (key) or else the environment (var).
struct Raw {
  std::string text;
  std::string name;  // what to call it in errors
};

// A setting the Config way: transport_options["shm.<setting>"], else COMM_SHM_<SETTING>.
std::optional<Raw> lookup(const Config& config, const char* setting) {
  std::string text = config.transport_option("shm", setting);
  if (text.empty()) return std::nullopt;
  const std::string key = std::string("shm.") + setting;
  return Raw{std::move(text), config.transport_options.count(key)
                                  ? "transport option " + key
                                  : Config::transport_option_variable("shm", setting)};
}

long parse_count(const Raw& r, long max) {
  long x = 0;
  const auto [end, ec] = std::from_chars(r.text.data(), r.text.data() + r.text.size(), x);
  if (ec != std::errc{} || end != r.text.data() + r.text.size() || x < 0 || x > max)
    throw Error(ErrorCode::invalid_config, r.name + " = '" + r.text + "' is not valid: expected an integer from 0 to " +
                                               std::to_string(max));
  return x;
}

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

std::string to_hex(std::uintptr_t v) {
  char buf[2 * sizeof v + 1];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, 16);
  return ec == std::errc{} ? std::string(buf, end) : std::string("?");
}

std::string join(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

}  // namespace

int group_cpus(const PeerTable& peers) {
  cpu_set_t all, one;
  CPU_ZERO(&all);
  if (::sched_getaffinity(0, sizeof all, &all) != 0) return 1;
  for (const PeerInfo& p : peers.peers) {
    CPU_ZERO(&one);
    if (p.pid > 0 && ::sched_getaffinity(static_cast<pid_t>(p.pid), sizeof one, &one) == 0) CPU_OR(&all, &all, &one);
  }
  return std::max(1, CPU_COUNT(&all));
}

Settings Settings::from(const Config& config, int local_ranks, int cpus) {
  Settings s;
  if (auto r = lookup(config, "size")) s.size = parse_bytes(r->text, r->name);
  if (local_ranks > (cpus > 0 ? cpus : usable_cpus())) s.wait.spin = std::chrono::nanoseconds(0);  // a spinner holds a core a peer needs
  if (auto r = lookup(config, "spin_us"))
    s.wait.spin = std::chrono::microseconds(parse_count(*r, 10'000'000));
  if (auto r = lookup(config, "yield_us"))
    s.wait.yield = std::chrono::microseconds(parse_count(*r, 10'000'000));
  if (auto r = lookup(config, "cma")) s.cma = parse_count(*r, 1) == 1;
  return s;
}

ShmTransport::ShmTransport(const TransportInit& init, const Settings& settings)
    : TransportBase("shm", init) {
  const auto timeout = init.config ? init.config->timeout : std::chrono::milliseconds(60'000);
  const std::string what = init.config && init.config->transport_options.count("shm.size")
                               ? "transport option shm.size"
                               : Config::transport_option_variable("shm", "size");
  const Layout layout = Layout::compute(size_, settings.size, what);
  segment_ = Segment::attach(*init.store, rank_, layout, timeout);
  sync_ = std::make_unique<Sync>(segment_, rank_, settings.wait);
  p2p_ = std::make_unique<P2p>(segment_, *sync_, rank_, P2pOptions{settings.cma});
  // Every rank's probe word is published before anyone probes.
  init.store->set("shm/probe/" + std::to_string(rank_), "1");
  std::vector<std::string> keys;
  for (int r = 0; r < size_; ++r) keys.push_back("shm/probe/" + std::to_string(r));
  init.store->wait(keys, timeout);
  p2p_->probe_peers();
  agree_on_peer_reads(*init.store, settings.cma, timeout);
  COMM_INFO("shm: rank " << rank_ << " of " << size_ << " on segment " << segment_.name() << " ("
                         << layout.total << " B, windows of " << layout.window_bytes << " B, rings of "
                         << layout.ring_bytes << " B" << (size_ > 1 && p2p_->cma((rank_ + 1) % size_)
                                                              ? ", cross-memory reads on"
                                                              : "") << ")");
}

// Direct-memory algorithms that read peers' buffers must be eligible on every
// rank or on none, so the ranks pool what their probes found.
void ShmTransport::agree_on_peer_reads(Store& store, bool allowed, std::chrono::milliseconds timeout) {
  bool mine = allowed;
  for (int p = 0; p < size_; ++p) mine = mine && (p == rank_ || p2p_->cma(p));
  store.set("shm/reads/" + std::to_string(rank_), mine ? "1" : "0");
  bool all = mine;
  for (int p = 0; p < size_ && all; ++p) all = p == rank_ || store.get("shm/reads/" + std::to_string(p), timeout) == "1";
  if (all) return;
  no_peer_reads_ = !allowed ? "shm.cma / COMM_SHM_CMA=0 forbids cross-memory reads"
                   : !mine  ? "process_vm_readv to a peer is not permitted here (ptrace restrictions such as "
                              "/proc/sys/kernel/yama/ptrace_scope, or ranks of different users)"
                            : "another rank may not process_vm_readv every peer (cross-memory reads off there, "
                              "ptrace restrictions, or ranks of different users)";
}

void ShmTransport::read(int rank, const void* remote, void* local, std::size_t bytes) {
  auto* to = static_cast<std::byte*>(local);
  auto from = reinterpret_cast<std::uintptr_t>(remote);
  while (bytes > 0) {
    iovec l{to, bytes};
    iovec r{reinterpret_cast<void*>(from), bytes};
    const ssize_t got = ::process_vm_readv(p2p_->pid(rank), &l, 1, &r, 1, 0);
    if (got > 0) {
      to += got;
      from += static_cast<std::uintptr_t>(got);
      bytes -= static_cast<std::size_t>(got);
      continue;
    }
    const int err = got < 0 ? errno : EFAULT;
    if (err == EINTR) continue;
    if (err == ESRCH || !segment_.alive(rank))
      throw Error(ErrorCode::peer_failed, "shm: rank " + std::to_string(rank) + " " + segment_.why_gone(rank) +
                                              " while rank " + std::to_string(rank_) + " read its buffer");
    throw Error(ErrorCode::transport_failure,
                "shm: rank " + std::to_string(rank_) + " could not read " + std::to_string(bytes) + " B of rank " +
                    std::to_string(rank) + "'s buffer at 0x" + to_hex(from) + ": " + std::strerror(err) +
                    (err == EFAULT ? " (the buffer is not mapped there: freed while in use?)" : ""));
  }
}

ShmTransport::~ShmTransport() {
  p2p_.reset();
  sync_.reset();
  segment_.close();
}

TransportCaps ShmTransport::caps() const noexcept {
  return TransportCaps{.host_memory = true, .can_block = true, .peer_failure_detection = true};
}

LinkInfo ShmTransport::link(int peer) const {
  check_peer("link", peer);
  return shm_link(peer == rank_, p2p_->eager_limit(), peer != rank_ && p2p_->cma(peer));
}

void ShmTransport::isend(int peer, std::uint64_t tag, const void* data, std::size_t bytes, Completion& c) {
  p2p_->isend(peer, tag, data, bytes, c);
}

void ShmTransport::irecv(int peer, std::uint64_t tag, void* data, std::size_t bytes, Completion& c) {
  p2p_->irecv(peer, tag, data, bytes, c);
}

bool ShmTransport::progress() { return p2p_->progress(); }

void ShmTransport::interrupt() noexcept { sync_->interrupt(); }

void ShmTransport::cancel(Completion& c) noexcept { p2p_->cancel(c); }

void ShmTransport::wait(std::chrono::steady_clock::time_point deadline) {
  // Return about every millisecond once spinning is over (and after every
  // sleep), so that the caller's progress() checks peers' liveness.
  bool poke = false;
  sync_->wait_until([&] { return poke || p2p_->has_work(); }, [&] { poke = true; }, deadline);
}

// ---- DirectMemory -------------------------------------------------------------

// Cost figures: two processes on the 2-core development VM, comm-bench
// mem_oneshot / mem_twoshot at 8 KiB-512 KiB and the cache-line ping-pong of
// shm_floor.c, all measured side by side.
DirectMemoryInfo ShmTransport::info() const noexcept {
  DirectMemoryInfo i;
  i.memory = MemoryKind::host;
  i.window_bytes = segment_.layout().window_bytes;
  i.slots = kSlots;
  i.spin_ns = static_cast<std::uint32_t>(std::min<std::int64_t>(sync_->policy().spin.count(), UINT32_MAX));
  i.flag_latency_us = 0.1;
  i.read_gbps = 12.0;
  i.copy_gbps = 20.0;
  i.reduce_gbps = 16.0;
  // process_vm_readv between two processes of the VM: 1.8 us for 4 KiB, 6.1 us
  // for 64 KiB, 39.5 us for 512 KiB (medians of 200).
  i.peer_read_us = 1.5;
  i.peer_read_gbps = 13.0;
  i.no_peer_reads = no_peer_reads_ ? no_peer_reads_ : "";
  return i;
}

void ShmTransport::signal(unsigned slot, std::uint64_t value, void*) noexcept {
  std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(window(rank_, slot)))
      .store(value, std::memory_order_release);
  sync_->wake_sleepers();
}

void ShmTransport::wait(unsigned slot, std::span<const FlagWait> waits, std::chrono::steady_clock::time_point deadline,
                        void*) {
  auto ready = [&] {
    for (const FlagWait& w : waits)
      if (flag(w.rank, slot) < w.value) return false;
    return true;
  };
  switch (sync_->wait_until(ready, [&] { check_direct_peers(slot, waits); }, deadline)) {
    case WaitOutcome::ready: return;
    case WaitOutcome::timeout: fail_direct_wait(slot, waits);
    case WaitOutcome::interrupted:
      throw Error(ErrorCode::aborted, "shm: rank " + std::to_string(rank_) + " was interrupted (abort) while waiting");
  }
}

void ShmTransport::fail_direct_wait(unsigned slot, std::span<const FlagWait> waits) const {
  std::vector<int> behind;
  for (const FlagWait& w : waits)
    if (flag(w.rank, slot) < w.value) behind.push_back(w.rank);
  // The wording of the core's timeouts, so that tools and people read one phrase.
  const bool one = behind.size() == 1;
  throw Error(ErrorCode::timeout, "shm: rank " + std::to_string(rank_) + " timed out waiting for " +
                                      (one ? "rank " : "ranks ") + join(behind) + ", which " +
                                      (one ? "has" : "have") +
                                      " not arrived: frozen, stuck outside comm, or far behind");
}

void ShmTransport::check_direct_peers(unsigned slot, std::span<const FlagWait> waits) {
  for (const FlagWait& w : waits) {
    if (flag(w.rank, slot) >= w.value || segment_.alive(w.rank)) continue;
    if (flag(w.rank, slot) >= w.value) continue;  // it signalled, then went
    if (segment_.control(w.rank).state.load(std::memory_order_acquire) != RankState::departed) {
      segment_.post_obituary(w.rank, rank_);
      sync_->wake_sleepers();
    }
    throw Error(ErrorCode::peer_failed, "shm: rank " + std::to_string(w.rank) + " " + segment_.why_gone(w.rank) +
                                            " while rank " + std::to_string(rank_) + " waited for it");
  }
  if (std::string obit = segment_.obituary(); !obit.empty())
    throw Error(ErrorCode::peer_failed, "shm: " + obit + ", so this operation cannot complete");
}

}  // namespace shm

namespace {

std::unique_ptr<Transport> create_shm(const TransportInit& init) {
  const PeerTable& peers = *init.peers;
  if (peers.num_hosts() > 1) {
    std::string hosts = peers.describe();
    while (!hosts.empty() && hosts.back() == '\n') hosts.pop_back();
    for (auto& ch : hosts)
      if (ch == '\n') ch = ';';
    throw Error(ErrorCode::invalid_config,
                "transport 'shm' joins the ranks of one host, but this group of " + std::to_string(init.size) +
                    " ranks spans " + std::to_string(peers.num_hosts()) + " hosts (" + hosts +
                    "); use ucx, ofi or gloo between hosts");
  }
  const Config config = init.config ? *init.config : Config{};
  return std::make_unique<shm::ShmTransport>(init, shm::Settings::from(config, init.size, shm::group_cpus(peers)));
}

}  // namespace

void register_shm_transport() { register_transport("shm", create_shm); }

}  // namespace comm
