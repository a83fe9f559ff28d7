// comm-info: what a communicator sees and why it chooses what it chooses.
// Prints (rank 0) the transports and why others are missing, the link matrix,
// the selection table of every collective, and for given message sizes every
// candidate algorithm with its predicted cost and the reason it won or lost.
//   commrun -n 2 comm-info --transport ucx --size 8 --size 64M
// --json prints the same report as one JSON document; --version prints comm's
// version and each transport library's, without creating a communicator.

#include "util/cli.hpp"
#include "util/json.hpp"
#include "util/units.hpp"

#include <comm/comm.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace {

using namespace comm;

constexpr const char* kKnownTransports[] = {"local", "auto", "ucx", "ofi", "gloo", "nccl"};
constexpr Collective kShown[] = {Collective::allreduce, Collective::reduce_scatter, Collective::allgather,
                                 Collective::broadcast, Collective::reduce,         Collective::all_to_all,
                                 Collective::all_to_allv, Collective::barrier};

struct InfoOptions {
  std::string transport;
  std::string fabric;  // --fabric: plan on a preset cluster, no communicator
  std::vector<std::size_t> sizes;
  std::size_t table_max = std::size_t{1} << 30;
  bool json = false;
  bool version = false;
};

constexpr const char* kDescription = R"(Creates a communicator (Config from the environment; --transport overrides
COMM_TRANSPORT) and prints, on rank 0: the transports of this build and why
any is unavailable; the hosts; the link between every pair of ranks (kind,
latency alpha, bandwidth beta, detail); the selection table of each collective
from 1 B to --max; and for each --size every candidate algorithm with its
predicted time and why it won or lost ("det": its reduction order is the rank
order at every size, so it may run under COMM_DETERMINISTIC=1, which restricts
auto to such algorithms). COMM_CALIBRATE / COMM_TUNING_FILE /
COMM_DETERMINISTIC apply as for any communicator.

comm-info --fabric PRESET [--size SIZE]... (no communicator, no commrun) plans
on a preset cluster instead (h100-8, h100-2x8, h100-8x8, h100-<H>x8: H100 hosts
on NVSwitch, one 400 Gb/s NIC per GPU between): its hosts and links, and for
each --size every all-reduce algorithm's predicted time, fastest first.)";

InfoOptions parse(int argc, char** argv) {
  InfoOptions o;
  cli::Parser p("comm-info", "commrun -n N comm-info [options]");
  p.description(kDescription);
  p.text("--transport", "NAME", "the transport to describe (default: COMM_TRANSPORT)", o.transport);
  p.list("--size", "SIZE", "show every candidate at this message size (repeatable;\nK/M/G suffixes; default 8 and 64M)",
         [&o](std::string_view v) {
           const auto b = util::parse_bytes(v);
           if (!b) throw cli::BadValue("a byte count with an optional K, M or G suffix, e.g. 8, 64K, 1M");
           o.sizes.push_back(*b);
         });
  p.bytes("--max", "largest size of the selection tables (default 1G)", o.table_max);
  p.text("--fabric", "PRESET", "plan on a preset cluster (no communicator is created)", o.fabric);
  p.flag("--json", "the whole report as one JSON document on stdout", o.json);
  p.flag("--version", "comm's version and each transport library's, then exit\n(no communicator is created)",
         o.version);
  p.parse_or_exit(argc, argv);
  if (o.sizes.empty()) o.sizes = {8, std::size_t{64} << 20};
  return o;
}

std::string bytes_text(std::size_t b) {
  if (b == SIZE_MAX) return "inf";
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = static_cast<double>(b);
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, v == static_cast<double>(static_cast<std::size_t>(v)) ? "%.0f %s" : "%.2f %s", v,
                units[u]);
  return buf;
}

// "" if a one-rank communicator over `name` can be made here, else why not.
// A transport can load and still be unusable on this machine (the NCCL plugin
// without a CUDA device): only making one tells.
std::string probe(const std::string& name, const Config& base) {
  Config cfg = base;
  cfg.transport = name;
  cfg.rank = 0;
  cfg.world_size = 1;
  cfg.local_rank = 0;
  cfg.store.clear();
  cfg.calibrate = false;
  cfg.tuning_file.clear();
  cfg.timeout = std::chrono::seconds(20);
  try {
    Communicator one = Communicator::create(cfg, make_memory_store());
    return {};
  } catch (const Error& e) {
    return e.what();
  }
}

