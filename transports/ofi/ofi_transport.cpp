// Set-up and data path of the `ofi` transport. Provider choice, links and
// failure detection live in ofi_links.cpp.

#include "ofi_transport.hpp"

#include <comm/version.hpp>

#include "util/log.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

namespace comm {
namespace ofi {

namespace {

constexpr std::uint64_t kTagMask = (std::uint64_t{1} << kTagBits) - 1;
// Polling this long before sleeping keeps the latency of a reply that is
// already on its way (a few microseconds) off the sleep/wake path.
constexpr auto kSpin = std::chrono::microseconds(20);
// After this much polling every poll also yields: a peer that shares our core
// (an unbound job, a loaded machine) can only answer once we let it run, and
// a 20 µs lone spin made every hop cost 20 µs there (8 B all-reduce over shm,
// two ranks on one core: 46 µs). A shm reply from another core takes ~1 µs.
constexpr auto kSpinAlone = std::chrono::microseconds(2);
// Without a wait object (shm) waits keep polling and yielding this long
// before napping: a nap lasts at least the timer slack (50 µs) however short
// it is asked to be, so napping early put 50-100 µs stalls into collectives
// whose steps are a few µs apart (tree 83 µs, twoshot 8 µs at 8 B).
constexpr auto kYieldSpin = std::chrono::microseconds(200);
constexpr auto kMinNap = std::chrono::microseconds(50);
constexpr auto kMaxNap = std::chrono::microseconds(500);
constexpr auto kBacklogRetry = std::chrono::milliseconds(1);

std::string fi_error_text(int err) { return fi_strerror(err < 0 ? -err : err); }

[[noreturn]] void throw_fi(const char* call, int ret, const std::string& provider) {
  throw Error(ErrorCode::transport_failure, std::string("ofi: ") + call + " failed for provider '" + provider +
                                                "': " + fi_error_text(ret) + " (" + std::to_string(ret) + ")");
}

std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "(none)" : s;
}

}  // namespace

OfiTransport::OfiTransport(const TransportInit& init)
    : TransportBase("ofi", init),
      timeout_(init.config ? init.config->timeout : std::chrono::milliseconds(300'000)),
      peers_(init.peers) {
  if (size_ > 1 && !init.store)
    throw Error(ErrorCode::invalid_argument,
                "ofi transport: " + std::to_string(size_) + " ranks need a Store to exchange endpoint names");
  if (!peers_ || peers_->size() != size_)
    throw Error(ErrorCode::invalid_argument, "ofi transport: TransportInit::peers must describe all " +
                                                 std::to_string(size_) + " ranks");
  try {
    const std::string requested = init.config ? init.config->transport_option("ofi", "provider")
                                              : Config{}.transport_option("ofi", "provider");
    const char* env = std::getenv("FI_PROVIDER");
    ProcessIdentity me = this_process();
    if (!requested.empty()) {
      // Checked before meeting the others, so a typo fails at once on every rank.
      InfoPtr hints = make_hints(requested);
      fi_info* found = nullptr;
      const int ret = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), nullptr, nullptr, 0,
                                 hints.get(), &found);
      if (ret != 0 || !found)
        throw Error(ErrorCode::invalid_config,
                    "ofi transport: provider '" + requested + "' (transport option ofi.provider / COMM_OFI_PROVIDER) offers no tagged reliable-"
                    "datagram endpoint here (" + fi_error_text(ret) + "); providers that do: " +
                    join(offered_providers()) + (env ? std::string(" (filtered by FI_PROVIDER=") + env + ")" : "") +
                    ". Set COMM_OFI_PROVIDER to one of them, or leave it unset for automatic choice.");
      fi_freeinfo(found);
      provider_ = requested;
    } else if (env) {
      const auto offered = offered_providers();
      if (offered.empty())
        throw Error(ErrorCode::invalid_config,
                    std::string("ofi transport: FI_PROVIDER=") + env +
                        " leaves no provider offering a tagged reliable-datagram endpoint here; see `fi_info -l` "
                        "and unset FI_PROVIDER or name a provider it lists");
      provider_ = offered.front();
    } else {
      me.providers = offered_providers();
    }
    me.provider = provider_;

    procs_.resize(static_cast<std::size_t>(size_));
    procs_[static_cast<std::size_t>(rank_)] = me;
    if (size_ > 1) {
      init.store->set("ofi/process/" + std::to_string(rank_), encode(me));
      for (int r = 0; r < size_; ++r)
        if (r != rank_)
          procs_[static_cast<std::size_t>(r)] =
              decode_identity(init.store->get("ofi/process/" + std::to_string(r), timeout_), r);
    }
    for (int r = 0; r < size_; ++r) same_host_.push_back(peers_->same_host(rank_, r));
    choose_provider();
    open_endpoint();
    exchange_names(init.store.get());
    pending_per_peer_.assign(static_cast<std::size_t>(size_), 0);
    backlogged_.assign(static_cast<std::size_t>(size_), 0);
    reached_.assign(static_cast<std::size_t>(size_), 0);
    probe_refused_since_.assign(static_cast<std::size_t>(size_), Clock::time_point{});
    probe_in_flight_.assign(static_cast<std::size_t>(size_), nullptr);
    peer_failed_.assign(static_cast<std::size_t>(size_), std::string());
    if (probe_tag_) post_probe_recv();
    next_liveness_ = Clock::now() + kLivenessInterval;
  } catch (...) {
    release();
    throw;
  }
}

OfiTransport::~OfiTransport() {
  release();
  // However this communicator ended (a peer's failure seen first by the
  // store, a timeout, a clean exit), a same-host peer that is dead by now has
  // nobody else to remove its regions when it was not started by commrun.
  remove_dead_peers_regions();
}

void OfiTransport::release() noexcept {
  close_provider();
  if (wake_fd_ >= 0) ::close(wake_fd_);
  wake_fd_ = -1;
}

void OfiTransport::close_provider() noexcept {
  // Closing the endpoint discards whatever is still posted; only then may the
  // Op records (and the buffers they point at) be forgotten.
  InProvider watched(watchdog_.get());
  if (ep_) fi_close(&ep_->fid);
  if (av_) fi_close(&av_->fid);
  if (cq_) fi_close(&cq_->fid);
  if (domain_) fi_close(&domain_->fid);
  if (fabric_) fi_close(&fabric_->fid);
  ep_ = nullptr;
  av_ = nullptr;
  cq_ = nullptr;
  domain_ = nullptr;
  fabric_ = nullptr;
  cq_fd_ = -1;
}

void OfiTransport::open_endpoint() {
  InfoPtr hints = make_hints(provider_);
  fi_info* found = nullptr;
  int ret = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), nullptr, nullptr, 0, hints.get(), &found);
  if (ret != 0 || !found) throw_fi("fi_getinfo", ret, provider_);
  // The first entry is the provider's preferred one; keep only it.
  info_.reset(fi_dupinfo(found));
  fi_freeinfo(found);
  if (!info_) throw Error(ErrorCode::transport_failure, "ofi: fi_dupinfo failed (out of memory)");
  provider_ = info_->fabric_attr->prov_name;

  const int bits = tag_bits(*info_);
  if (bits < kTagBits)
    throw Error(ErrorCode::unsupported, "ofi transport: provider '" + provider_ + "' matches only " +
                                            std::to_string(bits) + " tag bits; comm needs " +
                                            std::to_string(kTagBits) + ". Choose another COMM_OFI_PROVIDER.");
  // A spare tag bit carries liveness probes (see check_liveness). Over shm a
  // send to a dead process still succeeds, so probing it would prove nothing.
  if (bits > kTagBits && !is_shm()) probe_tag_ = std::uint64_t{1} << (bits - 1);

  if ((ret = fi_fabric(info_->fabric_attr, &fabric_, nullptr))) throw_fi("fi_fabric", ret, provider_);
  if ((ret = fi_domain(fabric_, info_.get(), &domain_, nullptr))) throw_fi("fi_domain", ret, provider_);
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  av_attr.count = static_cast<std::size_t>(size_);
  if ((ret = fi_av_open(domain_, &av_attr, &av_, nullptr))) throw_fi("fi_av_open", ret, provider_);

  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  // Only providers whose progress engine is fed by file descriptors can wake a
  // sleeper: shm's fd is never signalled (fi_cq_sread deadlocks there).
  cq_attr.wait_obj = blocking_wait_supported() ? FI_WAIT_FD : FI_WAIT_NONE;
  ret = fi_cq_open(domain_, &cq_attr, &cq_, nullptr);
  if (ret && cq_attr.wait_obj != FI_WAIT_NONE) {
    COMM_INFO("ofi: " << provider_ << " cannot open a CQ with an fd wait object (" << fi_error_text(ret)
                      << "); waits will poll with back-off");
    cq_attr.wait_obj = FI_WAIT_NONE;
    ret = fi_cq_open(domain_, &cq_attr, &cq_, nullptr);
  }
  if (ret) throw_fi("fi_cq_open", ret, provider_);
  if (cq_attr.wait_obj == FI_WAIT_FD && fi_control(&cq_->fid, FI_GETWAIT, &cq_fd_) == 0 && cq_fd_ >= 0) {
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    can_block_ = wake_fd_ >= 0;
  }

  if ((ret = fi_endpoint(domain_, info_.get(), &ep_, nullptr))) throw_fi("fi_endpoint", ret, provider_);
  if ((ret = fi_ep_bind(ep_, &av_->fid, 0))) throw_fi("fi_ep_bind(av)", ret, provider_);
  if ((ret = fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV))) throw_fi("fi_ep_bind(cq)", ret, provider_);
  if (is_shm()) {
    // shm names its region after the process ("<pid>:0:0", /dev/shm): ranks
    // that are threads of one process would share one region, and nobody
    // could tell which files a dead rank left. Our own name fixes both.
    std::string name = shm_region_name(static_cast<long>(::getpid()), rank_);
    if ((ret = fi_setname(&ep_->fid, name.data(), name.size() + 1))) throw_fi("fi_setname", ret, provider_);
  }
  if ((ret = fi_enable(ep_))) throw_fi("fi_enable", ret, provider_);
  std::size_t len = 0;
  fi_getname(&ep_->fid, nullptr, &len);  // -FI_ETOOSMALL, sets len
  own_name_.resize(len);
  if ((ret = fi_getname(&ep_->fid, own_name_.data(), &len))) throw_fi("fi_getname", ret, provider_);
  own_name_.resize(len);

  COMM_INFO("ofi: provider " << provider_ << " (fabric " << info_->fabric_attr->name << ", domain "
                             << info_->domain_attr->name << "), " << bits << " tag bits, waits "
                             << (can_block_ ? "sleep on the CQ fd" : "poll with back-off") << ", FI_HMEM "
                             << (offers_hmem(provider_) ? "offered (unused: host memory only)" : "not offered")
                             << ", peer failure detection: " << failure_detection_text());
}

