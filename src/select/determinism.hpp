#pragma once
// Deterministic mode (Config::deterministic, COMM_DETERMINISTIC=1): which
// algorithms give bitwise-identical results whatever the message size, the
// pipeline chunking, the world layout or the transport.
//
// The property is computed from the schedules themselves, so it cannot drift
// from the code: every rank's schedule is run symbolically, each input
// element a leaf (rank, index) and each reduce step a node (left operand,
// right operand). Operand order is kept, not only grouping: a+b == b+a in
// IEEE arithmetic, but min/max of -0 and +0, and which NaN payload survives,
// depend on it. An algorithm qualifies for a group size when every output
// element of every rank that the collective defines is the left fold over
// ranks in rank order, ((x0 . x1) . x2) ... x(n-1), of that element's inputs;
// collectives without a reduction (data moves unchanged) qualify trivially.
// This is checked at several counts (1 element,
// fewer elements than ranks, counts that do not divide) with one pipeline
// chunk and with tiny chunks. Native algorithms (a transport's own
// collectives) never qualify: their order is not ours to inspect.

#include "algorithms/algorithm.hpp"

#include <string>

namespace comm {

// True if `algorithm` computes every element as the rank-ordered fold on
// `nranks` ranks (always for collectives without a reduction); otherwise
// false and, if `why` is given, an explanation naming an element and the
// order it got. Costs O(n^2) symbolic steps for direct algorithms (16 ranks:
// tens of ms): callers cache it (see Selector).
bool rank_ordered(const algo::Algorithm& algorithm, int nranks, std::string* why = nullptr);

// Whether deterministic mode restricts collective `c` at all (it has a reduction).
bool reduces(Collective c) noexcept;

}  // namespace comm
