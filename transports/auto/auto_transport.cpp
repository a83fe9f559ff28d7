// The `auto` transport (auto_transport.hpp): a per-pair choice of transport
// behind the one point-to-point interface.

#include "auto_transport.hpp"

#include "util/log.hpp"

#include <comm/store.hpp>

#include <algorithm>
#include <cctype>

namespace comm {
namespace autotp {
namespace {

constexpr const char* kIntraOption = "auto.intra";
constexpr const char* kInterOption = "auto.inter";
constexpr std::string_view kInterPreference[] = {"ucx", "ofi", "gloo"};
constexpr std::string_view kIntraPreference[] = {"shm", "ucx", "ofi", "gloo"};
// Longest a wait() sleeps in one sub-transport while another also has work pending.
constexpr auto kTurn = std::chrono::microseconds(200);

// "auto.intra" -> the transport option "intra" of transport "auto" (or COMM_AUTO_INTRA).
std::string option(const Config& c, const char* key) { return c.transport_option("auto", std::string_view(key).substr(5)); }

// The first available of `preference`, or the named one; `why` says how it was chosen.
std::string choose(std::span<const std::string_view> preference, const std::string& named, const char* key,
                   const char* env, const std::string& what,
                   const std::function<std::string(std::string_view)>& available, std::string& why) {
  if (!named.empty()) {
    if (std::string no = available(named); !no.empty())
      throw Error(ErrorCode::invalid_config, std::string(env) + " (transport option " + key + ") names '" + named +
                                                 "', which is not available: " + no);
    why = std::string("named by ") + env;
    return named;
  }
  std::string skipped;
  for (std::string_view t : preference) {
    if (std::string no = available(t); no.empty()) {
      why = what + ": first available of ";
      for (std::size_t i = 0; i < preference.size(); ++i) why += (i ? ", " : "") + std::string(preference[i]);
      if (!skipped.empty()) why += " (" + skipped + ")";
      return std::string(t);
    } else {
      // The first clause says enough ("could not load libcomm_shm.so", "built without UCX").
      skipped += (skipped.empty() ? "" : "; ") + std::string(t) + ": " + no.substr(0, no.find(" ("));
    }
  }
  throw Error(ErrorCode::unknown_transport,
              "transport auto: no transport of this build reaches ranks " + what + " (" + skipped + ")");
}

}  // namespace

Plan plan_auto(const PeerTable& peers, const Config& config,
               const std::function<std::string(std::string_view)>& available) {
  Plan p;
  const int H = peers.num_hosts();
  if (H > 1)
    p.inter = choose(kInterPreference, option(config, kInterOption), kInterOption, "COMM_AUTO_INTER",
                     "on different hosts", available, p.inter_why);
  for (const auto& members : peers.hosts) {
    std::string name, why;
    if (members.size() == 1) {
      if (H == 1) {
        name = "local";
        why = "a group of one rank";
      }
    } else if (const std::string named = option(config, kIntraOption); !named.empty()) {
      name = choose(kIntraPreference, named, kIntraOption, "COMM_AUTO_INTRA", "", available, why);
    } else if (std::all_of(members.begin(), members.end(),
                           [&](int r) { return peers.same_process(members.front(), r); })) {
      name = "local";
      why = "the host's ranks are threads of one process";
    } else {
      name = choose(kIntraPreference, {}, kIntraOption, "COMM_AUTO_INTRA", "on one host", available, why);
    }
    p.intra.push_back(std::move(name));
    p.intra_why.push_back(std::move(why));
  }
  return p;
}

std::string translate_ranks(const std::string& message, const std::vector<int>& ranks, const std::string& via) {
  std::string out;
  constexpr std::string_view kRank = "rank ";
  std::size_t i = 0;
  while (i < message.size()) {
    const std::size_t at = message.find(kRank, i);
    if (at == std::string::npos) break;
    std::size_t j = at + kRank.size();
    std::size_t k = j;
    while (k < message.size() && std::isdigit(static_cast<unsigned char>(message[k]))) ++k;
    out.append(message, i, j - i);
    if (k > j) {
      const std::size_t local = std::stoul(message.substr(j, k - j));
      out += local < ranks.size() ? std::to_string(ranks[local]) : message.substr(j, k - j);
    }
    i = k;
  }
  out.append(message, i, std::string::npos);
  return out + " (via " + via + ")";
}

namespace {

class AutoTransport final : public Transport {
 public:
  explicit AutoTransport(const TransportInit& init);