void OfiTransport::exchange_names(Store* store) {
  if (size_ > 1) store->set("ofi/name/" + std::to_string(rank_), own_name_);
  addrs_.assign(static_cast<std::size_t>(size_), FI_ADDR_NOTAVAIL);
  // One insert per rank, in rank order: names may differ in length (IPv4/IPv6)
  // and FI_AV_TABLE hands out consecutive indices.
  for (int r = 0; r < size_; ++r) {
    const std::string name = r == rank_ ? own_name_ : store->get("ofi/name/" + std::to_string(r), timeout_);
    const int n = fi_av_insert(av_, name.data(), 1, &addrs_[static_cast<std::size_t>(r)], 0, nullptr);
    if (n != 1)
      throw Error(ErrorCode::transport_failure, "ofi: fi_av_insert of rank " + std::to_string(r) +
                                                    "'s address failed over " + provider_ + ": " +
                                                    fi_error_text(n < 0 ? n : -FI_EINVAL));
  }
}

TransportCaps OfiTransport::caps() const noexcept {
  // Operations are posted without memory descriptors; device memory would need
  // FI_HMEM plus registration (FI_MR_HMEM), which this transport does not do.
  return TransportCaps{.host_memory = true, .cuda_memory = false, .can_block = can_block_,
                       .peer_failure_detection = detects_failures()};
}

