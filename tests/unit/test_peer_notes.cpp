// Whom a timeout blames (core/peer_notes.hpp): holding_up follows the ranks'
// stall notes from whom the timed-out rank waits on to the ranks that never
// entered the collective, through ranks stuck waiting in an earlier one; and
// a stalled collective that completed says so in its rank's note.

#include "core/peer_notes.hpp"

#include <comm/store.hpp>
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

using namespace comm;
using namespace comm::detail;
using namespace std::chrono_literals;

namespace {

StallNote waiting(std::uint64_t seq, std::vector<int> on) { return {seq, std::move(on), true}; }
StallNote moved_on_past(std::uint64_t seq) { return {seq, {}, false}; }

// Polls rank `r`'s note until `pred` holds, for at most 2 s.
template <class Pred>
bool note_becomes(const std::shared_ptr<Store>& store, int size, int r, Pred pred) {
  for (auto end = std::chrono::steady_clock::now() + 2s; std::chrono::steady_clock::now() < end;) {
    const auto notes = read_stall_notes(store, size, 500ms);
    if (notes && (*notes)[static_cast<std::size_t>(r)] && pred(*(*notes)[static_cast<std::size_t>(r)])) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

}  // namespace

TEST_CASE("holding_up: a frozen rank reached through a rank waiting on it is blamed for the collective") {
  // Rank 0 timed out in #7 waiting on rank 1, which waits in #7 on rank 2; rank 2 noted nothing.
  const StallNotes notes = {std::nullopt, waiting(7, {2}), std::nullopt, waiting(7, {0})};
  CHECK(holding_up(notes, {1}, 7, 0) == std::vector<Holdup>{{2, 7, -1}});
}

TEST_CASE("holding_up: a rank stuck in an earlier collective passes the blame to the rank it waits on there") {
  // Rank 0 is in #27 waiting on ranks 1 and 3. Rank 1 is still in #26,
  // waiting on rank 2, which froze inside #26 before noting anything; rank 3
  // is in #27 waiting on rank 1. Rank 1 is behind only because of rank 2.
  const StallNotes notes = {std::nullopt, waiting(26, {2}), std::nullopt, waiting(27, {1})};
  CHECK(holding_up(notes, {1, 3}, 27, 0) == std::vector<Holdup>{{2, 26, 1}});
  CHECK(holding_up(notes, {3, 1}, 27, 0) == std::vector<Holdup>{{2, 26, 1}});  // whichever is followed first
  // Rank 2's last note, from an earlier stall, is behind #26 too.
  const StallNotes older = {std::nullopt, waiting(26, {2}), waiting(11, {1}), std::nullopt};
  CHECK(holding_up(older, {1}, 27, 0) == std::vector<Holdup>{{2, 26, 1}});
}

TEST_CASE("holding_up: a rank behind is blamed itself when it moved on, or when whom it waits on is not behind") {
  // Rank 1's stall in #26 ended: it is stuck outside comm, not in #26.
  CHECK(holding_up({std::nullopt, moved_on_past(26), std::nullopt}, {1}, 27, 0) == std::vector<Holdup>{{1, 27, -1}});
  // Rank 1 waits in #26 on rank 2, which is already in #27: rank 2 does not hold up #26.
  CHECK(holding_up({std::nullopt, waiting(26, {2}), waiting(27, {0})}, {1}, 27, 0) ==
        std::vector<Holdup>{{1, 27, -1}});
  // A rank that moved on past the collective itself holds nothing up.
  CHECK(holding_up({std::nullopt, moved_on_past(27)}, {1}, 27, 0).empty());
  // Several at once come back by rank.
  CHECK(holding_up({std::nullopt, std::nullopt, std::nullopt}, {2, 1}, 5, 0) ==
        std::vector<Holdup>{{1, 5, -1}, {2, 5, -1}});
}

TEST_CASE("stall notes: a completed stall says it moved on, and an older probe never overwrites a newer one") {
  const std::shared_ptr<Store> store = make_memory_store();
  auto order = std::make_shared<StallNoteOrder>();
  auto first = std::make_unique<StallProbe>(store, 0, std::vector<CallNote>{}, std::vector<int>{1}, 5, 42, order);
  CHECK(note_becomes(store, 2, 0, [](const StallNote& n) { return n.waiting && n.seq == 5 && n.waiting_on == std::vector<int>{1}; }));
  first->moved_on();
  first.reset();
  CHECK(note_becomes(store, 2, 0, [](const StallNote& n) { return !n.waiting && n.seq == 5; }));

  // The next stall begins before the previous probe's thread has written its last word.
  auto older = std::make_unique<StallProbe>(store, 0, std::vector<CallNote>{}, std::vector<int>{1}, 7, 42, order);
  older->moved_on();
  auto newer = std::make_unique<StallProbe>(store, 0, std::vector<CallNote>{}, std::vector<int>{1}, 8, 43, order);
  older.reset();
  CHECK(note_becomes(store, 2, 0, [](const StallNote& n) { return n.waiting && n.seq == 8; }));
  std::this_thread::sleep_for(200ms);  // past the older probe's next poll (50 ms)
  const auto notes = read_stall_notes(store, 2, 500ms);
  REQUIRE(notes);
  REQUIRE((*notes)[0]);
  CHECK((*notes)[0]->waiting);
  CHECK((*notes)[0]->seq == 8);
  newer.reset();
  std::this_thread::sleep_for(100ms);  // its thread ends at its next poll, before the process does
}