  std::string_view name() const noexcept override { return "auto"; }
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  TransportCaps caps() const noexcept override { return caps_; }
  LinkInfo link(int peer) const override;
  void isend(int peer, std::uint64_t tag, const void* data, std::size_t bytes, Completion& c) override;
  void irecv(int peer, std::uint64_t tag, void* data, std::size_t bytes, Completion& c) override;
  bool progress() override;
  void wait(std::chrono::steady_clock::time_point deadline) override;
  void interrupt() noexcept override {
    for (auto& s : subs_) s->t->interrupt();
  }
  void cancel(Completion& c) noexcept override;
  NativeCollectives* native() noexcept override { return subs_.size() == 1 ? subs_[0]->t->native() : nullptr; }
  StreamEngine* stream_engine() noexcept override {
    return subs_.size() == 1 ? subs_[0]->t->stream_engine() : nullptr;
  }
  // Peer memory only when one sub-transport spans the whole group in this
  // group's rank order (every rank on one host, e.g. shm there): its windows
  // and flag ranks are then this group's. Across hosts no memory is shared.
  DirectMemory* direct() noexcept override { return whole_direct_; }

 private:
  struct Sub {
    std::string name;
    std::string via;         // for messages: "auto's 'ucx' inside host mh-h0"
    std::vector<int> ranks;  // sub-transport rank -> rank of this group
    Config config;           // the sub-group's view (outlives t, which may keep a pointer)
    std::unique_ptr<Transport> t;
    std::vector<Completion*> pending;
  };
  struct Route {
    Sub* sub = nullptr;
    int peer = -1;  // the peer's rank in sub's numbering
    const std::string* why = nullptr;
  };

  Sub& add_sub(const TransportInit& init, const std::string& name, std::vector<int> ranks, const std::string& via);
  const Route& route(int peer, const char* op) const;
  void track(Sub& s, Completion& c);
  void sweep(Sub& s);