LinkInfo OfiTransport::link(int peer) const {
  check_peer("link", peer);
  if (peer == rank_) return {LinkKind::self, 0.05, 10.0, "ofi self (" + provider_ + ")"};
  return provider_link(*info_, same_host_[static_cast<std::size_t>(peer)]);
}

// ---- data path --------------------------------------------------------------

void OfiTransport::check_post(int peer, std::uint64_t tag, std::size_t bytes, const char* what) const {
  if (peer < 0 || peer >= size_)
    throw Error(ErrorCode::invalid_argument, std::string("ofi ") + what + ": peer " + std::to_string(peer) +
                                                 " is outside [0, " + std::to_string(size_) + ")");
  if (tag & ~kTagMask)
    throw Error(ErrorCode::invalid_argument, std::string("ofi ") + what + ": tag " + hex(tag) + " exceeds " +
                                                 std::to_string(kTagBits) + " bits");
  if (bytes > info_->ep_attr->max_msg_size)
    throw Error(ErrorCode::unsupported, std::string("ofi ") + what + ": " + std::to_string(bytes) +
                                            " B exceeds the provider's max_msg_size of " +
                                            std::to_string(info_->ep_attr->max_msg_size) + " B (" + provider_ + ")");
}

void OfiTransport::isend(int peer, std::uint64_t tag, const void* data, std::size_t bytes, Completion& c) {
  check_post(peer, tag, bytes, "isend");
  submit(new_op(Op::Kind::send, peer, tag, const_cast<void*>(data), bytes, &c));
}

