#pragma once
// --plot: time vs message size, one line per (transport, algorithm), log-log,
// as a self-contained SVG document (no plotting library needed), so the
// crossovers between algorithms and transports are visible at a glance.

#include "runner.hpp"

#include <string>
#include <vector>

namespace comm::bench {

// The SVG text. Results without a positive time are left out; an empty
// result set gives a document that says so.
std::string render_svg(const std::vector<Result>& results, const std::string& title);

}  // namespace comm::bench
