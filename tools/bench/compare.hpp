#pragma once
// comm-bench --transport all --algo all: one line per size comparing comm
// (its fastest algorithm on any transport, and its automatic choice) against
// the transports' own collectives (`native`: MPI's MPI_Allreduce, Gloo's
// allreduce, ...), all measured in the same job.

#include "runner.hpp"

#include <cstdio>
#include <string>
#include <vector>

namespace comm::bench {

struct Timed {
  std::string transport;
  std::string algo;  // for auto: the algorithm it ran
  double us = -1;    // negative: not measured
};

struct ComparisonRow {
  std::size_t bytes = 0;
  Timed best;                  // fastest of comm's own algorithms, any transport
  Timed automatic;             // fastest automatic selection, any transport
  std::vector<Timed> natives;  // one per entry of Comparison::native_transports
};

struct Comparison {
  std::vector<std::string> native_transports;  // transports with a `native` record, in first-seen order
  std::vector<ComparisonRow> rows;             // by size
};

// From every result of `coll` (records of other collectives are ignored).
Comparison compare(const std::vector<Result>& results, BenchColl coll);
// Prints nothing without natives or rows.
void print_comparison(std::FILE* f, BenchColl coll, int ranks, const Comparison& c);

}  // namespace comm::bench