void OfiTransport::irecv(int peer, std::uint64_t tag, void* data, std::size_t bytes, Completion& c) {
  check_post(peer, tag, bytes, "irecv");
  submit(new_op(Op::Kind::recv, peer, tag, data, bytes, &c));
}

Op* OfiTransport::new_op(Op::Kind kind, int peer, std::uint64_t tag, void* buf, std::size_t bytes, Completion* c) {
  Op* op;
  if (free_.empty()) {
    op = &pool_.emplace_back();
  } else {
    op = free_.back();
    free_.pop_back();
  }
  *op = Op{};
  op->kind = kind;
  op->peer = peer;
  op->tag = tag;
  op->buf = buf;
  op->bytes = bytes;
  op->c = c;
  op->posted_at = Clock::now();
  if (c) {
    c->reset();
    active_[c] = op;
    ++pending_per_peer_[static_cast<std::size_t>(peer)];
  }
  return op;
}

void OfiTransport::finish(Op* op) noexcept {
  if (op->c) {
    active_.erase(op->c);
    --pending_per_peer_[static_cast<std::size_t>(op->peer)];
    op->c = nullptr;
  }
  free_.push_back(op);
}

void OfiTransport::complete(Op* op, std::size_t bytes) noexcept {
  Completion* c = op->c;
  finish(op);
  if (c) c->complete(bytes);
}

void OfiTransport::fail(Op* op, ErrorCode code, std::string message, int cause) noexcept {
  Completion* c = op->c;
  const int peer = op->peer;
  finish(op);
  if (c) c->fail(code, std::move(message), cause == peer ? -1 : cause);
}

std::string OfiTransport::describe(const Op& op) const {
  const bool send = op.kind == Op::Kind::send || op.kind == Op::Kind::probe_send;
  return std::string(send ? "send to" : "recv from") + " rank " + std::to_string(op.peer) + " (tag " + hex(op.tag) +
         ", " + std::to_string(op.bytes) + " B, " + provider_ + ")";
}

