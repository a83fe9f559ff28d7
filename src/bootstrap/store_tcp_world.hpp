#pragma once
// The TCP store server's check that its clients agree on the world: each
// client says, when it authenticates, which rank it is and how many ranks
// the world has. Two live clients (different store objects) claiming one
// rank, or two world sizes, mean the launcher set the ranks up wrongly (two
// launchers' variables mixed, a variable that is not per-process): the job
// cannot work, so the first such problem is kept and every client is told.

#include <cstdint>
#include <map>
#include <string>

namespace comm::detail {

class WorldCheck {
 public:
  // The server's own rank and world size, if it knows them (rank < 0: not).
  explicit WorldCheck(int rank = -1, int world_size = 0) : own_rank_(rank), size_(rank >= 0 ? world_size : 0) {}

  // Records that the client at `peer` (store object `instance`) is `rank` of
  // `world_size`; returns the problem ("" if none). Once there is one, every
  // later call returns it.
  const std::string& claim(int rank, int world_size, std::uint64_t instance, const std::string& peer) {
    if (!error_.empty() || rank < 0) return error_;
    if (size_ == 0) {
      size_ = world_size;  // the first client to say sets the reference
      size_from_ = rank;
    } else if (world_size != size_) {
      error_ = "rank " + std::to_string(rank) + " (" + peer + ") was started for a world of " +
               std::to_string(world_size) + " ranks, but rank " + std::to_string(size_from_ >= 0 ? size_from_ : own_rank_) +
               " for " + std::to_string(size_) + ": the ranks disagree on the world size. " + kHint;
      return error_;
    }
    Claim& c = claims_[rank];
    if (c.connections > 0 && c.instance != instance) {
      error_ = "rank " + std::to_string(rank) + " is claimed by two processes (" + c.peer + " and " + peer +
               "), so another rank is missing. " + kHint;
      return error_;
    }
    if (c.connections == 0) {
      c.instance = instance;
      c.peer = peer;
    }
    ++c.connections;
    return error_;
  }

  // A connection of `instance` claiming `rank` closed.
  void release(int rank, std::uint64_t instance) {
    auto it = claims_.find(rank);
    if (it == claims_.end() || it->second.instance != instance || it->second.connections == 0) return;
    if (--it->second.connections == 0) claims_.erase(it);
  }

  const std::string& error() const noexcept { return error_; }

 private:
  static constexpr const char* kHint =
      "Each process takes its rank and the world size from the first of COMM_RANK/COMM_WORLD_SIZE, "
      "OMPI_COMM_WORLD_RANK/_SIZE, PMI_RANK/PMI_SIZE, PMIX_RANK, RANK/WORLD_SIZE (torchrun), "
      "SLURM_PROCID/SLURM_NTASKS that is set: check what the launcher gave every rank";

  struct Claim {
    std::uint64_t instance = 0;
    int connections = 0;
    std::string peer;
  };
  int own_rank_;
  int size_;
  int size_from_ = -1;  // the rank whose world size is the reference (-1: the server's)
  std::map<int, Claim> claims_;
  std::string error_;
};

}  // namespace comm::detail
