// The `local` transport: ranks are threads of one process and exchange through
// memory. Used by the unit tests and the examples. Rendezvous semantics: a send
// completes when the receiver has copied the data, so no staging copies are
// made. A waiting rank blocks on a condition variable after a short spin.

#include "core/builtin_transports.hpp"
#include "util/log.hpp"

#include <comm/transport.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unistd.h>

namespace comm {
namespace {

// Wakes one rank when a completion that concerns it changes state.
struct Doorbell {
  std::atomic<std::uint64_t> rings{0};
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<int> sleepers{0};

  void ring() noexcept {
    rings.fetch_add(1, std::memory_order_acq_rel);
    if (sleepers.load(std::memory_order_acquire) > 0) {
      std::lock_guard lk(mu);
      cv.notify_all();
    }
  }
};

struct PendingSend {
  int src;
  std::uint64_t tag;
  const void* data;
  std::size_t bytes;
  Completion* c;
};

struct PendingRecv {
  int src;
  std::uint64_t tag;
  void* data;
  std::size_t bytes;
  Completion* c;
};

// Removes and returns the first entry of `queue` from `src` with `tag` (the
// oldest, so messages of one source and tag match in posting order).
template <class Entry>
std::optional<Entry> take_first(std::deque<Entry>& queue, int src, std::uint64_t tag) {
  const auto it = std::find_if(queue.begin(), queue.end(), [&](const Entry& e) { return e.src == src && e.tag == tag; });
  if (it == queue.end()) return std::nullopt;
  Entry e = *it;
  queue.erase(it);
  return e;
}

// Messages addressed to one rank: receives it posted, sends that found no receive yet.
struct Mailbox {
  std::mutex mu;
  std::deque<PendingRecv> posted;
  std::deque<PendingSend> unexpected;
};

struct Fabric {
  explicit Fabric(int n) : boxes(static_cast<std::size_t>(n)), bells(static_cast<std::size_t>(n)) {}
  std::vector<Mailbox> boxes;
  std::vector<Doorbell> bells;
};

// Fabrics of this process by id; the id travels through the store.
std::mutex g_fabrics_mu;
std::map<std::string, std::weak_ptr<Fabric>> g_fabrics;
std::atomic<std::uint64_t> g_fabric_counter{0};

std::string size_mismatch(int src, int dst, std::size_t sent, std::size_t expected) {
  return "local transport: rank " + std::to_string(src) + " sent " + std::to_string(sent) +
         " B, rank " + std::to_string(dst) + " expected at most " + std::to_string(expected) +
         " B (counts differ across ranks)";
}

class LocalTransport final : public Transport {
 public:
  LocalTransport(int rank, int size, std::shared_ptr<Fabric> fabric)
      : rank_(rank), size_(size), fabric_(std::move(fabric)) {}

  std::string_view name() const noexcept override { return "local"; }
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  TransportCaps caps() const noexcept override {
    TransportCaps c;
    c.peer_failure_detection = false;  // threads of one process cannot die alone
    return c;
  }
  LinkInfo link(int peer) const override {
    // Both sides of a message copy through one core's memory bandwidth.
    if (peer == rank_) return {LinkKind::self, 0.05, 10.0, "local self"};
    return {LinkKind::shm, 0.3, 8.0, "local threads (memcpy)"};
  }

  void isend(int peer, std::uint64_t tag, const void* data, std::size_t bytes, Completion& c) override {
    Mailbox& box = fabric_->boxes[static_cast<std::size_t>(peer)];
    std::unique_lock lk(box.mu);
    if (const auto r = take_first(box.posted, rank_, tag)) {
      lk.unlock();
      deliver(data, bytes, *r, peer);
      c.complete(bytes);
      return;
    }
    box.unexpected.push_back({rank_, tag, data, bytes, &c});
  }

  void irecv(int peer, std::uint64_t tag, void* data, std::size_t bytes, Completion& c) override {
    Mailbox& box = fabric_->boxes[static_cast<std::size_t>(rank_)];
    std::unique_lock lk(box.mu);
    if (const auto s = take_first(box.unexpected, peer, tag)) {
      lk.unlock();
      deliver(s->data, s->bytes, {peer, tag, data, bytes, &c}, rank_);
      s->c->complete(s->bytes);
      fabric_->bells[static_cast<std::size_t>(peer)].ring();
      return;
    }
    box.posted.push_back({peer, tag, data, bytes, &c});
  }

