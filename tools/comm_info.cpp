// comm-info: what a communicator sees and why it chooses what it chooses.
// Prints (rank 0) the transports and why others are missing, the link matrix,
// the selection table of every collective, and for given message sizes every
// candidate algorithm with its predicted cost and the reason it won or lost.
//   commrun -n 2 comm-info --transport ucx --size 8 --size 64M

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

constexpr const char* kKnownTransports[] = {"local", "ucx", "ofi", "gloo", "nccl"};
constexpr Collective kShown[] = {Collective::allreduce, Collective::reduce_scatter, Collective::allgather,
                                 Collective::broadcast, Collective::reduce,         Collective::all_to_all,
                                 Collective::all_to_allv, Collective::barrier};

struct InfoOptions {
  std::string transport;
  std::vector<std::size_t> sizes;
  std::size_t table_max = std::size_t{1} << 30;
  bool help = false;
};

const char* kUsage =
    "usage: commrun -n N comm-info [--transport NAME] [--size BYTES]... [--max BYTES]\n"
    "\n"
    "Creates a communicator (Config from the environment; --transport overrides\n"
    "COMM_TRANSPORT) and prints, on rank 0: the transports of this build and why\n"
    "any is unavailable; the link between every pair of ranks (kind, latency alpha,\n"
    "bandwidth beta, detail); the selection table of each collective from 1 B to\n"
    "--max (default 1G); and for each --size (repeatable, K/M/G suffixes; default\n"
    "8 and 64M) every candidate algorithm with its predicted time and why it won\n"
    "or lost. COMM_CALIBRATE=1 / COMM_TUNING_FILE apply as for any communicator.\n";

InfoOptions parse(int argc, char** argv) {
  InfoOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto next = [&]() -> std::string_view {
      if (i + 1 >= argc) throw Error(ErrorCode::invalid_argument, std::string(a) + " needs a value (see --help)");
      return argv[++i];
    };
    if (a == "-h" || a == "--help") o.help = true;
    else if (a == "--transport") o.transport = std::string(next());
    else if (a == "--size") o.sizes.push_back(parse_bytes(next(), "--size"));
    else if (a == "--max") o.table_max = parse_bytes(next(), "--max");
    else throw Error(ErrorCode::invalid_argument, "unknown option '" + std::string(a) + "' (see comm-info --help)");
  }
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

void print_transports(const Config& base, std::string_view in_use) {
  std::printf("Transports in this build\n");
  std::vector<std::string> names(std::begin(kKnownTransports), std::end(kKnownTransports));
  for (const auto& n : available_transports())
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  for (const auto& n : names) {
    std::string line = "available";
    if (const std::string why = transport_unavailable_reason(n); !why.empty())
      line = "unavailable: " + why;
    else if (n != in_use)
      if (const std::string why = probe(n, base); !why.empty())
        line = "unavailable: it loads, but a communicator cannot be made here: " + why;
    std::printf("  %-8s %s\n", n.c_str(), line.c_str());
  }
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
    std::printf(")\n");
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
      std::printf("    %-20s %s us  %-7s %s\n", cand.algorithm.c_str(), pred, cand.chosen ? "chosen" : "",
                  cand.note.c_str());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  InfoOptions o;
  try {
    o = parse(argc, argv);
  } catch (const Error& e) {
    std::fprintf(stderr, "comm-info: %s\n", e.what());
    return 2;
  }
  if (o.help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  try {
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
      std::printf("comm-info: %d rank%s, transport %s\n\n", c.size(), c.size() == 1 ? "" : "s",
                  std::string(c.transport_name()).c_str());
      print_transports(cfg, c.transport_name());
      print_hosts(c);
      print_links(c);
      print_tables(c, o.table_max);
      for (std::size_t s : o.sizes) print_candidates(c, s);
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
