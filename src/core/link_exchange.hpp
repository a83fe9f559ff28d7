#pragma once
// The link matrix every rank selects from: each rank publishes its row (the
// transport's LinkInfo to every peer) and reads all rows, so all ranks hold
// the same matrix and choose identically (divergent choices would hang).

#include "select/cost_model.hpp"

#include <comm/store.hpp>
#include <comm/transport.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace comm::detail {

// The wire form of one rank's row of links (the transport's link to every
// rank, itself included), and back into row `from` of `m`: an exact round
// trip of every LinkInfo field, a transport's transfer curve included.
std::string serialize_links(const std::vector<LinkInfo>& row);
void parse_links(const std::string& text, int from, LinkMatrix& m);

// Publishes this rank's row under "links/<rank>" and reads every rank's.
LinkMatrix exchange_links(const Transport& t, Store& store, std::chrono::milliseconds timeout);

}  // namespace comm::detail
