// Provider choice, link descriptions and peer-failure detection of the `ofi`
// transport.
//
// Dead peers: a provider reports a dead peer only when an operation *to* it
// fails (tcp;ofi_rxm: connection reset/refused). A rank that merely waits to
// receive from a dead peer would hear nothing, so once an operation has been
// pending for kLivenessInterval the transport (1) checks same-host peers'
// processes through /proc and (2) sends the peer a zero-byte probe on a spare
// tag bit, whose failure names the peer. Over shm a send to a dead process
// still succeeds, so there only the /proc check applies.

#include "ofi_transport.hpp"

#include "util/log.hpp"
#include "util/process.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <sstream>
#include <unistd.h>

namespace comm::ofi {

namespace {

// Hardware providers in order of preference for automatic selection.
constexpr const char* kHardwareProviders[] = {"verbs;ofi_rxm", "efa", "cxi", "psm3", "opx", "psm2"};

std::string core_name(const std::string& provider) { return provider.substr(0, provider.find(';')); }

}  // namespace

ProcessIdentity this_process() {
  ProcessIdentity id;
  id.pidns = detail::pid_namespace();
  id.pid = static_cast<long>(::getpid());
  const auto st = detail::read_process_stat(id.pid);
  id.start_ticks = st ? st->start_ticks : 0;
  return id;
}

std::string encode(const ProcessIdentity& id) {
  std::string s = "pidns=" + id.pidns + "\npid=" + std::to_string(id.pid) +
                  "\nstart=" + std::to_string(id.start_ticks) + "\nprovider=" + id.provider + "\nproviders=";
  for (const auto& p : id.providers) s += p + " ";
  return s + "\n";
}

ProcessIdentity decode_identity(const std::string& text, int rank) {
  ProcessIdentity id;
  std::istringstream in(text);
  std::string line;
  int fields = 0;
  try {
    while (std::getline(in, line)) {
      const auto eq = line.find('=');
      if (eq == std::string::npos) continue;
      const std::string key = line.substr(0, eq), value = line.substr(eq + 1);
      ++fields;
      if (key == "pidns") id.pidns = value;
      else if (key == "pid") id.pid = std::stol(value);
      else if (key == "start") id.start_ticks = std::stoull(value);
      else if (key == "provider") id.provider = value;
      else if (key == "providers") {
        std::istringstream names(value);
        for (std::string p; names >> p;) id.providers.push_back(p);
      } else --fields;
    }
  } catch (const std::exception&) {
    fields = -1;
  }
  if (fields != 5)
    throw Error(ErrorCode::store_failure, "ofi transport: rank " + std::to_string(rank) +
                                              " published a malformed identity in the store (is it running the "
                                              "same comm version?)");
  return id;
}

bool process_alive(const ProcessIdentity& id) { return detail::process_alive(id.pid, id.start_ticks); }

InfoPtr make_hints(const std::string& provider) {
  InfoPtr h(fi_allocinfo());
  if (!h) throw Error(ErrorCode::transport_failure, "ofi: fi_allocinfo failed (out of memory)");
  h->caps = FI_TAGGED | FI_DIRECTED_RECV;
  // Every operation carries an fi_context2 we own, so both context modes are fine.
  h->mode = FI_CONTEXT | FI_CONTEXT2;
  h->ep_attr->type = FI_EP_RDM;
  h->domain_attr->threading = FI_THREAD_DOMAIN;
  h->domain_attr->av_type = FI_AV_TABLE;
  // No memory registration: only modes that constrain registered regions (which we never create).
  h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  // Messages of one (sender, receiver, tag) must match in posting order.
  h->tx_attr->msg_order = FI_ORDER_SAS;
  h->rx_attr->msg_order = FI_ORDER_SAS;
  if (!provider.empty()) h->fabric_attr->prov_name = ::strdup(provider.c_str());
  return h;
}

std::vector<std::string> offered_providers() {
  std::vector<std::string> names;
  InfoPtr hints = make_hints("");
  fi_info* list = nullptr;
  if (fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), nullptr, nullptr, 0, hints.get(), &list) != 0)
    return names;
  for (fi_info* i = list; i; i = i->next) {
    const std::string name = i->fabric_attr->prov_name;
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  fi_freeinfo(list);
  return names;
}

