#include "core/peer_notes.hpp"
#include "util/c_locale.hpp"

#include "bootstrap/store_keys.hpp"

#include <dirent.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <optional>
#include <condition_variable>
#include <sstream>
#include <thread>

namespace comm::detail {
namespace {

using namespace std::chrono_literals;

constexpr auto kPoll = 50ms;

constexpr const char* kNewestFailureKey = "failed/any";

// A note is "<code>\n<cause>\n<message>".
PeerFailure parse_failure(const std::string& note, int rank) {
  PeerFailure f;
  f.rank = rank;
  const auto nl1 = note.find('\n');
  const auto nl2 = nl1 == std::string::npos ? std::string::npos : note.find('\n', nl1 + 1);
  if (nl2 == std::string::npos) {
    f.message = note;
    return f;
  }
  int code = 0;
  std::from_chars(note.data(), note.data() + nl1, code);
  std::from_chars(note.data() + nl1 + 1, note.data() + nl2, f.cause);
  f.code = static_cast<ErrorCode>(code);
  f.message = note.substr(nl2 + 1);
  return f;
}
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
  // `fn` holds the store: it is released before the caller is told, or the
  // caller's references would not be the last and a store hosted in this
  // process would never close (nor linger to tell the others why) at exit.
  std::thread([held = std::optional<Fn>(std::move(fn)), done]() mutable {
    try {
      (*held)();
    } catch (...) {
      // The store is gone or unreachable: the note is simply not there.
    }
    held.reset();
    std::lock_guard lk(done->mu);
    done->done = true;
    done->cv.notify_all();
  }).detach();
  std::unique_lock lk(done->mu);
  return done->cv.wait_for(lk, budget, [&] { return done->done; });
}

}  // namespace

std::string failure_key(int rank) { return "failed/" + std::to_string(rank); }

int cause_of(const Error& e) noexcept {
  const auto* p = dynamic_cast<const PeerError*>(&e);
  return p ? p->cause() : -1;
}

void publish_failure(std::shared_ptr<Store> store, int rank, ErrorCode code, const std::string& message, int cause,
                     std::chrono::milliseconds budget) {
  run_bounded(
      [store = std::move(store), rank,
       note = std::to_string(static_cast<int>(code)) + '\n' + std::to_string(cause) + '\n' + message] {
        store->set(failure_key(rank), note);
        store->set(kNewestFailureKey, std::to_string(rank));
      },
      budget);
}

std::optional<PeerFailure> newest_peer_failure(Store& store, int self) {
  if (!store.check(kNewestFailureKey)) return std::nullopt;
  int rank = -1;
  const std::string who = store.get(kNewestFailureKey, 1s);
  std::from_chars(who.data(), who.data() + who.size(), rank);
  if (rank < 0 || rank == self) return std::nullopt;
  return parse_failure(store.get(failure_key(rank), 1s), rank);
}

std::vector<ExitNote> launcher_exit_notes() {
  std::vector<ExitNote> notes;
  const char* dir = std::getenv("COMM_EXIT_NOTES");
  if (!dir || !*dir) return notes;
  DIR* d = ::opendir(dir);
  if (!d) return notes;
  while (const dirent* e = ::readdir(d)) {
    ExitNote n;
    const std::string name = e->d_name;
    const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), n.root_rank);
    if (ec != std::errc{} || end != name.data() + name.size()) continue;  // ".", "..", "<rank>.tmp"
    std::ifstream in(std::string(dir) + "/" + name);
    if (!(in >> n.order) || !std::getline(in >> std::ws, n.what)) continue;
    notes.push_back(std::move(n));
  }
  ::closedir(d);
  std::sort(notes.begin(), notes.end(), [](const ExitNote& a, const ExitNote& b) { return a.order < b.order; });
  return notes;
}

