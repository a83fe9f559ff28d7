#pragma once
// comm-bench output: the nccl-tests style table, the --algo all summary, and
// the --json document.

#include "options.hpp"
#include "runner.hpp"

#include <cstdio>
#include <string>
#include <vector>

namespace comm::bench {

// A transport that was not run, and why ("nccl: no GPU ...").
struct SkippedTransport {
  std::string name;
  std::string reason;
};

// "8 B", "64 KiB", "1.5 MiB".
std::string format_bytes(std::size_t bytes);

// Per transport: what runs, on which link, and the column header.
void print_header(std::FILE* f, const Options& o, const std::string& transport, int ranks, const std::string& link);
void print_row(std::FILE* f, const Result& r);
void print_skip(std::FILE* f, const Skip& s);

// nccl-tests' layout (a single --algo): the parameter line, the ranks, the
// out-of-place and in-place column groups, and the two footers.
struct RankPlace {
  int rank = 0;
  long pid = 0;
  std::string host;
};
void print_nccl_header(std::FILE* f, const Options& o, const std::string& transport, const std::string& link,
                       const std::vector<RankPlace>& ranks);
void print_nccl_row(std::FILE* f, const Result& r);
// "# Out of bounds values : N OK|FAILED" and "# Avg bus bandwidth : X" over
// every out-of-place and in-place busbw printed (nccl-tests' definition).
void print_nccl_footer(std::FILE* f, std::int64_t wrong, const std::vector<Result>& results);

// One row per size of one transport's results: the fastest named algorithm,
// the automatic pick, time(pick)/time(best) (from the pick's own measurement)
// and the directly measured auto time.
struct SummaryRow {
  std::size_t bytes = 0;
  std::string best;
  double best_us = 0;
  std::string pick;
  double pick_us = -1;  // negative: the pick was not measured at this size
  double auto_us = -1;  // negative: auto was not measured
  double ratio() const { return pick_us > 0 && best_us > 0 ? pick_us / best_us : -1; }
};
std::vector<SummaryRow> summarize(const std::vector<Result>& results, const std::string& transport, BenchColl coll);
void print_summary(std::FILE* f, const std::string& transport, const std::vector<SummaryRow>& rows);

struct RunInfo {
  std::string command;  // the command line, for the record
  int ranks = 1;
  std::vector<SkippedTransport> skipped_transports;
  std::vector<Skip> skipped_points;
};
// {"tool": "comm-bench", ..., "records": [ {coll, transport, algo, ranks,
// bytes, count, dtype, time_us, algbw_gbps, busbw_gbps, wrong, pred_us,
// auto_pick, ...}, ... ], "skipped": [...]}
std::string results_json(const RunInfo& info, const std::vector<Result>& results);

}  // namespace comm::bench
