#pragma once
// The store as a communicator sees it: a get or wait for a key that will
// never be set must not sit out its whole timeout. Waits are cut into short
// slices; between slices the view looks for why the key may never come:
//
// - a rank of this communicator published its failure (core/peer_notes.hpp;
//   a rank whose creation throws does so before rethrowing);
// - the TCP store server saw a rank's connection close without a goodbye
//   (bootstrap/store_keys.hpp: comm/lost), i.e. its process died.
//
// Either ends the wait at once with peer_failed naming that rank and why. A
// wait that runs out names the rank that should have set the key.

#include <comm/store.hpp>

#include <chrono>
#include <memory>
#include <vector>

namespace comm::detail {

// `store`: the communicator's namespace, waited on and forwarded to;
// `root`: the store the server's records are in (null: none);
// `root_ranks[r]`: rank r of the communicator as a client of `root`.
std::shared_ptr<Store> make_watchful_store(std::shared_ptr<Store> store, std::shared_ptr<Store> root, int rank,
                                           std::vector<int> root_ranks);

// For the rank hosting the store when its creation fails: waits (at most
// `budget`) until every other rank has published a failure or is recorded
// lost, so that none of them, still waiting on the store, loses it before
// reading why (they would blame the store's host instead).
void linger_until_peers_failed(Store& store, Store* root, int rank, const std::vector<int>& root_ranks,
                               std::chrono::milliseconds budget) noexcept;

}  // namespace comm::detail
