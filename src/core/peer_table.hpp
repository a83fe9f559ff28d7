#pragma once
// Gathering the peer table at creation (comm/peers.hpp is its public face).

#include <comm/config.hpp>
#include <comm/peers.hpp>
#include <comm/store.hpp>

#include <chrono>
#include <functional>
#include <string>

namespace comm::detail {

PeerInfo describe_self(const Config& config);
std::string serialize_peer(const PeerInfo& p);
PeerInfo parse_peer(const std::string& text, int from);
// The table of a one-rank group (no store needed).
PeerTable self_peer_table(const Config& config);
// Publishes this rank's entry under "peer/<rank>" of `store` and reads every
// rank's; the one exchange every transport and the selector rely on.
PeerTable exchange_peers(Store& store, const Config& config, std::chrono::milliseconds timeout);

// Tests only: while set, describe_self() reports `host(config)` as the host
// identity and hostname of the rank it describes (when non-empty), so ranks
// that are threads of one process can pose as several hosts. Set it before
// the communicators are created and clear it (nullptr) after.
void set_host_override_for_tests(std::function<std::string(const Config&)> host);

// The transport used when none is named: `local` when every rank is a thread
// of one process, else `auto` (per pair the best transport that reaches it).
std::string default_transport(const PeerTable& peers);

}  // namespace comm::detail