Culprit find_culprit(std::shared_ptr<Store> store, std::shared_ptr<Store> root, std::vector<int> root_ranks,
                     int self, std::vector<int> suspects, std::chrono::milliseconds budget) {
  struct Shared {
    std::mutex mu;
    Culprit found;
  };
  auto shared = std::make_shared<Shared>();
  const auto until = std::chrono::steady_clock::now() + budget;
  const auto comm_rank = [root_ranks](int root_rank) {
    const auto it = std::find(root_ranks.begin(), root_ranks.end(), root_rank);
    return it == root_ranks.end() ? -1 : static_cast<int>(it - root_ranks.begin());
  };
  // The first death this host's launcher recorded (its exit notes), if any.
  const auto launcher_saw = [comm_rank, self](Culprit& c) {
    for (const ExitNote& n : launcher_exit_notes())
      if (const int mine = comm_rank(n.root_rank); mine >= 0 && mine != self) {
        c.source = Culprit::Source::launcher;
        c.rank = mine;
        c.reason = "the launcher reports that " + n.what;
        return true;
      }
    return false;
  };
  run_bounded(
      [store = std::move(store), root = std::move(root), self, suspects = std::move(suspects), shared, until,
       comm_rank, launcher_saw] {
        const auto suspected = [&](int r) { return std::find(suspects.begin(), suspects.end(), r) != suspects.end(); };
        const auto noted = [&](Culprit& c) {
          for (const int s : suspects)
            if (store->check(failure_key(s))) {
              c.source = Culprit::Source::note;
              c.note = parse_failure(store->get(failure_key(s), 1s), s);
              c.rank = c.note.culprit();
              return true;
            }
          return false;
        };
        Culprit c;
        try {
          do {
            if (noted(c) || launcher_saw(c)) break;
            if (root && root->check(std::string(kLostRanksKey))) {
              for (int r : parse_lost_ranks(root->get(std::string(kLostRanksKey), 1s))) {
                const int mine = comm_rank(r);
                if (mine < 0 || mine == self || (c.rank >= 0 && !suspected(mine))) continue;
                c.source = Culprit::Source::lost;
                c.rank = mine;
                c.reason = root->get(lost_rank_key(r), 1s);
              }
              if (c.source == Culprit::Source::lost) break;
            }
            std::this_thread::sleep_for(10ms);
          } while (std::chrono::steady_clock::now() < until);
        } catch (const Error& e) {
          // The store is unreachable: the process hosting it (root rank 0) is
          // gone. It may have left only because another rank died first, after
          // waiting a while for the others to read why: what this host's
          // launcher saw die is still on disk, and comes first.
          if (e.code() == ErrorCode::store_failure) {
            c = Culprit{};
            if (!launcher_saw(c) && comm_rank(0) >= 0 && comm_rank(0) != self) {
              c.source = Culprit::Source::store_gone;
              c.rank = comm_rank(0);
              c.reason = e.what();
            }
          }
        }
        std::lock_guard lk(shared->mu);
        shared->found = std::move(c);
      },
      budget + 50ms);
  std::lock_guard lk(shared->mu);
  return shared->found;
}

struct StallProbe::State {
  std::atomic<bool> stop{false};
  std::atomic<bool> moved_on{false};
  mutable std::mutex mu;
  std::optional<std::string> mismatch;
  std::optional<PeerFailure> failure;
};

StallProbe::StallProbe(std::shared_ptr<Store> store, int rank, std::vector<CallNote> mine, std::vector<int> peers,
                       std::uint64_t seq, std::uint64_t signature, std::shared_ptr<StallNoteOrder> order)
    : state_(std::make_shared<State>()) {
  std::ostringstream out = util::c_ostream();
  for (const CallNote& n : mine) out << n.seq << ' ' << n.signature << ' ' << n.description << '\n';
  const std::string calls = out.str();
  // Last: the call lines above are read until the first line that is not one.
  out << "waiting " << seq;
  for (int p : peers) out << ' ' << p;
  out << '\n';
  const std::uint64_t mine_number = order->newest.fetch_add(1, std::memory_order_acq_rel) + 1;
  // Only while no newer probe exists: then what this one writes is the latest word.
  const auto write_note = [store, rank, order, mine_number](const std::string& text) {
    std::lock_guard lk(order->write);
    if (order->newest.load(std::memory_order_acquire) == mine_number) store->set(stall_key(rank), text);
  };
  run_bounded(
      [store = std::move(store), rank, text = out.str(), moved = calls + "moved on past " + std::to_string(seq) + "\n",
       write_note, peers = std::move(peers), seq, signature, s = state_] {
        write_note(text);
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
          if (auto f = newest_peer_failure(*store, rank)) {
            std::lock_guard lk(s->mu);
            s->failure = std::move(f);
            return;
          }
          std::this_thread::sleep_for(kPoll);
        }
        if (s->moved_on.load(std::memory_order_acquire)) write_note(moved);
      },
      0ms);
}

