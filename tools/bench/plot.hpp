#pragma once
// --plot: a self-contained SVG document (no plotting library needed). Per
// transport, two panels against message size (log-log): time per operation
// and bus bandwidth, one line per algorithm (distinct colour and dash), each
// with its p10-p90 band; the automatic pick in heavy black and the best fixed
// algorithm per size as a wide yellow highlight beneath. Below, one panel of
// pick/best per size and transport, with the 1.10 target marked.

#include "runner.hpp"

#include <string>
#include <vector>

namespace comm::bench {

// The SVG text. Results without a positive time are left out; an empty
// result set gives a document that says so.
std::string render_svg(const std::vector<Result>& results, const std::string& title);

}  // namespace comm::bench