bool offers_hmem(const std::string& provider) {
  InfoPtr hints = make_hints(provider);
  hints->caps |= FI_HMEM;
  hints->domain_attr->mr_mode |= FI_MR_HMEM | FI_MR_LOCAL;
  fi_info* found = nullptr;
  const int ret = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), nullptr, nullptr, 0, hints.get(), &found);
  if (found) fi_freeinfo(found);
  return ret == 0 && found;
}

int tag_bits(const fi_info& info) {
  const std::uint64_t format = info.ep_attr->mem_tag_format;
  // Fields are told apart by alternating bit patterns; their extent is the
  // position of the highest set bit. 0 means the provider does not restrict tags.
  return format ? 64 - std::countl_zero(format) : 64;
}

bool is_connection_error(int err) noexcept {
  switch (err) {
    case ECONNREFUSED:
    case ECONNRESET:
    case ECONNABORTED:
    case ENOTCONN:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case ENETDOWN:
    case ESHUTDOWN:
    case EPIPE:
    case EIO:
    case ETIMEDOUT:
      return true;
    default:
      return false;
  }
}

LinkInfo provider_link(const fi_info& info, bool same_host) {
  const std::string prov = info.fabric_attr->prov_name;
  const std::string core = core_name(prov);
  std::string detail = prov + " " + info.domain_attr->name + " (fabric " + info.fabric_attr->name + ")";
  if (same_host) detail += ", same host";
  // Defaults measured with fi_pingpong on loopback (TRANSPORT-NOTES.md);
  // COMM_CALIBRATE=1 replaces them with measurements.
  if (core == "shm") return {LinkKind::shm, 1.06, 8.6, detail};
  if (core == "verbs" || core == "efa" || core == "cxi" || core == "psm3" || core == "opx" || core == "psm2") {
    double gbps = 12.5;  // 100 Gb/s, when the provider does not report the link speed
    if (info.nic && info.nic->link_attr && info.nic->link_attr->speed)
      gbps = static_cast<double>(info.nic->link_attr->speed) / 8e9;
    return {LinkKind::ib, 2.5, gbps, detail};
  }
  return {LinkKind::tcp, 13.0, 2.9, detail};
}

// ---- OfiTransport: provider choice ------------------------------------------

bool OfiTransport::is_shm() const { return core_name(provider_) == "shm"; }

bool OfiTransport::blocking_wait_supported() const {
  // rxm over fd-driven cores signals its CQ fd for data and connection events.
  const std::string core = core_name(provider_);
  return provider_.find("ofi_rxm") != std::string::npos && (core == "tcp" || core == "verbs");
}