StallProbe::~StallProbe() { state_->stop.store(true, std::memory_order_release); }

void StallProbe::moved_on() noexcept { state_->moved_on.store(true, std::memory_order_release); }

std::optional<std::string> StallProbe::mismatch() const {
  std::lock_guard lk(state_->mu);
  return state_->mismatch;
}

std::optional<PeerFailure> StallProbe::failure() const {
  std::lock_guard lk(state_->mu);
  return state_->failure;
}

namespace {

std::optional<StallNote> parse_stall_note(const std::string& text) {
  StallNote n;
  if (const auto past = text.rfind("moved on past "); past != std::string::npos) {
    std::istringstream in(text.substr(past + 14));
    n.waiting = false;
    if (!(in >> n.seq)) return std::nullopt;
    return n;
  }
  const auto at = text.rfind("waiting ");
  if (at == std::string::npos) return std::nullopt;
  std::istringstream in(text.substr(at + 8));
  if (!(in >> n.seq)) return std::nullopt;
  for (int r; in >> r;) n.waiting_on.push_back(r);
  return n;
}

}  // namespace

std::optional<StallNotes> read_stall_notes(std::shared_ptr<Store> store, int size, std::chrono::milliseconds budget) {
  struct Shared {
    std::mutex mu;
    std::optional<StallNotes> notes;
  };
  auto shared = std::make_shared<Shared>();
  run_bounded(
      [store = std::move(store), size, shared] {
        StallNotes notes(static_cast<std::size_t>(size));
        for (int r = 0; r < size; ++r)
          if (store->check(stall_key(r))) notes[static_cast<std::size_t>(r)] = parse_stall_note(store->get(stall_key(r), 1s));
        std::lock_guard lk(shared->mu);
        shared->notes = std::move(notes);
      },
      budget);
  std::lock_guard lk(shared->mu);
  return shared->notes;
}

namespace {

struct HoldupSearch {
  const StallNotes& notes;
  int self;
  std::vector<char> seen, held;  // by rank: visited once only (cycles); what that visit found
  std::vector<Holdup> out;

  // Whether rank r's part of collective `seq` is held up by a blamed rank
  // (r itself, or one it waits on); `via`: the rank waiting on r, if r is
  // reached through a rank that is behind.
  bool visit(int r, std::uint64_t seq, int via) {
    if (r < 0 || r >= static_cast<int>(notes.size()) || r == self) return false;
    const auto i = static_cast<std::size_t>(r);
    if (seen[i]) return held[i] != 0;  // a cycle answers "not held" while it is being visited
    seen[i] = 1;
    const auto& note = notes[i];
    bool by_others = false;
    if (note && note->seq >= seq) {
      // In `seq` or later: waiting there on others, or past it (not holding it up).
      if (note->waiting)
        for (int w : note->waiting_on) by_others = visit(w, note->seq, -1) || by_others;
      held[i] = by_others;
      return by_others;
    }
    if (note && note->waiting) {
      // Behind, but stuck waiting in an earlier collective: whoever has not
      // entered that one holds up both.
      for (int w : note->waiting_on) by_others = visit(w, note->seq, r) || by_others;
      if (by_others) {
        held[i] = 1;
        return true;
      }
    }
    out.push_back({r, seq, via});
    held[i] = 1;
    return true;
  }
};

}  // namespace

std::vector<Holdup> holding_up(const StallNotes& notes, const std::vector<int>& waiting_on, std::uint64_t seq,
                               int self) {
  HoldupSearch search{notes, self, std::vector<char>(notes.size(), 0), std::vector<char>(notes.size(), 0), {}};
  for (int r : waiting_on) search.visit(r, seq, -1);
  std::vector<Holdup> out = std::move(search.out);
  std::sort(out.begin(), out.end(), [](const Holdup& a, const Holdup& b) { return a.rank < b.rank; });
  return out;
}

}  // namespace comm::detail
