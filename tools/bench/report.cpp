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
    w.member_or_null("auto_pick", !r.auto_pick.empty(), r.auto_pick).end_object();
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