  int rank_ = 0;
  int size_ = 1;
  Plan plan_;
  std::vector<std::unique_ptr<Sub>> subs_;
  std::vector<Route> routes_;
  TransportCaps caps_;
  DirectMemory* whole_direct_ = nullptr;
  std::size_t turn_ = 0;
};

AutoTransport::AutoTransport(const TransportInit& init) : rank_(init.rank), size_(init.size) {
  if (!init.peers || init.peers->size() != size_)
    throw Error(ErrorCode::invalid_argument,
                "auto transport: TransportInit::peers must describe all " + std::to_string(size_) + " ranks");
  if (!init.store && size_ > 1)
    throw Error(ErrorCode::invalid_config, "auto transport: no store was given to meet the other ranks");
  const PeerTable& peers = *init.peers;
  const Config config = init.config ? *init.config : Config{};
  plan_ = plan_auto(peers, config, [](std::string_view t) { return transport_unavailable_reason(t); });
  const int g = peers[rank_].host_index;
  const auto& members = peers.hosts[static_cast<std::size_t>(g)];
  const std::string& intra = plan_.intra[static_cast<std::size_t>(g)];
  // Every rank creates its host's transport before the group-wide one, so no
  // creation waits on a rank that is still busy with another.
  Sub* host = nullptr;
  Sub* inter = nullptr;
  if (!intra.empty() && intra != plan_.inter)
    host = &add_sub(init, intra, members,
                    "auto's '" + intra + "' inside host " + std::to_string(g) + " (" + peers[rank_].hostname + ")");
  if (!plan_.inter.empty()) {
    std::vector<int> all(static_cast<std::size_t>(size_));
    for (int r = 0; r < size_; ++r) all[static_cast<std::size_t>(r)] = r;
    inter = &add_sub(init, plan_.inter, std::move(all), "auto's '" + plan_.inter + "' between hosts");
  }
  routes_.resize(static_cast<std::size_t>(size_));
  for (int p = 0; p < size_; ++p) {
    Route& r = routes_[static_cast<std::size_t>(p)];
    if (host && peers.same_host(rank_, p)) {
      r.sub = host;
      r.peer = peers[p].local_rank;
      r.why = &plan_.intra_why[static_cast<std::size_t>(g)];
    } else {
      r.sub = inter;
      r.peer = p;
      r.why = peers.same_host(rank_, p) ? &plan_.intra_why[static_cast<std::size_t>(g)] : &plan_.inter_why;
    }
  }
  caps_ = subs_.front()->t->caps();
  for (const auto& s : subs_) {
    const TransportCaps c = s->t->caps();
    caps_.host_memory = caps_.host_memory && c.host_memory;
    caps_.cuda_memory = caps_.cuda_memory && c.cuda_memory;
    caps_.stream_ordered = caps_.stream_ordered && c.stream_ordered;
    caps_.can_block = caps_.can_block && c.can_block;
    caps_.peer_failure_detection = caps_.peer_failure_detection && c.peer_failure_detection;
  }
  if (subs_.size() == 1 && subs_[0]->ranks.size() == static_cast<std::size_t>(size_) &&
      std::is_sorted(subs_[0]->ranks.begin(), subs_[0]->ranks.end()))
    whole_direct_ = subs_[0]->t->direct();
  std::string what;
  for (const auto& s : subs_) what += (what.empty() ? "" : ", ") + s->via;
  if (whole_direct_) what += " (with its peer memory for direct-memory collectives)";
  COMM_INFO("auto transport: rank " << rank_ << "/" << size_ << " uses " << what);
}

AutoTransport::Sub& AutoTransport::add_sub(const TransportInit& init, const std::string& name, std::vector<int> ranks,
                                           const std::string& via) {
  auto s = std::make_unique<Sub>();
  s->name = name;
  s->via = via;
  s->ranks = std::move(ranks);
  s->config = init.config ? *init.config : Config{};
  const bool whole = static_cast<int>(s->ranks.size()) == size_;
  const int me = static_cast<int>(std::find(s->ranks.begin(), s->ranks.end(), rank_) - s->ranks.begin());
  s->config.rank = me;
  s->config.world_size = static_cast<int>(s->ranks.size());
  s->config.transport = name;
  TransportInit sub;
  sub.rank = me;
  sub.size = s->config.world_size;
  sub.config = &s->config;
  if (whole) {
    sub.peers = init.peers;
    sub.store = init.store ? make_prefix_store(init.store, "auto/inter/") : nullptr;
  } else {
    PeerTable t;
    for (int r : s->ranks) t.peers.push_back((*init.peers)[r]);
    t.index_hosts();
    sub.peers = std::make_shared<const PeerTable>(std::move(t));
    const int host = (*init.peers)[rank_].host_index;
    sub.store = make_prefix_store(init.store, "auto/h" + std::to_string(host) + "/");
  }
  s->t = create_transport(name, sub);
  if (s->t->caps().stream_ordered)
    throw Error(ErrorCode::invalid_config, "auto transport: '" + name +
                                               "' is stream-ordered and runs whole schedules on a CUDA stream; it "
                                               "cannot carry some pairs of a host schedule (name it with COMM_TRANSPORT)");
  subs_.push_back(std::move(s));
  return *subs_.back();
}

const AutoTransport::Route& AutoTransport::route(int peer, const char* op) const {
  if (peer < 0 || peer >= size_)
    throw Error(ErrorCode::invalid_argument, std::string("auto ") + op + ": peer " + std::to_string(peer) +
                                                 " is outside [0, " + std::to_string(size_) + ")");
  const Route& r = routes_[static_cast<std::size_t>(peer)];
  if (!r.sub)
    throw Error(ErrorCode::invalid_argument, std::string("auto ") + op + ": no transport reaches rank " +
                                                 std::to_string(peer) + " (a group of one)");
  return r;
}

LinkInfo AutoTransport::link(int peer) const {
  const Route& r = route(peer, "link");
  LinkInfo l = r.sub->t->link(r.peer);
  l.detail = "auto: " + r.sub->name + " (" + *r.why + "): " + l.detail;
  return l;
}

void AutoTransport::track(Sub& s, Completion& c) {
  if (c.is_pending()) {
    s.pending.push_back(&c);
  } else if (c.state.load(std::memory_order_acquire) == Completion::failed &&
             static_cast<int>(s.ranks.size()) != size_) {
    c.message = translate_ranks(c.message, s.ranks, s.via);
  }
}

void AutoTransport::isend(int peer, std::uint64_t tag, const void* data, std::size_t bytes, Completion& c) {
  const Route& r = route(peer, "isend");
  r.sub->t->isend(r.peer, tag, data, bytes, c);
  track(*r.sub, c);
}

void AutoTransport::irecv(int peer, std::uint64_t tag, void* data, std::size_t bytes, Completion& c) {
  const Route& r = route(peer, "irecv");
  r.sub->t->irecv(r.peer, tag, data, bytes, c);
  track(*r.sub, c);
}

// Forgets completed operations; a per-host transport's failures get this
// group's rank numbers (its completion is final once it left pending).
void AutoTransport::sweep(Sub& s) {
  const bool renumber = static_cast<int>(s.ranks.size()) != size_;
  auto keep = std::remove_if(s.pending.begin(), s.pending.end(), [&](Completion* c) {
    const auto state = c->state.load(std::memory_order_acquire);
    if (state == Completion::pending) return false;
    if (state == Completion::failed && renumber) c->message = translate_ranks(c->message, s.ranks, s.via);
    return true;
  });
  s.pending.erase(keep, s.pending.end());
}

bool AutoTransport::progress() {
  bool moved = false;
  for (auto& s : subs_) moved = s->t->progress() || moved;
  for (auto& s : subs_) sweep(*s);
  return moved;
}

void AutoTransport::wait(std::chrono::steady_clock::time_point deadline) {
  if (subs_.size() == 1) {
    subs_[0]->t->wait(deadline);
    return;
  }
  std::vector<Sub*> busy;
  for (auto& s : subs_) {
    sweep(*s);
    if (!s->pending.empty()) busy.push_back(s.get());
  }
  if (busy.size() == 1) {
    busy[0]->t->wait(deadline);
    return;
  }
  // Several (or, oddly, none) have work: a short turn in one, then the next.
  Sub* s = busy.empty() ? subs_[turn_++ % subs_.size()].get() : busy[turn_++ % busy.size()];
  s->t->wait(std::min(deadline, std::chrono::steady_clock::now() + kTurn));
}

void AutoTransport::cancel(Completion& c) noexcept {
  for (auto& s : subs_) {
    auto it = std::find(s->pending.begin(), s->pending.end(), &c);
    if (it == s->pending.end()) continue;
    s->t->cancel(c);
    s->pending.erase(it);
    return;
  }
}

}  // namespace
}  // namespace autotp

void register_auto_transport() {
  register_transport("auto", [](const TransportInit& init) -> std::unique_ptr<Transport> {
    return std::make_unique<autotp::AutoTransport>(init);
  });
}

}  // namespace comm