void OfiTransport::submit(Op* op) {
  // Operations with live peers posted after a death run normally (the
  // survivors may still talk to each other); those pending then failed.
  if (!peer_failed_[static_cast<std::size_t>(op->peer)].empty())
    return fail(op, ErrorCode::peer_failed, describe(*op) + ": " + death_of(op->peer));
  if (!broken_.empty()) return fail(op, ErrorCode::transport_failure, describe(*op) + ": " + broken_);
  // Later operations to the same peer queue behind refused ones so posting
  // order (which is matching order) is kept; other peers are not held up.
  std::size_t& queued = backlogged_[static_cast<std::size_t>(op->peer)];
  if (queued) {
    backlog_.push_back(op);
    ++queued;
    return;
  }
  const ssize_t ret = post(op);
  if (ret == 0) {
    op->state = Op::State::posted;
  } else if (ret == -FI_EAGAIN) {
    // Out of provider resources: completions free them. Queued before the
    // poll, because a completion may report a failure, and withdrawing then
    // looks for this operation among the queued ones (an operation marked as
    // queued but missing from the queue corrupted it).
    backlog_.push_back(op);
    ++queued;
    poll_cq();
    drain_backlog();
  } else {
    fail(op, ErrorCode::transport_failure, describe(*op) + ": posting failed: " + fi_error_text(static_cast<int>(ret)));
  }
}

ssize_t OfiTransport::post(Op* op) noexcept {
  const fi_addr_t addr = addrs_[static_cast<std::size_t>(op->peer)];
  InProvider watched(watchdog_.get());
  switch (op->kind) {
    case Op::Kind::send:
    case Op::Kind::probe_send:
      return fi_tsend(ep_, op->buf, op->bytes, nullptr, addr, op->tag, &op->ctx);
    case Op::Kind::recv:
      return fi_trecv(ep_, op->buf, op->bytes, nullptr, addr, op->tag, 0, &op->ctx);
    case Op::Kind::probe_recv:
      return fi_trecv(ep_, op->buf, op->bytes, nullptr, FI_ADDR_UNSPEC, op->tag, 0, &op->ctx);
  }
  return -FI_EINVAL;
}

bool OfiTransport::drain_backlog() {
  if (backlog_.empty()) return false;
  bool changed = false;
  blocked_.assign(static_cast<std::size_t>(size_), 0);
  for (auto it = backlog_.begin(); it != backlog_.end();) {
    Op* op = *it;
    const auto p = static_cast<std::size_t>(op->peer);
    if (blocked_[p]) {
      ++it;
      continue;
    }
    const ssize_t ret = post(op);
    if (ret == -FI_EAGAIN) {
      blocked_[p] = 1;  // keep this peer's order: nothing of it may overtake
      ++it;
      continue;
    }
    it = backlog_.erase(it);
    --backlogged_[p];
    if (ret == 0) {
      op->state = Op::State::posted;
    } else {
      fail(op, ErrorCode::transport_failure, describe(*op) + ": posting failed: " + fi_error_text(static_cast<int>(ret)));
      changed = true;
    }
  }
  return changed;
}

void OfiTransport::unbacklog(Op* op) noexcept {
  backlog_.erase(std::find(backlog_.begin(), backlog_.end(), op));
  --backlogged_[static_cast<std::size_t>(op->peer)];
}

bool OfiTransport::poll_cq() {
  fi_cq_tagged_entry entries[16];
  bool changed = false;
  // A handler may close the endpoint (a failure it reports; see close_endpoint).
  while (cq_) {
    ssize_t n;
    {
      InProvider watched(watchdog_.get());
      n = fi_cq_read(cq_, entries, 16);
    }
    if (n > 0) {
      for (ssize_t i = 0; i < n; ++i) on_success(static_cast<Op*>(entries[i].op_context), entries[i].len);
      changed = true;
      if (n < 16) break;
    } else if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      ssize_t got;
      {
        InProvider watched(watchdog_.get());
        got = fi_cq_readerr(cq_, &err, 0);
      }
      if (got > 0) {
        on_error(err);
        changed = true;
      }
    } else if (n == -FI_EAGAIN) {
      break;
    } else {
      fail_all(ErrorCode::transport_failure, "fi_cq_read failed: " + fi_error_text(static_cast<int>(n)));
      return true;
    }
  }
  return changed;
}