// Every transport this build knows of or can load, with why it is missing
// and what it says about its library.
struct TransportRow {
  std::string name;
  std::string unavailable;  // "" = available
  TransportLibrary library;
};

// With `base`, a transport that loads is also tried (all but `in_use`).
std::vector<TransportRow> transport_rows(const Config* base = nullptr, std::string_view in_use = {}) {
  std::vector<std::string> names(std::begin(kKnownTransports), std::end(kKnownTransports));
  for (const auto& n : available_transports())
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  const std::vector<TransportLibrary> libraries = transport_libraries();
  std::vector<TransportRow> rows;
  for (const auto& n : names) {
    TransportRow r{n, transport_unavailable_reason(n), {n, {}, {}, {}}};
    // Not mpi: a communicator over it initialises MPI for the whole process
    // (singleton start-up, a runtime comm-info must not start behind the
    // user's back); it is usable wherever its library loads.
    if (r.unavailable.empty() && base && n != in_use && n != "mpi")
      if (const std::string why = probe(n, *base); !why.empty())
        r.unavailable = "it loads, but a communicator cannot be made here: " + why;
    for (const auto& l : libraries)
      if (l.transport == n) r.library = l;
    rows.push_back(std::move(r));
  }
  return rows;
}

std::string library_text(const TransportLibrary& l) {
  if (l.library.empty()) return "no library (part of comm)";
  return l.library + " " + l.version + (l.source.empty() ? "" : " (" + l.source + ")");
}

// One line per transport: its library, or why it is unavailable.
void print_transport_lines(const std::vector<TransportRow>& rows, const std::string& available) {
  for (const auto& r : rows)
    std::printf("  %-8s %s\n", r.name.c_str(),
                r.unavailable.empty() ? (available + library_text(r.library)).c_str()
                                      : ("unavailable: " + r.unavailable).c_str());
}

void print_links(const Communicator& c) {
  const int n = c.size();
  std::printf("\nLinks (from -> to: kind, alpha = latency, beta = bandwidth)\n");
  if (n == 1) {
    const LinkInfo l = c.link(0, 0);
    std::printf("  single rank: self link %s\n", l.detail.c_str());
    return;
  }
  // Group identical links so a 16-rank job prints a few lines, not 240.
  using Key = std::tuple<int, double, double, std::string>;
  std::map<Key, std::vector<std::pair<int, int>>> groups;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (a != b) {
        const LinkInfo l = c.link(a, b);
        groups[{static_cast<int>(l.kind), l.alpha_us, l.beta_gbps, l.detail}].emplace_back(a, b);
      }
  for (const auto& [key, pairs] : groups) {
    const auto& [kind, alpha, beta, detail] = key;
    std::string who;
    if (pairs.size() <= 6) {
      for (const auto& [a, b] : pairs) who += (who.empty() ? "" : ", ") + std::to_string(a) + "->" + std::to_string(b);
    } else {
      who = std::to_string(pairs.size()) + " pairs, e.g. " + std::to_string(pairs[0].first) + "->" +
            std::to_string(pairs[0].second);
    }
    std::printf("  %-24s %-8s alpha %8.3f us  beta %8.3f GB/s  %s\n", who.c_str(),
                std::string(to_string(static_cast<LinkKind>(kind))).c_str(), alpha, beta, detail.c_str());
    // Calibrated links: what each message size measured beyond alpha, which the cost model follows.
    const LinkInfo first = c.link(pairs[0].first, pairs[0].second);
    if (first.transfer_curve.empty()) continue;
    std::string points;
    for (const auto& [bytes, us] : first.transfer_curve) {
      char buf[48];
      std::snprintf(buf, sizeof buf, "%s%s %.3g", points.empty() ? "" : ", ", bytes_text(bytes).c_str(), us);
      points += buf;
    }
    std::printf("  %-24s transfer beyond alpha, us: %s\n", "", points.c_str());
  }
}

void print_hosts(const Communicator& c) {
  const PeerTable& t = c.peers();
  std::printf("\nHosts (%d; from the peer table every transport and the selector read)\n", t.num_hosts());
  std::string lines = t.describe();
  for (std::size_t start = 0; start < lines.size();) {
    const auto end = lines.find('\n', start);
    std::printf("  %s\n", lines.substr(start, end - start).c_str());
    start = end + 1;
  }
}

