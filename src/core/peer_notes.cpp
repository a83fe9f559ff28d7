#include "core/peer_notes.hpp"
#include "util/c_locale.hpp"

#include <charconv>
#include <condition_variable>
#include <sstream>
#include <thread>

namespace comm::detail {
namespace {

using namespace std::chrono_literals;

constexpr auto kPoll = 50ms;

std::string failure_key(int rank) { return "failed/" + std::to_string(rank); }
std::string stall_key(int rank) { return "stall/" + std::to_string(rank); }

// A store access that must not hold up its caller: runs `fn` on a detached
// thread; the caller waits for it at most `budget` (0: not at all).
template <class Fn>
bool run_bounded(Fn fn, std::chrono::milliseconds budget) {
  struct Done {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  };
  auto done = std::make_shared<Done>();
  std::thread([fn = std::move(fn), done]() mutable {
    try {
      fn();
    } catch (...) {
      // The store is gone or unreachable: the note is simply not there.
    }
    std::lock_guard lk(done->mu);
    done->done = true;
    done->cv.notify_all();
  }).detach();
  std::unique_lock lk(done->mu);
  return done->cv.wait_for(lk, budget, [&] { return done->done; });
}

}  // namespace

void publish_failure(std::shared_ptr<Store> store, int rank, ErrorCode code, const std::string& message) {
  run_bounded(
      [store = std::move(store), rank, note = std::to_string(static_cast<int>(code)) + '\n' + message] {
        store->set(failure_key(rank), note);
      },
      // Long enough for a healthy store (a process that exits right after
      // failing must not take its note with it), short enough for a dead one.
      500ms);
}

std::optional<PeerFailure> peer_failure(std::shared_ptr<Store> store, int peer, std::chrono::milliseconds budget) {
  auto found = std::make_shared<std::optional<PeerFailure>>();
  auto mu = std::make_shared<std::mutex>();
  const auto until = std::chrono::steady_clock::now() + budget;
  run_bounded(
      [store = std::move(store), peer, found, mu, until] {
        do {
          if (store->check(failure_key(peer))) {
            const std::string note = store->get(failure_key(peer), 1s);
            const auto nl = note.find('\n');
            int code = 0;
            std::from_chars(note.data(), note.data() + (nl == std::string::npos ? 0 : nl), code);
            std::lock_guard lk(*mu);
            *found = PeerFailure{static_cast<ErrorCode>(code), nl == std::string::npos ? note : note.substr(nl + 1)};
            return;
          }
          std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
              kPoll / 5, std::max<std::chrono::steady_clock::duration>(until - std::chrono::steady_clock::now(), 0ms)));
        } while (std::chrono::steady_clock::now() < until);
      },
      budget + 20ms);
  std::lock_guard lk(*mu);
  return *found;
}

struct StallProbe::State {
  std::atomic<bool> stop{false};
  mutable std::mutex mu;
  std::optional<std::string> mismatch;
};

StallProbe::StallProbe(std::shared_ptr<Store> store, int rank, std::vector<CallNote> mine, std::vector<int> peers,
                       std::uint64_t seq, std::uint64_t signature)
    : state_(std::make_shared<State>()) {
  std::ostringstream out = util::c_ostream();
  for (const CallNote& n : mine) out << n.seq << ' ' << n.signature << ' ' << n.description << '\n';
  run_bounded(
      [store = std::move(store), rank, text = out.str(), peers = std::move(peers), seq, signature, s = state_] {
        store->set(stall_key(rank), text);
        while (!s->stop.load(std::memory_order_acquire)) {
          for (int peer : peers) {
            if (!store->check(stall_key(peer))) continue;
            std::istringstream in = util::c_istream(store->get(stall_key(peer), 1s));
            std::uint64_t their_seq = 0, their_signature = 0;
            std::string description;
            while (in >> their_seq >> their_signature && std::getline(in, description)) {
              if (their_seq != seq || their_signature == signature) continue;
              std::lock_guard lk(s->mu);
              s->mismatch = "rank " + std::to_string(peer) + "'s call:" + description;
              return;
            }
          }
          std::this_thread::sleep_for(kPoll);
        }
      },
      0ms);
}

StallProbe::~StallProbe() { state_->stop.store(true, std::memory_order_release); }

std::optional<std::string> StallProbe::mismatch() const {
  std::lock_guard lk(state_->mu);
  return state_->mismatch;
}

}  // namespace comm::detail