void OfiTransport::on_success(Op* op, std::size_t len) {
  if (op->kind != Op::Kind::probe_recv) reached_[static_cast<std::size_t>(op->peer)] = 1;
  switch (op->kind) {
    case Op::Kind::send: return complete(op, op->bytes);
    case Op::Kind::recv: return complete(op, len);
    case Op::Kind::probe_send:
      if (probe_in_flight_[static_cast<std::size_t>(op->peer)] == op)
        probe_in_flight_[static_cast<std::size_t>(op->peer)] = nullptr;
      return finish(op);
    case Op::Kind::probe_recv:
      // A peer checked we are alive; stay ready for the next probe.
      finish(op);
      probe_recv_ = nullptr;
      return post_probe_recv();
  }
}

void OfiTransport::on_error(const fi_cq_err_entry& err) {
  Op* op = static_cast<Op*>(err.op_context);
  if (!op) {
    COMM_WARN("ofi: " << provider_ << " reported an error without an operation: " << fi_error_text(err.err));
    return;
  }
  char buf[256] = {};
  const char* detail = fi_cq_strerror(cq_, err.prov_errno, err.err_data, buf, sizeof buf);
  // shm reports negative error numbers, rxm positive ones.
  const int code = err.err < 0 ? -err.err : err.err;
  std::string text = fi_error_text(code);
  if (detail && *detail && text != detail) text += std::string(": ") + detail;
  const std::size_t p = static_cast<std::size_t>(op->peer);

  switch (op->kind) {
    case Op::Kind::probe_recv:
      finish(op);
      probe_recv_ = nullptr;
      if (code != FI_ECANCELED) {
        COMM_DEBUG("ofi: probe receive failed (" << text << "); reposting");
        post_probe_recv();
      }
      return;
    case Op::Kind::probe_send: {
      const int peer = op->peer;
      if (probe_in_flight_[p] == op) probe_in_flight_[p] = nullptr;
      finish(op);
      if (code != FI_ECANCELED) fail_peer(peer, "a liveness probe failed: " + text);
      return;
    }
    case Op::Kind::send:
    case Op::Kind::recv:
      break;
  }
  if (code == FI_ECANCELED) {
    if (const int cause = dead_cause(op->peer); cause >= 0)
      return fail(op, ErrorCode::peer_failed, describe(*op) + ": " + death_of(cause), cause);
    return fail(op, ErrorCode::aborted, describe(*op) + ": cancelled");
  }
  if (code == FI_ETRUNC) {
    // len is what fitted, olen what did not; libfabric 1.17's shm and rxm
    // leave both 0, so the sender's size is then unknown.
    const std::size_t sent = err.len + err.olen;
    return fail(op, ErrorCode::mismatch,
                "rank " + std::to_string(op->peer) + " sent " +
                    (sent > op->bytes ? std::to_string(sent) + " B" : std::string("more than that")) +
                    ", this rank expected at most " + std::to_string(op->bytes) +
                    " B (counts differ across ranks; " + describe(*op) + " was truncated)");
  }
  if (is_connection_error(code)) {
    const int peer = op->peer;
    const std::string what = describe(*op) + " failed: " + text;
    fail(op, ErrorCode::peer_failed, what + " — rank " + std::to_string(peer) + " is unreachable");
    return fail_peer(peer, what);
  }
  fail(op, ErrorCode::transport_failure, describe(*op) + " failed: " + text);
}

bool OfiTransport::progress() {
  if (!ep_) return false;  // closed: every operation has failed, none can be posted
  bool changed = drain_backlog();
  changed |= poll_cq();
  if (!ep_) return true;  // a failure it reported closed the endpoint
  const auto now = Clock::now();
  if (now >= next_liveness_) changed |= check_liveness(now);
  return changed;
}

