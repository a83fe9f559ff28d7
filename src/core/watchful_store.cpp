#include "core/watchful_store.hpp"

#include "bootstrap/store_keys.hpp"
#include "core/peer_notes.hpp"

#include <comm/error.hpp>

#include <algorithm>
#include <optional>
#include <charconv>
#include <thread>

namespace comm::detail {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// How long one slice of a wait lasts: the delay between a death and the
// waiters noticing it, against a few extra store round trips per slice.
constexpr auto kSlice = 200ms;

class WatchfulStore final : public Store {
 public:
  WatchfulStore(std::shared_ptr<Store> store, std::shared_ptr<Store> root, int rank, std::vector<int> root_ranks)
      : store_(std::move(store)), root_(std::move(root)), rank_(rank), root_ranks_(std::move(root_ranks)) {}

  void set(const std::string& key, const std::string& value) override { store_->set(key, value); }
  std::int64_t add(const std::string& key, std::int64_t delta) override { return store_->add(key, delta); }
  bool check(const std::string& key) override { return store_->check(key); }
  bool erase(const std::string& key) override { return store_->erase(key); }

  std::string get(const std::string& key, std::chrono::milliseconds timeout) override {
    std::string value;
    sliced("get", {key}, timeout, [&](std::chrono::milliseconds slice) { value = store_->get(key, slice); });
    return value;
  }

  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    sliced("wait", keys, timeout, [&](std::chrono::milliseconds slice) { store_->wait(keys, slice); });
  }

 private:
  template <class Fn>
  void sliced(const char* what, const std::vector<std::string>& keys, std::chrono::milliseconds timeout, Fn fn) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      try {
        fn(std::clamp<std::chrono::milliseconds>(left, 0ms, kSlice));
        return;
      } catch (const Error& e) {
        if (e.code() != ErrorCode::timeout) throw;
      }
      check_peers(what, keys);
      if (Clock::now() >= deadline) throw expired(what, keys, timeout);
    }
  }

  void check_peers(const char* what, const std::vector<std::string>& keys) {
    check_exit_notes(what, keys);
    if (auto f = newest_peer_failure(*store_, rank_)) {
      const int culprit = f->culprit();
      const std::string who = culprit == f->rank ? "" : " (as rank " + std::to_string(f->rank) + " reports)";
      throw PeerError(ErrorCode::peer_failed,
                      std::string("store ") + what + " of " + list(keys) + ": rank " + std::to_string(culprit) +
                          " failed" + who + ": " + f->message,
                      culprit);
    }
    if (!root_ || !root_->check(std::string(kLostRanksKey))) return;
    for (int root_rank : parse_lost_ranks(root_->get(std::string(kLostRanksKey), 1s))) {
      const auto it = std::find(root_ranks_.begin(), root_ranks_.end(), root_rank);
      if (it == root_ranks_.end()) continue;
      const int r = static_cast<int>(it - root_ranks_.begin());
      const std::string as = r == root_rank ? "" : " (rank " + std::to_string(root_rank) + " of the job)";
      throw PeerError(ErrorCode::peer_failed,
                      std::string("store ") + what + " of " + list(keys) + ": rank " + std::to_string(r) + as +
                          " died: " + root_->get(lost_rank_key(root_rank), 1s),
                      r);
    }
  }

  // The launcher's exit notes (peer_notes.hpp): when a rank whose key is
  // awaited has ended, the wait is over, and the first rank of this
  // communicator to end is the one to blame (the awaited one may only have
  // given up after it). Also names a rank that died before it ever reached
  // the store.
  void check_exit_notes(const char* what, const std::vector<std::string>& keys) {
    const std::vector<ExitNote> notes = launcher_exit_notes();
    if (notes.empty()) return;
    const ExitNote* first = nullptr;
    for (const ExitNote& n : notes)
      if (!first && comm_rank(n.root_rank) >= 0 && comm_rank(n.root_rank) != rank_) first = &n;
    for (const auto& k : keys) {
      const auto r = key_rank(k);
      if (!first || !r || *r >= static_cast<int>(root_ranks_.size()) || *r == rank_) continue;
      const int root = root_ranks_[static_cast<std::size_t>(*r)];
      if (std::none_of(notes.begin(), notes.end(), [&](const ExitNote& n) { return n.root_rank == root; }) ||
          store_->check(k))
        continue;
      const int cause = comm_rank(first->root_rank);
      throw PeerError(ErrorCode::peer_failed,
                      std::string("store ") + what + " of " + list(keys) + ": the launcher reports that " +
                          first->what +
                          (cause == *r ? ""
                                       : " (the first rank of this communicator to end; rank " + std::to_string(*r) +
                                             ", whose key this waits for, ended after it)"),
                      cause);
    }
  }

  int comm_rank(int root_rank) const {
    const auto it = std::find(root_ranks_.begin(), root_ranks_.end(), root_rank);
    return it == root_ranks_.end() ? -1 : static_cast<int>(it - root_ranks_.begin());
  }

  static std::string list(const std::vector<std::string>& keys) {
    std::string s;
    for (std::size_t i = 0; i < keys.size() && i < 4; ++i) s += (i ? ", '" : "'") + keys[i] + "'";
    if (keys.size() > 4) s += " and " + std::to_string(keys.size() - 4) + " more";
    return s;
  }

  Error expired(const char* what, const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
    std::vector<std::string> missing;
    for (const auto& k : keys)
      if (!store_->check(k)) missing.push_back(k);
    std::vector<int> ranks;
    for (const auto& k : missing)
      if (const auto r = key_rank(k); r && std::find(ranks.begin(), ranks.end(), *r) == ranks.end())
        ranks.push_back(*r);
    std::string owners;
    for (int r : ranks) owners += (owners.empty() ? "rank " : ", rank ") + std::to_string(r);
    std::string msg = std::string("store ") + what + ": " + list(missing.empty() ? keys : missing) +
                      (missing.size() == 1 ? " was" : " were") + " not set within " +
                      std::to_string(timeout.count()) + " ms";
    if (!owners.empty())
      msg += ": " + owners + (owners.find(',') == std::string::npos ? " has" : " have") +
             " not joined (still starting, stuck, or started with another store or world size?)";
    return Error(ErrorCode::timeout, msg);
  }

  std::shared_ptr<Store> store_;
  std::shared_ptr<Store> root_;
  int rank_;
  std::vector<int> root_ranks_;
};

}  // namespace

void linger_until_peers_failed(Store& store, Store* root, int rank, const std::vector<int>& root_ranks,
                               std::chrono::milliseconds budget) noexcept {
  const auto deadline = Clock::now() + budget;
  try {
    for (int r = 0; r < static_cast<int>(root_ranks.size()) && Clock::now() < deadline;) {
      const int root_rank = root_ranks[static_cast<std::size_t>(r)];
      const auto ended = [&] {
        const auto notes = launcher_exit_notes();
        return std::any_of(notes.begin(), notes.end(), [&](const ExitNote& n) { return n.root_rank == root_rank; });
      };
      if (r == rank || store.check(failure_key(r)) || (root && root->check(lost_rank_key(root_rank))) || ended()) {
        ++r;
        continue;
      }
      std::this_thread::sleep_for(20ms);
    }
  } catch (...) {
    // The store is unusable: nobody can read from it anyway.
  }
}

std::shared_ptr<Store> make_watchful_store(std::shared_ptr<Store> store, std::shared_ptr<Store> root, int rank,
                                           std::vector<int> root_ranks) {
  return std::make_shared<WatchfulStore>(std::move(store), std::move(root), rank, std::move(root_ranks));
}

}  // namespace comm::detail