void print_tables(const Communicator& c, std::size_t max_bytes) {
  std::printf("\nSelection tables (message size = the larger of a rank's input and output buffers)\n");
  for (Collective coll : kShown) {
    std::printf("  %s (algorithms:", std::string(to_string(coll)).c_str());
    for (const auto& a : c.algorithms(coll)) std::printf(" %s", a.c_str());
    std::string det;
    for (const auto& cand : c.candidates(coll, 8))
      if (cand.deterministic) det += (det.empty() ? "" : " ") + cand.algorithm;
    std::printf("; deterministic on %d ranks: %s)\n", c.size(), det.empty() ? "none" : det.c_str());
    for (const auto& r : c.selection_table(coll, max_bytes))
      std::printf("    [%10s, %10s)  %-20s %s\n", bytes_text(r.min_bytes).c_str(), bytes_text(r.max_bytes).c_str(),
                  r.algorithm.c_str(), r.source.c_str());
  }
}

void print_candidates(const Communicator& c, std::size_t bytes) {
  std::printf("\nCandidates at %s (%zu B)\n", bytes_text(bytes).c_str(), bytes);
  for (Collective coll : kShown) {
    std::printf("  %s: auto picks %s\n", std::string(to_string(coll)).c_str(), c.algorithm_for(coll, bytes).c_str());
    for (const auto& cand : c.candidates(coll, bytes)) {
      char pred[32] = "        -";
      if (cand.predicted_us >= 0) std::snprintf(pred, sizeof pred, "%9.2f", cand.predicted_us);
      std::printf("    %-20s %s us  %-7s %-4s %s\n", cand.algorithm.c_str(), pred, cand.chosen ? "chosen" : "",
                  cand.deterministic ? "det" : "", cand.note.c_str());
    }
  }
}

// ---- --json: the same report as one document

void json_transports(json::Writer& w, const std::vector<TransportRow>& rows) {
  w.key("transports").begin_array();
  for (const auto& r : rows) {
    w.begin_object().member("name", r.name).member("available", r.unavailable.empty());
    w.member_or_null("unavailable", !r.unavailable.empty(), r.unavailable);
    w.member_or_null("library", !r.library.library.empty(), r.library.library);
    w.member_or_null("version", !r.library.version.empty(), r.library.version);
    w.member_or_null("version_source", !r.library.source.empty(), r.library.source).end_object();
  }
  w.end_array();
}

void json_peers(json::Writer& w, const Communicator& c) {
  const PeerTable& t = c.peers();
  w.key("hosts").begin_array();
  for (const auto& ranks : t.hosts) {
    const PeerInfo& first = t[ranks.front()];
    w.begin_object().member("hostname", first.hostname).member("identity", first.host).key("ranks").begin_array();
    for (int r : ranks) w.value(r);
    w.end_array().end_object();
  }
  w.end_array();
  w.key("links").begin_array();
  for (int a = 0; a < c.size(); ++a)
    for (int b = 0; b < c.size(); ++b) {
      const LinkInfo l = c.link(a, b);
      w.begin_object().member("from", a).member("to", b).member("kind", to_string(l.kind));
      w.member("alpha_us", l.alpha_us).member("beta_gbps", l.beta_gbps).member("detail", l.detail);
      if (!l.transfer_curve.empty()) w.member("transfer_us", l.transfer_curve);
      w.end_object();
    }
  w.end_array();
}

void json_selection(json::Writer& w, const Communicator& c, const InfoOptions& o) {
  w.key("selection").begin_object();
  for (Collective coll : kShown) {
    w.key(to_string(coll)).begin_object().key("algorithms").begin_array();
    for (const auto& a : c.algorithms(coll)) w.value(a);
    w.end_array().key("table").begin_array();
    for (const auto& r : c.selection_table(coll, o.table_max)) {
      w.begin_object().member("min_bytes", r.min_bytes);
      w.member_or_null("max_bytes", r.max_bytes != SIZE_MAX, r.max_bytes);  // null: and above
      w.member("algorithm", r.algorithm).member("source", r.source).end_object();
    }
    w.end_array().end_object();
  }
  w.end_object();
  w.key("candidates").begin_array();
  for (std::size_t bytes : o.sizes) {
    w.begin_object().member("bytes", bytes).key("collectives").begin_object();
    for (Collective coll : kShown) {
      w.key(to_string(coll)).begin_object().member("auto", c.algorithm_for(coll, bytes)).key("candidates");
      w.begin_array();
      for (const auto& cand : c.candidates(coll, bytes)) {
        w.begin_object().member("algorithm", cand.algorithm);
        w.member_or_null("predicted_us", cand.predicted_us >= 0, cand.predicted_us);
        w.member("chosen", cand.chosen).member("note", cand.note).end_object();
      }
      w.end_array().end_object();
    }
    w.end_object().end_object();
  }
  w.end_array();
}