void OfiTransport::choose_provider() {
  bool one_host = true;
  for (int r = 0; r < size_; ++r) one_host = one_host && same_host_[static_cast<std::size_t>(r)];

  if (!provider_.empty()) {
    for (int r = 0; r < size_; ++r)
      if (procs_[static_cast<std::size_t>(r)].provider != provider_)
        throw Error(ErrorCode::invalid_config,
                    "ofi transport: rank " + std::to_string(r) + " uses provider '" +
                        procs_[static_cast<std::size_t>(r)].provider + "' but rank " + std::to_string(rank_) +
                        " uses '" + provider_ + "'; set the same COMM_OFI_PROVIDER (or FI_PROVIDER) on every rank");
  } else {
    auto on_all = [&](const std::string& name) {
      return std::all_of(procs_.begin(), procs_.end(), [&](const ProcessIdentity& p) {
        return std::find(p.providers.begin(), p.providers.end(), name) != p.providers.end();
      });
    };
    for (const char* hw : kHardwareProviders)
      if (provider_.empty() && on_all(hw)) provider_ = hw;
    // Never shm: a rank killed inside it can leave the others spinning in
    // libfabric forever (ofi_shm.cpp). Same-host ranks get tcp here; comm's
    // shm and ucx transports are the shared-memory paths.
    if (provider_.empty() && on_all("tcp;ofi_rxm")) provider_ = "tcp;ofi_rxm";
    if (provider_.empty()) {
      std::string offers;
      for (int r = 0; r < size_; ++r) {
        offers += "; rank " + std::to_string(r) + ":";
        for (const auto& p : procs_[static_cast<std::size_t>(r)].providers) offers += " " + p;
      }
      throw Error(ErrorCode::unsupported,
                  "ofi transport: no provider is usable on every rank (wanted a hardware provider or tcp;ofi_rxm)" +
                      offers + ". Set COMM_OFI_PROVIDER to one they share.");
    }
    COMM_INFO("ofi: automatic provider choice: " << provider_ << (one_host ? " (all ranks on one host)" : ""));
  }
  if (is_shm() && !one_host) {
    for (int r = 0; r < size_; ++r)
      if (!same_host_[static_cast<std::size_t>(r)])
        throw Error(ErrorCode::invalid_config,
                    "ofi transport: provider shm reaches only processes on this host, but rank " + std::to_string(r) +
                        " runs on " + (*peers_)[r].hostname + " and rank " + std::to_string(rank_) + " on " +
                        (*peers_)[rank_].hostname +
                        "; use a network provider such as tcp;ofi_rxm");
  }
  if (is_shm()) check_shm_use();
}

// ---- OfiTransport: failure detection -------------------------------------

bool OfiTransport::detects_failures() const noexcept {
  if (probe_tag_) return true;
  const auto& me = procs_[static_cast<std::size_t>(rank_)];
  for (std::size_t r = 0; r < procs_.size(); ++r)
    if (!same_host_[r] || procs_[r].pidns != me.pidns) return false;
  return true;
}

std::string OfiTransport::failure_detection_text() const {
  if (probe_tag_) return "operation errors, liveness probes and same-host process checks";
  if (detects_failures()) return "same-host process checks (/proc)";
  return "none: pending operations fail at the operation timeout";
}

bool OfiTransport::check_liveness(Clock::time_point now) {
  next_liveness_ = now + kLivenessInterval;
  if (probe_tag_ && !probe_recv_) post_probe_recv();
  std::vector<Clock::time_point> oldest(static_cast<std::size_t>(size_), Clock::time_point::max());
  for (const auto& [c, op] : active_) {
    auto& o = oldest[static_cast<std::size_t>(op->peer)];
    o = std::min(o, op->posted_at);
  }
  const auto& me = procs_[static_cast<std::size_t>(rank_)];
  bool stale = false;
  for (int p = 0; p < size_; ++p) {
    const auto i = static_cast<std::size_t>(p);
    stale = stale || (p != rank_ && oldest[i] != Clock::time_point::max() && now - oldest[i] >= kLivenessInterval);
  }
  if (!stale) return false;
  auto failed_count = [this] {
    return std::count_if(peer_failed_.begin(), peer_failed_.end(), [](const std::string& s) { return !s.empty(); });
  };
  const auto failed_before = failed_count();
  // Every visible process, not only the awaited ones: the rank we wait for may
  // have exited only because another one died first, and the error should
  // name the whole picture.
  std::vector<int> exited;
  for (int p = 0; p < size_; ++p) {
    const auto i = static_cast<std::size_t>(p);
    if (p != rank_ && peer_failed_[i].empty() && same_host_[i] && procs_[i].pidns == me.pidns &&
        !process_alive(procs_[i]))
      exited.push_back(p);
  }
  std::string list;
  for (int p : exited) list += (list.empty() ? "rank " : ", rank ") + std::to_string(p);
  for (int p : exited)
    fail_peer(p, "its process (pid " + std::to_string(procs_[static_cast<std::size_t>(p)].pid) +
                     ") on this host has exited (exited: " + list + ")");
  for (int p = 0; p < size_; ++p) {
    const auto i = static_cast<std::size_t>(p);
    if (ep_ && p != rank_ && probe_tag_ && peer_failed_[i].empty() && !probe_in_flight_[i] &&
        oldest[i] != Clock::time_point::max() && now - oldest[i] >= kLivenessInterval)
      send_probe(p);
  }
  return failed_count() != failed_before;
}

