#include "compare.hpp"

#include <algorithm>
#include <map>

namespace comm::bench {
namespace {

void keep_faster(Timed& slot, const Result& r, const std::string& algo) {
  if (slot.us < 0 || r.time_us < slot.us) slot = {r.transport, algo, r.time_us};
}

std::string name(const Timed& t) { return t.us < 0 ? "-" : t.transport + "/" + t.algo; }

std::string micros(double us) {
  char buf[32] = "-";
  if (us >= 0) std::snprintf(buf, sizeof buf, "%.2f", us);
  return buf;
}

}  // namespace

Comparison compare(const std::vector<Result>& results, BenchColl coll) {
  Comparison c;
  for (const auto& r : results)
    if (r.coll == coll && r.algo == "native" &&
        std::find(c.native_transports.begin(), c.native_transports.end(), r.transport) == c.native_transports.end())
      c.native_transports.push_back(r.transport);
  std::map<std::size_t, ComparisonRow> rows;
  for (const auto& r : results) {
    if (r.coll != coll || r.algo == "p2p" || r.time_us <= 0) continue;
    ComparisonRow& row = rows[r.layout.bytes];
    row.bytes = r.layout.bytes;
    row.natives.resize(c.native_transports.size());
    if (r.algo == "native") {
      const auto at = std::find(c.native_transports.begin(), c.native_transports.end(), r.transport);
      keep_faster(row.natives[static_cast<std::size_t>(at - c.native_transports.begin())], r, "native");
    } else if (r.algo == "auto") {
      keep_faster(row.automatic, r, r.ran);
    } else if (r.algo.rfind("native", 0) != 0) {  // native_bcube & co are the library's, not comm's
      keep_faster(row.best, r, r.algo);
    }
  }
  for (auto& [bytes, row] : rows) c.rows.push_back(std::move(row));
  return c;
}

void print_comparison(std::FILE* f, BenchColl coll, int ranks, const Comparison& c) {
  if (c.native_transports.empty() || c.rows.empty()) return;
  std::string natives;
  for (const auto& t : c.native_transports) natives += (natives.empty() ? "" : ", ") + t;
  std::fprintf(f, "#\n# comparison (%s, %d ranks): comm against the libraries' own collectives (native on %s)\n",
               std::string(to_string(coll)).c_str(), ranks, natives.c_str());
  std::fprintf(f, "#%11s  %-24s %10s  %-24s %10s", "size", "comm best", "best(us)", "comm auto", "auto(us)");
  for (const auto& t : c.native_transports) {
    const std::string head = t + " native(us)";
    std::fprintf(f, " %16s %10s", head.c_str(), ("auto/" + t).c_str());
  }
  std::fprintf(f, "\n");
  for (const auto& row : c.rows) {
    std::fprintf(f, "%12zu  %-24s %10s  %-24s %10s", row.bytes, name(row.best).c_str(), micros(row.best.us).c_str(),
                 name(row.automatic).c_str(), micros(row.automatic.us).c_str());
    for (const auto& n : row.natives) {
      char ratio[32] = "-";
      if (n.us > 0 && row.automatic.us > 0) std::snprintf(ratio, sizeof ratio, "%.3f", row.automatic.us / n.us);
      std::fprintf(f, " %16s %10s", micros(n.us).c_str(), ratio);
    }
    std::fprintf(f, "\n");
  }
  std::fflush(f);
}

}  // namespace comm::bench