std::string report_json(const Communicator& c, const InfoOptions& o, const std::vector<TransportRow>& rows) {
  json::Writer w;
  w.set_break_depth(2);
  w.begin_object().member("tool", "comm-info").member("comm_version", version());
  w.member("ranks", c.size()).member("transport", c.transport_name());
  json_transports(w, rows);
  json_peers(w, c);
  json_selection(w, c, o);
  return w.end_object().str() + "\n";
}

// --fabric: the cost model on a preset cluster, as the selector would see it.
void print_fabric(const std::string& name, const std::vector<std::size_t>& sizes) {
  const FabricPreset f = fabric_preset(name);
  const HostFabric& h = f.fabric;
  std::printf("comm-info: fabric preset %s (no communicator): %s\n  source: %s\n\n", f.name.c_str(), f.what.c_str(),
              f.source.c_str());
  std::printf("Hosts: %d of %d ranks\n  inside a host  %-8s alpha %8.3f us  beta %8.3f GB/s  %s\n", h.hosts,
              h.ranks_per_host, std::string(to_string(h.intra.kind)).c_str(), h.intra.alpha_us, h.intra.beta_gbps,
              h.intra.detail.c_str());
  if (h.hosts > 1)
    std::printf("  between hosts  %-8s alpha %8.3f us  beta %8.3f GB/s  %s\n", std::string(to_string(h.inter.kind)).c_str(),
                h.inter.alpha_us, h.inter.beta_gbps, h.inter.detail.c_str());
  std::printf("  per collective %.2f us, per step %.2f us, reduce %.0f GB/s, copy %.0f GB/s\n", f.compute.op_overhead_us,
              f.compute.step_overhead_us, f.compute.reduce_gbps, f.compute.copy_gbps);
  for (std::size_t s : sizes) {
    std::printf("\nallreduce at %s: fastest first (the selector's pick)\n", bytes_text(s).c_str());
    for (const Prediction& p : predict(Collective::allreduce, h, s, f.compute))
      if (p.us >= 0) std::printf("    %-20s %12.2f us\n", p.algorithm.c_str(), p.us);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const InfoOptions o = parse(argc, argv);
  try {
    if (o.version) {
      std::printf("comm %s\n", std::string(version()).c_str());
      print_transport_lines(transport_rows(), "");
      return 0;
    }
    if (!o.fabric.empty()) {
      print_fabric(o.fabric, o.sizes);
      return 0;
    }
    Config cfg = Config::from_env();
    if (!o.transport.empty()) {
      if (const std::string why = transport_unavailable_reason(o.transport); !why.empty()) {
        std::fprintf(stderr, "comm-info: --transport '%s': %s (available: %s)\n", o.transport.c_str(), why.c_str(),
                     available_transports_list().c_str());
        return 2;
      }
      cfg.transport = o.transport;
    }
    Communicator c = Communicator::create(cfg);
    if (c.rank() == 0) {
      const std::vector<TransportRow> rows = transport_rows(&cfg, c.transport_name());
      if (o.json) {
        std::fputs(report_json(c, o, rows).c_str(), stdout);
      } else {
        std::printf("comm-info: comm %s, %d rank%s, transport %s\n\n", std::string(version()).c_str(), c.size(),
                    c.size() == 1 ? "" : "s", std::string(c.transport_name()).c_str());
        std::printf("Transports in this build\n");
        print_transport_lines(rows, "available: ");
        print_hosts(c);
        print_links(c);
        print_tables(c, o.table_max);
        for (std::size_t s : o.sizes) print_candidates(c, s);
      }
      std::fflush(stdout);
    }
    // Keep every rank (and its transport endpoint) alive until rank 0 is done.
    c.barrier();
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "comm-info: %s\n", e.what());
    return e.is_usage() ? 2 : 1;
  }
}