void OfiTransport::post_probe_recv() {
  if (!ep_) return;  // closed: nothing is posted any more
  Op* op = new_op(Op::Kind::probe_recv, rank_, probe_tag_, &probe_byte_, 0, nullptr);
  const ssize_t ret = post(op);
  if (ret == 0) {
    op->state = Op::State::posted;
    probe_recv_ = op;
    return;
  }
  // Retried by check_liveness; meanwhile peers' probes wait as unexpected messages.
  finish(op);
  if (ret != -FI_EAGAIN) COMM_DEBUG("ofi: cannot post the probe receive: " << fi_strerror(static_cast<int>(-ret)));
}

void OfiTransport::send_probe(int peer) {
  const auto p = static_cast<std::size_t>(peer);
  Op* op = new_op(Op::Kind::probe_send, peer, probe_tag_, &probe_byte_, 0, nullptr);
  const ssize_t ret = post(op);
  if (ret == 0) {
    op->state = Op::State::posted;
    probe_in_flight_[p] = op;
    probe_refused_since_[p] = Clock::time_point{};
    return;
  }
  finish(op);
  if (ret != -FI_EAGAIN)
    return fail_peer(peer, std::string("a liveness probe could not be posted: ") + fi_strerror(static_cast<int>(-ret)));
  // rxm keeps answering -FI_EAGAIN to a peer whose connection was refused (it
  // logs the refusal but reports nothing): a zero-byte send that stays refused
  // for kProbeRefusalLimit means the peer is gone. Not counted while a first
  // connection may still be waiting for a busy peer to accept it (no message
  // completed with it yet), nor while sends to it are in flight (a full send
  // queue to a slow peer also answers -FI_EAGAIN).
  const bool sending = std::any_of(active_.begin(), active_.end(), [peer](const auto& entry) {
    const Op& o = *entry.second;
    return o.peer == peer && o.kind == Op::Kind::send && o.state != Op::State::backlog;
  });
  if (!reached_[p] || sending) {
    probe_refused_since_[p] = Clock::time_point{};
    return;
  }
  const auto now = Clock::now();
  if (probe_refused_since_[p] == Clock::time_point{}) probe_refused_since_[p] = now;
  if (now - probe_refused_since_[p] >= kProbeRefusalLimit)
    return fail_peer(peer, provider_ + " has refused every send to it for " +
                               std::to_string(kProbeRefusalLimit.count()) + " ms (connection lost)");
  next_liveness_ = std::min(next_liveness_, now + kLivenessInterval / 4);
}

// The first dead peer fails the whole transport: a rank waiting only on live
// ranks (that wait on the dead one) must not wait on, nor later blame one
// of them. Every pending operation is withdrawn and fails naming it.
void OfiTransport::fail_peer(int peer, const std::string& why) {
  auto& dead = peer_failed_[static_cast<std::size_t>(peer)];
  if (!dead.empty()) return;
  dead = "rank " + std::to_string(peer) + " is unreachable: " + why;
  COMM_WARN("ofi: " << dead);
  if (first_dead_ < 0) first_dead_ = peer;
  remove_regions_of(peer);
  std::vector<Op*> ops;
  for (const auto& [c, op] : active_) ops.push_back(op);
  withdraw(ops);
}

