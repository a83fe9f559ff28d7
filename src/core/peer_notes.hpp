#pragma once
// Notes ranks leave each other in the communicator's store when something
// goes wrong, so that every rank can say what really happened:
//
// - a rank that fails publishes why ("failed/<rank>"); a rank that then sees
//   that peer close its connections quotes the reason instead of blaming the
//   connection;
// - a rank whose collective stalls publishes its recent calls
//   ("stall/<rank>") and compares them with what the ranks it waits on
//   published: a different call signature for the same collective number is
//   a mismatch, named with both calls.
//
// The store may live in a rank that is frozen or dead, and a store call can
// then block for tens of seconds; none of this may delay a timeout or an
// error. So every store access runs on a detached thread that holds its own
// reference to the store, and callers only ever wait for it within a small
// budget (or not at all).

#include <comm/error.hpp>
#include <comm/store.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace comm::detail {

struct PeerFailure {
  ErrorCode code = ErrorCode::internal;
  std::string message;
  int rank = -1;   // who published it
  int cause = -1;  // the rank whose failure caused it, -1 if unknown (see culprit())
  // The rank to blame: the cause it knew of, else the publisher itself.
  int culprit() const noexcept { return cause >= 0 ? cause : rank; }
};

// An error caused by the failure of another rank, `cause`, which the core
// knows by number (thrown by core code only; callers catch comm::Error).
class PeerError : public Error {
 public:
  PeerError(ErrorCode code, const std::string& message, int cause) : Error(code, message), cause_(cause) {}
  int cause() const noexcept { return cause_; }

 private:
  int cause_;
};
// The cause of `e` if it is a PeerError, else -1.
int cause_of(const Error& e) noexcept;

// Where rank's failure note is.
std::string failure_key(int rank);
// Publishes this rank's failure (and `cause`, the rank that made it fail, or
// -1), also as the newest one ("failed/any"), waiting for it to land at most
// `budget`: long enough for a healthy store (a process that exits right after
// failing must not take its note with it), short enough for a dead one.
void publish_failure(std::shared_ptr<Store> store, int rank, ErrorCode code, const std::string& message, int cause,
                     std::chrono::milliseconds budget = std::chrono::milliseconds(500));
// What the launcher says about ranks that ended badly (commrun writes
// COMM_EXIT_NOTES/<rank>: "<n> <how>", n counting such ends from 1), in the
// order they ended; empty without such a launcher.
struct ExitNote {
  int order = 0;
  int root_rank = -1;  // in the job's numbering
  std::string what;    // "rank 3 was killed by signal SIGKILL (9)"
};
std::vector<ExitNote> launcher_exit_notes();

// Who is to blame for a failure this rank saw with one of `suspects` (its
// connection closed, a message to it failed, a direct-memory wait for it
// ended), as far as the store can tell within `budget` (the store may be
// frozen, so it is asked on a detached thread; one bounded lookup for all
// suspects):
//   note        a suspect, `note.rank`, published why it failed (and whom it blamed);
//   launcher    the launcher saw `rank` end first (launcher_exit_notes);
//   lost        the store server saw `rank` die (core/watchful_store.hpp), a suspect
//               preferred;
//   store_gone  the store cannot be reached: its host, `rank`, is gone;
//   none        nothing known (then the suspect itself is to blame).
// `root`/`root_ranks`: the store holding the server's records and the
// communicator's ranks as its clients (CommunicatorImpl::Lineage).
struct Culprit {
  enum class Source { none, note, launcher, lost, store_gone } source = Source::none;
  int rank = -1;
  PeerFailure note;    // source == note
  std::string reason;  // source == launcher, lost, store_gone: what was seen
};
Culprit find_culprit(std::shared_ptr<Store> store, std::shared_ptr<Store> root, std::vector<int> root_ranks,
                     int self, std::vector<int> suspects, std::chrono::milliseconds budget);
// Blocking, for callers that wait on the store anyway: the newest failure
// some rank other than `self` published, if any.
std::optional<PeerFailure> newest_peer_failure(Store& store, int self);

// One recent collective call, as published on a stall.
struct CallNote {
  std::uint64_t seq = 0;
  std::uint64_t signature = 0;
  std::string description;
};

// Orders one rank's writes of stall/<rank>: the probes' threads are
// detached, so an older probe's last word could land after a newer one's
// first. Shared by a communicator's probes; only the newest probe writes.
struct StallNoteOrder {
  std::mutex write;                     // held around every write of the note
  std::atomic<std::uint64_t> newest{0};  // the newest probe's number
};

// The stall diagnosis of one waiting collective, running in the background.
class StallProbe {
 public:
  // Publishes `mine` and what this rank waits for (collective `seq`, on
  // `peers`) under stall/<rank>, then reads stall/<p> of every rank in
  // `peers` every 50 ms, looking for collective `seq` with another signature,
  // and for a failure any other rank published (a transport may not notice
  // that a peer it waits on gave up: Gloo misses some closed connections).
  StallProbe(std::shared_ptr<Store> store, int rank, std::vector<CallNote> mine, std::vector<int> peers,
             std::uint64_t seq, std::uint64_t signature, std::shared_ptr<StallNoteOrder> order);
  ~StallProbe();  // stops the probe (the thread ends by itself)
  StallProbe(const StallProbe&) = delete;
  StallProbe& operator=(const StallProbe&) = delete;

  // The collective completed after all: the note is rewritten to say so
  // ("moved on past <seq>") when the probe stops, unless a newer probe has
  // written since. A rank stuck elsewhere later is then not taken to be
  // still waiting in this collective (see holding_up).
  void moved_on() noexcept;

  // Non-blocking: the mismatch found so far, as "rank P's call: <description>".
  std::optional<std::string> mismatch() const;
  // Non-blocking: a failure another rank published since the probe began.
  std::optional<PeerFailure> failure() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// Where a rank stood when its last stalled collective was noted: the
// collective it waited in (`seq`) and the ranks it waited on; or, once that
// collective completed, that it moved on past `seq` (waiting false).
struct StallNote {
  std::uint64_t seq = 0;
  std::vector<int> waiting_on;
  bool waiting = true;
};
using StallNotes = std::vector<std::optional<StallNote>>;  // by rank; nullopt: none published

// Every rank's stall note, read within `budget` on a detached thread;
// nullopt when the store did not answer in time (it may be frozen).
std::optional<StallNotes> read_stall_notes(std::shared_ptr<Store> store, int size, std::chrono::milliseconds budget);

// A rank holding up a collective: it has not noted being in collective
// `seq` (frozen, stuck outside comm, or behind). `via` >= 0: `seq` is not the
// collective that timed out but an earlier one, in which rank `via` is still
// waiting on it, and `via` is therefore behind too.
struct Holdup {
  int rank = -1;
  std::uint64_t seq = 0;
  int via = -1;
  bool operator==(const Holdup&) const = default;
};

// The ranks holding up collective `seq`: starting from `waiting_on` (whom
// this rank waits on) and following whom each noted rank waits on. A rank
// that is itself behind but still waiting in an earlier collective passes
// the blame to the ranks it waits on there, when one of them has not
// entered that collective. By rank.
std::vector<Holdup> holding_up(const StallNotes& notes, const std::vector<int>& waiting_on, std::uint64_t seq,
                               int self);

}  // namespace comm::detail