void OfiTransport::wait(Clock::time_point deadline) {
  auto interrupted = [this] {
    if (!interrupted_.exchange(false, std::memory_order_acq_rel)) return false;
    if (wake_fd_ >= 0) {
      std::uint64_t v;
      [[maybe_unused]] auto r = ::read(wake_fd_, &v, sizeof v);
    }
    return true;
  };
  const auto start = Clock::now();
  const auto spin_end = std::min(deadline, start + (can_block_ ? kSpin : kYieldSpin));
  for (auto now = start;; now = Clock::now()) {
    if (progress() || interrupted()) return;
    if (now >= spin_end) break;
    if (now - start >= kSpinAlone) ::sched_yield();
  }

  if (can_block_ && cq_) {
    fid* fids[] = {&cq_->fid};
    // fi_trywait says whether sleeping is safe: -FI_EAGAIN means the provider
    // has work that only another poll will surface.
    if (fi_trywait(fabric_, fids, 1) != FI_SUCCESS) return;
    // With operations pending, wake for the next liveness check; with refused
    // posts queued, retry them soon (a freed resource need not signal the fd).
    auto until = active_.empty() ? deadline : std::min(deadline, next_liveness_);
    const auto now = Clock::now();
    if (!backlog_.empty()) until = std::min(until, now + kBacklogRetry);
    if (until <= now) return;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(until - now).count();
    timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    pollfd fds[2] = {{cq_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    ::ppoll(fds, 2, &ts, nullptr);
    // Drain the eventfd whenever it is readable, even if the flag was already
    // consumed: a stale count would make every later ppoll return at once.
    if (fds[1].revents & POLLIN) {
      std::uint64_t v;
      [[maybe_unused]] auto r = ::read(wake_fd_, &v, sizeof v);
      interrupted_.store(false, std::memory_order_release);
    }
    return;
  }

  // No wait object: nap in growing steps, polling in between.
  auto step = std::chrono::duration_cast<Clock::duration>(kMinNap);
  for (;;) {
    const auto now = Clock::now();
    if (now >= deadline) return;
    const auto nap = std::min<Clock::duration>(step, deadline - now);
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(nap).count();
    timespec ts{0, static_cast<long>(ns)};
    ::nanosleep(&ts, nullptr);
    step = std::min<Clock::duration>(step * 2, kMaxNap);
    if (progress() || interrupted()) return;
  }
}

void OfiTransport::interrupt() noexcept {
  interrupted_.store(true, std::memory_order_release);
  if (wake_fd_ >= 0) {
    const std::uint64_t one = 1;
    [[maybe_unused]] auto r = ::write(wake_fd_, &one, sizeof one);
  }
}

void OfiTransport::cancel(Completion& c) noexcept {
  auto it = active_.find(&c);
  if (it == active_.end()) return;
  Op* op = it->second;
  if (op->state == Op::State::backlog) {
    unbacklog(op);
    return fail(op, ErrorCode::aborted, describe(*op) + ": cancelled before the provider accepted it");
  }
  op->state = Op::State::cancelling;
  {
    InProvider watched(watchdog_.get());
    fi_cancel(&ep_->fid, &op->ctx);
  }
  const auto bound = op->kind == Op::Kind::recv ? kCancelRecvBound : kCancelSendBound;
  if (poll_until_gone(c, bound)) return;
  // The provider keeps the operation (rxm cannot withdraw a send).
  const std::string what = describe(*op);
  close_endpoint(provider_ + " could not withdraw a cancelled " + what);
  fail(op, ErrorCode::aborted,
       what + ": cancelled; " + provider_ + " could not withdraw it, so this rank closed its endpoint");
  if (!active_.empty()) fail_all(ErrorCode::aborted, "cancelled: " + broken_);
}

bool OfiTransport::poll_until_gone(Completion& c, Clock::duration bound) noexcept {
  const auto end = Clock::now() + bound;
  try {
    while (active_.count(&c)) {
      if (Clock::now() >= end) return false;
      if (!poll_cq()) ::sched_yield();
    }
  } catch (...) {
    return false;  // string allocation failed while reporting; the caller detaches
  }
  return true;
}

}  // namespace ofi

void register_ofi_transport() {
  register_transport("ofi", [](const TransportInit& init) -> std::unique_ptr<Transport> {
    return std::make_unique<ofi::OfiTransport>(init);
  });
  const std::uint32_t v = fi_version();
  register_transport_library({"ofi", "libfabric", std::to_string(FI_MAJOR(v)) + "." + std::to_string(FI_MINOR(v)),
                              "fi_version()"});
}

}  // namespace comm