  bool progress() override {
    const std::uint64_t now = bell().rings.load(std::memory_order_acquire);
    const bool changed = now != seen_;
    seen_ = now;
    return changed;
  }

  void wait(std::chrono::steady_clock::time_point deadline) override {
    Doorbell& b = bell();
    for (int i = 0; i < 64; ++i) {
      if (b.rings.load(std::memory_order_acquire) != seen_) return;
      std::this_thread::yield();
    }
    std::unique_lock lk(b.mu);
    b.sleepers.fetch_add(1, std::memory_order_acq_rel);
    b.cv.wait_until(lk, deadline, [&] { return b.rings.load(std::memory_order_acquire) != seen_; });
    b.sleepers.fetch_sub(1, std::memory_order_acq_rel);
  }

  void interrupt() noexcept override { bell().ring(); }

  void cancel(Completion& c) noexcept override {
    if (!c.is_pending()) return;
    for (auto& box : fabric_->boxes) {
      std::lock_guard lk(box.mu);
      for (auto it = box.posted.begin(); it != box.posted.end(); ++it)
        if (it->c == &c) {
          box.posted.erase(it);
          c.fail(ErrorCode::aborted, "local transport: receive cancelled");
          return;
        }
      for (auto it = box.unexpected.begin(); it != box.unexpected.end(); ++it)
        if (it->c == &c) {
          box.unexpected.erase(it);
          c.fail(ErrorCode::aborted, "local transport: send cancelled");
          return;
        }
    }
  }

 private:
  Doorbell& bell() { return fabric_->bells[static_cast<std::size_t>(rank_)]; }

  // Copies a matched message into the receive and completes it, ringing the receiver.
  void deliver(const void* data, std::size_t bytes, const PendingRecv& r, int receiver) {
    if (bytes > r.bytes) {
      r.c->fail(ErrorCode::mismatch, size_mismatch(r.src, receiver, bytes, r.bytes));
    } else {
      if (bytes) std::memcpy(r.data, data, bytes);
      r.c->complete(bytes);
    }
    fabric_->bells[static_cast<std::size_t>(receiver)].ring();
  }

  int rank_;
  int size_;
  std::shared_ptr<Fabric> fabric_;
  std::uint64_t seen_ = 0;
};

std::unique_ptr<Transport> create_local(const TransportInit& init) {
  const auto timeout = init.config ? init.config->timeout : std::chrono::milliseconds(60'000);
  std::shared_ptr<Fabric> fabric;
  std::string id;
  if (init.rank == 0) {
    id = std::to_string(::getpid()) + ":" + std::to_string(g_fabric_counter.fetch_add(1));
    fabric = std::make_shared<Fabric>(init.size);
    {
      std::lock_guard lk(g_fabrics_mu);
      for (auto it = g_fabrics.begin(); it != g_fabrics.end();)
        it = it->second.expired() ? g_fabrics.erase(it) : std::next(it);
      g_fabrics[id] = fabric;
    }
    init.store->set("local/fabric", id);
  } else {
    id = init.store->get("local/fabric", timeout);
    std::lock_guard lk(g_fabrics_mu);
    auto it = g_fabrics.find(id);
    if (it != g_fabrics.end()) fabric = it->second.lock();
    if (!fabric)
      throw Error(ErrorCode::invalid_config,
                  "local transport: rank " + std::to_string(init.rank) +
                      " is not in the same process as rank 0 (fabric " + id +
                      " not found); the local transport only joins threads of one process — "
                      "use COMM_TRANSPORT=ucx, ofi or gloo across processes");
  }
  // Rank 0's transport owns the fabric; it outlives the link exchange at
  // communicator creation, by which time every rank has attached.
  return std::make_unique<LocalTransport>(init.rank, init.size, std::move(fabric));
}

}  // namespace

void register_local_transport() { register_transport("local", create_local); }

}  // namespace comm
