#pragma once
// The `auto` transport: for each pair of ranks the best transport that
// reaches it, composed behind the one point-to-point interface, so every
// schedule runs over the mix. It is what a communicator gets when no
// transport is named and its ranks live in more than one process.
//
// Choice (plan_auto): between hosts the first of ucx, ofi, gloo this build
// has; inside a host `local` when that host's ranks are threads of one
// process, else the first of shm, ucx, ofi, gloo. Config::transport_options
// "auto.intra" / "auto.inter" (COMM_AUTO_INTRA / COMM_AUTO_INTER) name them
// instead. CUDA buffers are not routed here: the NCCL transport runs whole
// schedules on a stream (COMM_TRANSPORT=nccl).
//
// Composition: the inter-host transport spans the whole group (store prefix
// "auto/inter/"); a host whose choice differs from it gets its own transport
// over just its ranks ("auto/h<k>/"), created first. Every pair is routed to
// exactly one sub-transport, so tags pass through unchanged and matching
// stays per (peer, tag) as the interface promises. progress() drives every
// sub-transport; wait() sleeps in the one sub-transport that has work
// pending, and when several do, in short turns (kTurn) so none is left
// unserved while another sleeps. Failure messages of a per-host transport
// name its ranks by their numbers in this group.

#include <comm/transport.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace comm {

void register_auto_transport();

namespace autotp {

/// Which transport carries which pairs, and why (for comm-info).
struct Plan {
  std::string inter;               ///< between hosts ("" if there is one host)
  std::string inter_why;
  std::vector<std::string> intra;  ///< per host (PeerTable::hosts order); "" = no pair inside it
  std::vector<std::string> intra_why;
};

/// Decides the plan from the peer table, the options and what is available
/// (`available(name)` returns "" or why not). Throws unknown_transport when a
/// needed kind of link has no transport, naming why each candidate is missing,
/// and invalid_config for an option naming an unavailable transport.
Plan plan_auto(const PeerTable& peers, const Config& config,
               const std::function<std::string(std::string_view)>& available);

/// Rewrites "rank N" in a sub-transport's message into the group's rank
/// numbers (`ranks[N]`) and says which sub-transport it came from.
std::string translate_ranks(const std::string& message, const std::vector<int>& ranks, const std::string& via);

}  // namespace autotp
}  // namespace comm
