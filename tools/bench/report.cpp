#include "report.hpp"

#include "util/json.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace comm::bench {

std::string format_bytes(std::size_t bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (v == std::floor(v)) std::snprintf(buf, sizeof buf, "%.0f %s", v, units[u]);
  else std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

void print_header(std::FILE* f, const Options& o, const std::string& transport, int ranks, const std::string& link) {
  const std::string op = has_reduce_op(o.coll) ? std::string(to_string(o.op)) : "-";
  std::fprintf(f, "#\n# comm-bench: %s on transport %s, %d rank%s, %s, op %s\n", std::string(to_string(o.coll)).c_str(),
               transport.c_str(), ranks, ranks == 1 ? "" : "s", std::string(to_string(o.dtype)).c_str(), op.c_str());
  if (!link.empty()) std::fprintf(f, "# link 0-1: %s\n", link.c_str());
  std::fprintf(f,
               "# time = median over iterations (%d, fewer above 4 MiB; %d warm-up) of the slowest rank's time;"
               " each iteration timed between barriers\n",
               o.iters, o.warmup);
  std::fprintf(f, "#%11s %11s %5s %5s %4s  %-20s %11s %11s %11s %8s %10s\n", "size", "count", "type", "redop", "root",
               "algo", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong", "pred_us");
}

void print_row(std::FILE* f, const Result& r) {
  const std::string algo = r.algo == "auto" ? "auto(" + r.ran + ")" : r.algo;
  const std::string op = has_reduce_op(r.coll) ? std::string(to_string(r.op)) : "-";
  const std::string root = r.root >= 0 ? std::to_string(r.root) : "-";
  const std::string wrong = r.wrong < 0 ? "N/A" : std::to_string(r.wrong);
  char pred[32] = "-";
  if (r.pred_us >= 0) std::snprintf(pred, sizeof pred, "%.2f", r.pred_us);
  std::fprintf(f, "%12zu %11zu %5s %5s %4s  %-20s %11.2f %11.3f %11.3f %8s %10s\n", r.layout.bytes, r.layout.count,
               std::string(to_string(r.dtype)).c_str(), op.c_str(), root.c_str(), algo.c_str(), r.time_us,
               r.algbw_gbps, r.busbw_gbps, wrong.c_str(), pred);
  std::fflush(f);
}

void print_skip(std::FILE* f, const Skip& s) {
  std::fprintf(f, "%12zu %-45s skipped: %s\n", s.bytes, s.algo.c_str(), s.reason.c_str());
  std::fflush(f);
}

namespace {

// nccl-tests' names for the element types.
const char* nccl_type(DataType t) {
  switch (t) {
    case DataType::f32: return "float";
    case DataType::f64: return "double";
    case DataType::f16: return "half";
    case DataType::bf16: return "bfloat16";
    case DataType::i8: return "int8";
    case DataType::u8: return "uint8";
    case DataType::i32: return "int32";
    case DataType::i64: return "int64";
  }
  return "?";
}

const char* rank_time_name(RankTime t) {
  switch (t) {
    case RankTime::rank0: return "rank 0's time";
    case RankTime::mean: return "the mean over ranks";
    case RankTime::min: return "the fastest rank's time";
    case RankTime::max: return "the slowest rank's time";
  }
  return "?";
}

void nccl_group(std::FILE* f, bool measured, double us, double algbw, double busbw, std::int64_t wrong) {
  if (!measured) {
    std::fprintf(f, " %8s %7s %7s %6s", "N/A", "N/A", "N/A", "N/A");
    return;
  }
  char t[32];
  // nccl-tests prints times of 10 ms and more without decimals.
  std::snprintf(t, sizeof t, us >= 10000 ? "%.0f" : "%.2f", us);
  const std::string w = wrong < 0 ? "N/A" : std::to_string(wrong);
  std::fprintf(f, " %8s %7.2f %7.2f %6s", t, algbw, busbw, w.c_str());
}

}  // namespace

void print_nccl_header(std::FILE* f, const Options& o, const std::string& transport, const std::string& link,
                       const std::vector<RankPlace>& ranks) {
  char step[64];
  if (o.step_bytes > 0) std::snprintf(step, sizeof step, "%zu(bytes)", o.step_bytes);
  else std::snprintf(step, sizeof step, "%g(factor)", o.step_factor);
  std::fprintf(f,
               "# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %s warmup iters: %d iters: %d agg iters: %d "
               "validation: %d graph: 0\n#\n",
               o.min_bytes, o.max_bytes, step, o.warmup, o.iters, o.agg, o.check);
  std::fprintf(f, "# comm-bench %s, transport %s, algorithm %s; time = median over iterations of %s\n",
               std::string(to_string(o.coll)).c_str(), transport.c_str(), o.algo.c_str(), rank_time_name(o.rank_time));
  if (!link.empty()) std::fprintf(f, "# link 0-1: %s\n", link.c_str());
  std::fprintf(f, "#\n# Using devices\n");
  for (const auto& r : ranks)
    std::fprintf(f, "#  Rank %2d Group  0 Pid %6ld on %10s device  - [host] %s\n", r.rank, r.pid, r.host.c_str(),
                 transport.c_str());
  std::fprintf(f, "#\n#%61s%35s\n", "out-of-place", "in-place");
  std::fprintf(f, "#%11s %13s %9s %7s %7s %8s %7s %7s %6s %8s %7s %7s %6s\n", "size", "count", "type", "redop", "root",
               "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  std::fprintf(f, "#%11s %13s %9s %7s %7s %8s %7s %7s %6s %8s %7s %7s %6s\n", "(B)", "(elements)", "", "", "", "(us)",
               "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  std::fflush(f);
}

void print_nccl_row(std::FILE* f, const Result& r) {
  const std::string op = has_reduce_op(r.coll) ? std::string(to_string(r.op)) : "none";
  std::fprintf(f, "%12zu %13zu %9s %7s %7d", r.layout.bytes, r.layout.count, nccl_type(r.dtype), op.c_str(), r.root);
  nccl_group(f, true, r.time_us, r.algbw_gbps, r.busbw_gbps, r.wrong);
  nccl_group(f, r.inplace.measured, r.inplace.time_us, r.inplace.algbw_gbps, r.inplace.busbw_gbps, r.inplace.wrong);
  std::fprintf(f, "\n");
  std::fflush(f);
}

void print_nccl_footer(std::FILE* f, std::int64_t wrong, const std::vector<Result>& results) {
  double sum = 0;
  int n = 0;
  for (const auto& r : results) {
    sum += r.busbw_gbps;
    ++n;
    if (r.inplace.measured) {
      sum += r.inplace.busbw_gbps;
      ++n;
    }
  }
  std::fprintf(f, "# Out of bounds values : %lld %s\n", static_cast<long long>(wrong), wrong ? "FAILED" : "OK");
  std::fprintf(f, "# Avg bus bandwidth    : %g \n#\n", n ? sum / n : 0.0);
  std::fflush(f);
}

std::vector<SummaryRow> summarize(const std::vector<Result>& results, const std::string& transport, BenchColl coll) {
  std::map<std::size_t, SummaryRow> rows;
  for (const auto& r : results) {
    if (r.transport != transport || r.coll != coll || r.algo == "p2p") continue;
    SummaryRow& row = rows[r.layout.bytes];
    row.bytes = r.layout.bytes;
    row.pick = r.auto_pick;
    if (r.algo == "auto") {
      row.auto_us = r.time_us;
      continue;
    }
    if (row.best.empty() || r.time_us < row.best_us) {
      row.best = r.algo;
      row.best_us = r.time_us;
    }
  }
  for (const auto& r : results)
    if (r.transport == transport && r.coll == coll && r.algo != "auto" && rows.count(r.layout.bytes) &&
        r.algo == rows[r.layout.bytes].pick)
      rows[r.layout.bytes].pick_us = r.time_us;
  std::vector<SummaryRow> out;
  for (auto& [bytes, row] : rows)
    if (!row.best.empty()) out.push_back(row);
  return out;
}

void print_summary(std::FILE* f, const std::string& transport, const std::vector<SummaryRow>& rows) {
  if (rows.empty()) return;
  std::fprintf(f, "#\n# summary (%s): fastest algorithm per size vs the automatic pick\n", transport.c_str());
  std::fprintf(f, "#%11s  %-20s %11s  %-20s %11s %12s %11s\n", "size", "best", "best(us)", "auto picks", "pick(us)",
               "pick/best", "auto(us)");
  double worst = 0;
  std::size_t worst_at = 0;
  for (const auto& row : rows) {
    char pick_us[32] = "-", ratio[32] = "-", auto_us[32] = "-";
    if (row.pick_us >= 0) std::snprintf(pick_us, sizeof pick_us, "%.2f", row.pick_us);
    if (row.ratio() >= 0) std::snprintf(ratio, sizeof ratio, "%.3f", row.ratio());
    if (row.auto_us >= 0) std::snprintf(auto_us, sizeof auto_us, "%.2f", row.auto_us);
    std::fprintf(f, "%12zu  %-20s %11.2f  %-20s %11s %12s %11s\n", row.bytes, row.best.c_str(), row.best_us,
                 row.pick.c_str(), pick_us, ratio, auto_us);
    if (row.ratio() > worst) {
      worst = row.ratio();
      worst_at = row.bytes;
    }
  }
  if (worst > 0)
    std::fprintf(f, "# worst pick/best: %.3f at %zu B (%s)\n", worst, worst_at, format_bytes(worst_at).c_str());
  std::fflush(f);
}

std::string results_json(const RunInfo& info, const std::vector<Result>& results) {
  json::Writer w;
  w.set_break_depth(2);  // one record per line
  w.begin_object().member("tool", "comm-bench").member("command", info.command).member("ranks", info.ranks);
  w.member("time", "median over iterations of the slowest rank's time; each iteration timed between barriers");
  w.key("records").begin_array();
  for (const auto& r : results) {
    w.begin_object().member("coll", to_string(r.coll)).member("transport", r.transport).member("algo", r.algo);
    w.member("ran", r.ran).member("ranks", r.ranks).member("bytes", r.layout.bytes).member("count", r.layout.count);
    w.member("dtype", to_string(r.dtype)).member_or_null("op", has_reduce_op(r.coll), to_string(r.op));
    w.member_or_null("root", r.root >= 0, r.root).member("iters", r.iters).member("time_us", r.time_us);
    w.member("p10_us", r.p10_us).member("p90_us", r.p90_us);
    w.member("algbw_gbps", r.algbw_gbps).member("busbw_gbps", r.busbw_gbps);
    w.member_or_null("wrong", r.wrong >= 0, r.wrong).member_or_null("pred_us", r.pred_us >= 0, r.pred_us);
    w.member("sent_bytes", r.sent_bytes).member("cross_host_bytes", r.cross_host_bytes);
    w.member_or_null("auto_pick", !r.auto_pick.empty(), r.auto_pick);
    if (r.inplace.measured) {
      w.key("inplace").begin_object().member("time_us", r.inplace.time_us);
      w.member("algbw_gbps", r.inplace.algbw_gbps).member("busbw_gbps", r.inplace.busbw_gbps);
      w.member_or_null("wrong", r.inplace.wrong >= 0, r.inplace.wrong).end_object();
    }
    w.end_object();
  }
  w.end_array();
  w.key("skipped_transports").begin_array();
  for (const auto& s : info.skipped_transports)
    w.begin_object().member("transport", s.name).member("reason", s.reason).end_object();
  w.end_array();
  w.key("skipped").begin_array();
  for (const auto& s : info.skipped_points) {
    w.begin_object().member("transport", s.transport).member("algo", s.algo).member("bytes", s.bytes);
    w.member("reason", s.reason).end_object();
  }
  w.end_array().end_object();
  return w.str() + "\n";
}

}  // namespace comm::bench