// Fails `ops` (all with a dead peer, or pending when one died) so that no
// buffer is touched after its Completion reports the failure: cancelled,
// and where the provider will not hand one back in time, the endpoint is
// closed first. The cancel completions carry the reason to the callers (see
// on_error).
void OfiTransport::withdraw(const std::vector<Op*>& ops) {
  std::vector<Completion*> withdrawn;
  for (Op* op : ops) {
    if (op->state == Op::State::backlog) {
      unbacklog(op);
      const int cause = dead_cause(op->peer);
      fail(op, ErrorCode::peer_failed, describe(*op) + ": " + death_of(cause), cause);
    } else if (op->state == Op::State::posted) {
      op->state = Op::State::cancelling;
      {
        InProvider watched(watchdog_.get());
        fi_cancel(&ep_->fid, &op->ctx);
      }
      withdrawn.push_back(op->c);
    }
  }
  std::vector<Op*> stuck;  // the provider will not hand these back
  for (Completion* c : withdrawn) {
    auto it = active_.find(c);
    if (it == active_.end()) continue;
    const Clock::duration bound = it->second->kind == Op::Kind::recv ? kCancelRecvBound : kCancelSendBound;
    if (poll_until_gone(*c, bound)) continue;
    if ((it = active_.find(c)) != active_.end()) stuck.push_back(it->second);
  }
  if (stuck.empty()) return;
  close_endpoint(provider_ + " could not withdraw " + describe(*stuck.front()) +
                 (stuck.size() > 1 ? " and " + std::to_string(stuck.size() - 1) + " more" : std::string()) +
                 " after rank " + std::to_string(first_dead_) + " failed");
  for (Op* op : stuck) {
    const int cause = dead_cause(op->peer);
    fail(op, ErrorCode::peer_failed, describe(*op) + ": " + death_of(cause), cause);
  }
  if (!active_.empty()) fail_all(ErrorCode::peer_failed, death_of(first_dead_));
}

// An operation the provider will not hand back still reads (a send) or
// writes (a receive) its buffer, which the caller may free as soon as the
// operation is reported failed: a failed collective frees its scratch, and a
// live receiver would be handed whatever then lies there as data. Closing the
// endpoint is the only way to make the provider let go. cancel and withdraw
// run only on the way to failing the communicator, so what is lost is this
// transport, which from now on fails every operation at once.
void OfiTransport::close_endpoint(const std::string& why) noexcept {
  COMM_WARN("ofi: " << why << "; closing the endpoint so that no buffer is touched after its operation failed");
  close_provider();
  if (broken_.empty()) broken_ = "the endpoint was closed (" + why + ")";
  backlog_.clear();
  std::fill(backlogged_.begin(), backlogged_.end(), 0);
  probe_recv_ = nullptr;
  std::fill(probe_in_flight_.begin(), probe_in_flight_.end(), nullptr);
}

int OfiTransport::dead_cause(int peer) const noexcept {
  return peer_failed_[static_cast<std::size_t>(peer)].empty() ? first_dead_ : peer;
}

std::string OfiTransport::death_of(int peer) const {
  return peer < 0 ? std::string("cancelled") : peer_failed_[static_cast<std::size_t>(peer)];
}

void OfiTransport::fail_all(ErrorCode code, const std::string& why) {
  if (broken_.empty()) broken_ = why;
  COMM_WARN("ofi: " << why << "; failing every pending operation");
  backlog_.clear();
  std::fill(backlogged_.begin(), backlogged_.end(), 0);
  std::vector<Op*> ops;
  for (const auto& [c, op] : active_) ops.push_back(op);
  for (Op* op : ops) {
    // The provider may still hold it: detach the Completion, keep the record.
    Completion* c = op->c;
    const std::string what = describe(*op);
    active_.erase(c);
    --pending_per_peer_[static_cast<std::size_t>(op->peer)];
    op->c = nullptr;
    if (op->state == Op::State::backlog) free_.push_back(op);
    c->fail(code, what + ": " + why);
  }
}

}  // namespace comm::ofi
