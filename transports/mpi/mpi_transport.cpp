// Point-to-point over MPI. comm's tags have 48 bits and MPI_TAG_UB may be as
// small as 32767, so comm's tags never become MPI tags. Every message starts
// as a control message on one MPI tag (kControlTag) whose header carries the
// comm tag and size; the receiver matches headers against its posted receives
// itself, per (peer, comm tag) in order, which is exact for any tag. Small
// messages travel inside their header (one copy on each side); large ones are
// announced (rts), the receiver posts MPI_Irecv straight into the user's
// buffer and answers (cts), and only then does the sender post the payload,
// on an MPI tag derived from the message number. So a send MPI still holds
// is always one the peer is ready for, and a receive MPI holds is always one
// a peer has announced: cancelling before that point is exact.
//
// This file: set-up, lifetime, links, posting, waiting and cancelling; the
// protocol itself is in mpi_protocol.cpp.

#include "mpi_protocol.hpp"

#include "core/builtin_transports.hpp"
#include "util/log.hpp"

#include <comm/version.hpp>

#include <algorithm>
#include <climits>
#include <cstring>
#include <thread>

namespace comm {
namespace mpi_detail {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kMaxPart = std::size_t{1} << 30;  // default largest MPI message: counts are int
constexpr const char* kMaxPartOption = "mpi.max_part_bytes";
constexpr int kGroupTag = 0x636d;  // MPI_Comm_create_group's tag for our sub-communicators

// Nominal links for the cost model (TRANSPORT-NOTES.md: Open MPI 4.1 vader
// ~0.35 us at 8 B; plus our header copy and matching); COMM_CALIBRATE=1 measures.
constexpr double kSelfAlphaUs = 0.3, kSelfBetaGbps = 10.0;
constexpr double kShmAlphaUs = 0.8, kShmBetaGbps = 5.0;
constexpr double kNetAlphaUs = 15.0, kNetBetaGbps = 2.5;

std::size_t max_part_option(const Config* config) {
  const std::string text = config ? config->transport_option("mpi", "max_part_bytes") : std::string();
  if (text.empty()) return kMaxPart;
  const std::string source = config->transport_options.count(kMaxPartOption)
                                 ? std::string("transport option ") + kMaxPartOption
                                 : Config::transport_option_variable("mpi", "max_part_bytes");
  const std::size_t v = parse_bytes(text, source);
  if (v == 0 || v > static_cast<std::size_t>(INT_MAX))
    throw Error(ErrorCode::invalid_config,
                source + "='" + text + "' must be between 1 B and INT_MAX bytes (MPI counts are int)");
  return v;
}

std::string library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  if (MPI_Get_library_version(text, &len) != MPI_SUCCESS) return "MPI";
  std::string v(text, static_cast<std::size_t>(len));
  if (auto cut = v.find_first_of(",\n"); cut != std::string::npos) v.resize(cut);
  return v;
}

bool finalized() noexcept {
  int f = 0;
  MPI_Finalized(&f);
  return f != 0;
}

// Withdraws a request we no longer want: MPI_Cancel, then up to `grace` for it
// to complete. False if MPI still holds it (it was matched and is moving
// data); the caller must then keep its buffer alive.
bool withdraw(MPI_Request& r, std::chrono::milliseconds grace) noexcept {
  if (r == MPI_REQUEST_NULL) return true;
  MPI_Cancel(&r);
  const auto until = Clock::now() + grace;
  for (;;) {
    int done = 0;
    if (MPI_Test(&r, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || done) return true;
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// A buffer MPI may still write into after we gave up on its request: never freed.
void abandon(std::vector<std::byte>&& buffer) { new std::vector<std::byte>(std::move(buffer)); }

}  // namespace

MpiTransport::MpiTransport(const TransportInit& init)
    : NativeTransportBase("mpi", init, *this),
      timeout_(init.config ? init.config->timeout : std::chrono::milliseconds{300'000}) {
  if (!init.store)
    throw Error(ErrorCode::invalid_config, "mpi transport: no store was given to meet the other ranks");
  const MPI_Comm base = base_comm(init.config);
  base_name_ = describe_base(init.config);
  native_blocks_ = mpi_detail::native_blocks(init.config);
  max_part_ = max_part_option(init.config);
  setup_comm(init, base);
  // Hosts come from the communicator's peer table (create_transport fills it in if absent).
  same_host_.assign(static_cast<std::size_t>(size_), false);
  for (int r = 0; r < size_; ++r)
    same_host_[static_cast<std::size_t>(r)] = init.peers && init.peers->same_host(rank_, r);
  ring_.assign(kRingSlots, std::vector<std::byte>(kSlotBytes));
  ring_requests_.assign(kRingSlots, MPI_REQUEST_NULL);
  for (std::size_t i = 0; i < kRingSlots; ++i) post_ring(i);
  next_id_.assign(static_cast<std::size_t>(size_), 0);
  add_live(this);
  COMM_INFO("mpi transport: rank " << rank_ << "/" << size_ << " over " << base_name_ << " (" << library_version()
                                   << ", thread level " << thread_level() << ", MPI_TAG_UB " << tag_ub_
                                   << ", native collectives " << (native_blocks_ ? "blocking" : "polled") << ")");
}

void MpiTransport::setup_comm(const TransportInit& init, MPI_Comm base) {
  int base_rank = 0, base_size = 0;
  {
    CallLock lock;
    check(MPI_Comm_rank(base, &base_rank), "mpi transport: MPI_Comm_rank");
    check(MPI_Comm_size(base, &base_size), "mpi transport: MPI_Comm_size");
  }
  if (size_ > base_size)
    throw Error(ErrorCode::invalid_config,
                "mpi transport: the Config asks for " + std::to_string(size_) + " ranks (this is rank " +
                    std::to_string(rank_) + "), but " + base_name_ + " has " + std::to_string(base_size) +
                    " process(es) (this is its rank " + std::to_string(base_rank) +
                    "); start the job with mpirun -np " + std::to_string(size_) +
                    ", or leave COMM_RANK/COMM_WORLD_SIZE unset under mpirun");
  // Which process of `base` is each of our ranks? (A sub-communicator of a
  // split holds some of them, in any order.)
  auto store = make_prefix_store(init.store, "mpi/");
  store->set("base_rank/" + std::to_string(rank_), std::to_string(base_rank));
  std::vector<int> members(static_cast<std::size_t>(size_));
  bool identity = size_ == base_size;
  for (int r = 0; r < size_; ++r) {
    const std::string v = store->get("base_rank/" + std::to_string(r), timeout_);
    const int m = std::atoi(v.c_str());
    if (m < 0 || m >= base_size || std::count(members.begin(), members.begin() + r, m))
      throw Error(ErrorCode::invalid_config, "mpi transport: rank " + std::to_string(r) + " says it is process " + v +
                                                 " of " + base_name_ + " (size " + std::to_string(base_size) +
                                                 "), which is out of range or claimed twice; the ranks of the "
                                                 "Config do not describe distinct MPI processes");
    members[static_cast<std::size_t>(r)] = m;
    identity = identity && m == r;
  }
  if (identity) {
    // Non-blocking, so that a rank that never arrives is a timeout, not a hang.
    MPI_Request req = MPI_REQUEST_NULL;
    {
      CallLock lock;
      check(MPI_Comm_idup(base, &comm_, &req), "mpi transport: MPI_Comm_idup");
    }
    if (!test_until(req, Clock::now() + timeout_, "mpi transport: MPI_Comm_idup")) {
      record_failure("MPI_Comm_idup timed out");
      throw Error(ErrorCode::timeout, "mpi transport: rank " + std::to_string(rank_) + ": not every process of " +
                                          base_name_ + " duplicated it within the timeout (MPI does not say which)");
    }
  } else {
    // Every member has published its process above, so all are here; the
    // watch bounds the blocking call anyway.
    CallLock lock;
    MPI_Group all = MPI_GROUP_NULL, mine = MPI_GROUP_NULL;
    check(MPI_Comm_group(base, &all), "mpi transport: MPI_Comm_group");
    const int rc_incl = MPI_Group_incl(all, size_, members.data(), &mine);
    MPI_Group_free(&all);
    check(rc_incl, "mpi transport: MPI_Group_incl");
    watch_.arm("MPI_Comm_create_group", 0, 0, timeout_);
    const int rc = MPI_Comm_create_group(base, mine, kGroupTag, &comm_);
    watch_.disarm();
    MPI_Group_free(&mine);
    check(rc, "mpi transport: MPI_Comm_create_group");
  }
  CallLock lock;
  check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "mpi transport: MPI_Comm_set_errhandler");
  int* ub = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(comm_, MPI_TAG_UB, &ub, &flag);
  if (flag && ub) tag_ub_ = *ub;
  int me = -1;
  MPI_Comm_rank(comm_, &me);
  if (me != rank_)
    throw Error(ErrorCode::internal, "mpi transport: rank " + std::to_string(rank_) + " is rank " +
                                         std::to_string(me) + " of its MPI communicator");
}

MpiTransport::~MpiTransport() {
  remove_live(this);
  shutdown_before_finalize();
}

void MpiTransport::shutdown_before_finalize() noexcept {
  if (shut_down_) return;
  shut_down_ = true;
  if (finalized()) return;  // MPI freed everything; our buffers are ours again
  CallLock lock;
  constexpr auto kGrace = std::chrono::milliseconds(100);
  for (std::size_t i = 0; i < ring_requests_.size(); ++i)
    if (!withdraw(ring_requests_[i], kGrace)) abandon(std::move(ring_[i]));
  for (std::size_t i = 0; i < requests_.size(); ++i) {
    if (requests_[i] == MPI_REQUEST_NULL) continue;
    // Control sends carry our own copy; payload parts point into user memory,
    // which MPI may touch until they complete or the job ends.
    if (withdraw(requests_[i], kGrace)) continue;
    const bool user_memory = pending_[i].buffer.empty();
    abandon(std::move(pending_[i].buffer));
    MPI_Request_free(&requests_[i]);
    if (user_memory)
      COMM_WARN("mpi transport on rank " << rank_
                                         << ": MPI still holds a payload at shutdown; its buffer may still be accessed");
  }
  for (auto& entry : ops_)
    if (Op& op = *entry.second; op.c->is_pending()) op.c->fail(ErrorCode::aborted, describe(op) + ": the transport was shut down");
  ops_.clear();
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

TransportCaps MpiTransport::caps() const noexcept {
  // Host memory only (Debian's Open MPI is not CUDA-aware); wait() polls and
  // sleeps, it cannot block on an event; MPI aborts the job when a process
  // dies instead of failing our operations, so dead peers show as timeouts.
  return TransportCaps{.host_memory = true, .cuda_memory = false, .stream_ordered = false, .can_block = false,
                       .peer_failure_detection = false};
}

LinkInfo MpiTransport::link(int peer) const {
  check_peer("link", peer);
  LinkInfo l;
  if (peer == rank_) {
    l = {LinkKind::self, kSelfAlphaUs, kSelfBetaGbps, "mpi self (" + library_version() + ")"};
  } else if (same_host_[static_cast<std::size_t>(peer)]) {
    l = {LinkKind::shm, kShmAlphaUs, kShmBetaGbps, "mpi same host (" + library_version() + ")"};
    l.receiver_copies = true;
  } else {
    l = {LinkKind::tcp, kNetAlphaUs, kNetBetaGbps, "mpi other host (" + library_version() + ")"};
  }
  // Above kInline a message waits for the receiver's answer: one more hop.
  l.rndv_threshold_bytes = kInline;
  l.rndv_extra_us = l.alpha_us;
  return l;
}

std::string MpiTransport::describe(const Op& op) const {
  return std::string("mpi ") + (op.is_send ? "send to" : "recv from") + " rank " + std::to_string(op.peer) +
         " (tag " + tag_text(op.tag) + ", " + std::to_string(op.bytes) + " B)";
}

int MpiTransport::payload_tag(std::uint64_t id) const noexcept {
  return 1 + static_cast<int>(id % static_cast<std::uint64_t>(tag_ub_));
}

std::vector<std::byte> MpiTransport::take_buffer(std::size_t bytes) {
  std::vector<std::byte> b;
  if (!spare_buffers_.empty()) {
    b = std::move(spare_buffers_.back());
    spare_buffers_.pop_back();
  }
  b.resize(bytes);
  return b;
}

// ---- posting -----------------------------------------------------------------

void MpiTransport::isend(int peer, std::uint64_t tag, const void* data, std::size_t bytes, Completion& c) {
  check_p2p_args("isend", peer, tag, data, bytes);
  if (failed_.load(std::memory_order_acquire)) {
    c.fail(ErrorCode::transport_failure, "mpi send to rank " + std::to_string(peer) + ": " + failed_reason_);
    return;
  }
  CallLock lock;
  if (bytes <= kInline) {
    // The message is copied into the control message: the caller's buffer is free at once.
    Header h{kEager, 0, tag, bytes, 0};
    send_control(peer, h, data, bytes, nullptr);
    if (failed_.load(std::memory_order_acquire))
      c.fail(ErrorCode::transport_failure, "mpi send to rank " + std::to_string(peer) + ": " + failed_reason_);
    else
      c.complete(bytes);
    return;
  }
  auto op = std::make_unique<Op>();
  op->c = &c;
  op->is_send = true;
  op->peer = peer;
  op->tag = tag;
  op->data = static_cast<std::byte*>(const_cast<void*>(data));  // only read
  op->bytes = bytes;
  op->id = next_id_[static_cast<std::size_t>(peer)]++;
  op->parts = static_cast<std::uint32_t>((bytes + max_part_ - 1) / max_part_);
  Op* raw = op.get();
  ops_[&c] = std::move(op);
  awaiting_cts_[{peer, raw->id}] = raw;
  send_control(peer, Header{kRts, raw->parts, tag, bytes, raw->id}, nullptr, 0, raw);
}

void MpiTransport::irecv(int peer, std::uint64_t tag, void* data, std::size_t bytes, Completion& c) {
  check_p2p_args("irecv", peer, tag, data, bytes);
  if (failed_.load(std::memory_order_acquire)) {
    c.fail(ErrorCode::transport_failure, "mpi recv from rank " + std::to_string(peer) + ": " + failed_reason_);
    return;
  }
  CallLock lock;
  auto op = std::make_unique<Op>();
  op->c = &c;
  op->peer = peer;
  op->tag = tag;
  op->data = static_cast<std::byte*>(data);
  op->bytes = bytes;
  const Key key{peer, tag};
  if (auto it = unexpected_.find(key); it != unexpected_.end()) {
    Unexpected u = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) unexpected_.erase(it);
    if (u.h.kind == kEager) {
      deliver_eager(*op, u.payload.data(), u.payload.size());
      return;
    }
    Op* raw = op.get();
    ops_[&c] = std::move(op);
    accept_rts(*raw, u.h.id, u.h.parts, u.h.bytes);
    return;
  }
  Op* raw = op.get();
  ops_[&c] = std::move(op);
  posted_[key].push_back(raw);
}

void MpiTransport::wait(Clock::time_point deadline) {
  // MPI has nothing to sleep on: poll, then yield, then sleep in short steps
  // (a message in flight lands in microseconds; a long wait costs no core).
  constexpr auto kSpin = std::chrono::microseconds(50);
  const auto start = Clock::now();
  auto sleep = std::chrono::microseconds(2);
  for (;;) {
    if (interrupted_.exchange(false, std::memory_order_acq_rel) || progress()) return;
    const auto now = Clock::now();
    if (now >= deadline || shut_down_) return;
    if (now - start < kSpin) continue;
    if (now - start < 4 * kSpin) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(sleep, deadline - now));
    sleep = std::min(sleep * 2, std::chrono::microseconds(1000));
  }
}

void MpiTransport::interrupt() noexcept { interrupted_.store(true, std::memory_order_release); }

void MpiTransport::cancel(Completion& c) noexcept {
  const auto it = ops_.find(&c);
  if (it == ops_.end()) return;
  Op& op = *it->second;
  const std::string what = describe(op);
  record_failure("rank " + std::to_string(rank_) + " gave up on a pending " + what);
  if (!op.is_send && !op.matched) {
    auto& q = posted_[{op.peer, op.tag}];
    q.erase(std::remove(q.begin(), q.end(), &op), q.end());
    if (q.empty()) posted_.erase({op.peer, op.tag});
  }
  if (op.is_send) awaiting_cts_.erase({op.peer, op.id});
  if (op.parts_left > 0 && !shut_down_ && !finalized()) {
    // Payload parts MPI holds: a receive not yet matched withdraws cleanly;
    // one moving data (or a send) is waited for briefly, then abandoned.
    CallLock lock;
    for (std::size_t i = 0; i < pending_.size(); ++i) {
      if (pending_[i].op != &op) continue;
      pending_[i].op = nullptr;
      if (!withdraw(requests_[i], std::chrono::milliseconds(100)))
        COMM_WARN("mpi transport on rank " << rank_ << ": MPI still holds part of " << what
                                           << " after it was cancelled; its buffer may still be accessed");
    }
  }
  ops_.erase(it);
  c.fail(ErrorCode::aborted, what + " cancelled");
}

void MpiTransport::check_usable(std::string_view what) const {
  if (failed_.load(std::memory_order_acquire))
    throw Error(ErrorCode::transport_failure, std::string(what) + ": the mpi transport on rank " +
                                                  std::to_string(rank_) + " is unusable since: " + failed_reason_ +
                                                  "; create a new communicator");
}

void MpiTransport::mark_failed(const std::string& reason) noexcept {
  if (failed_.load(std::memory_order_acquire)) return;
  failed_reason_ = reason;
  failed_.store(true, std::memory_order_release);
  record_failure(reason);
  COMM_WARN("mpi transport on rank " << rank_ << " is now unusable: " << reason);
}

}  // namespace mpi_detail

void register_mpi_transport() {
  register_transport("mpi", [](const TransportInit& init) -> std::unique_ptr<Transport> {
    return std::make_unique<mpi_detail::MpiTransport>(init);
  });
  register_store_scheme("mpi", mpi_detail::make_bootstrap_store);
  set_default_store_scheme("mpi", "mpi");
  // Both calls may precede MPI_Init (MPI-3). The library string runs on
  // ("Open MPI v4.1.4, package: ..."): its first part names it.
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0, major = 0, minor = 0;
  std::string library = "unknown";
  if (MPI_Get_library_version(text, &length) == MPI_SUCCESS) {
    library.assign(text, static_cast<std::size_t>(std::max(length, 0)));
    library = library.substr(0, std::min(library.find(','), library.find('\n')));
  }
  MPI_Get_version(&major, &minor);
  register_transport_library({"mpi", "MPI", library + " (MPI standard " + std::to_string(major) + "." +
                                                std::to_string(minor) + ")",
                              "MPI_Get_library_version()"});
}

}  // namespace comm
