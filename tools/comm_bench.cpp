// comm-bench: nccl-tests style measurements of comm's collectives, one or all
// transports, one or all algorithms side by side. Run under commrun:
//   commrun -n 2 comm-bench --transport all --algo all -b 8 -e 64M -f 4
// See --help (bench/options.cpp) for the flags and the timing definition.

#include "bench/compare.hpp"
#include "bench/options.hpp"
#include "bench/plot.hpp"
#include "bench/report.hpp"
#include "bench/runner.hpp"

#include <comm/comm.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace {

using namespace comm;
using namespace comm::bench;

constexpr const char* kKnownTransports[] = {"local", "shm", "ucx", "ofi", "gloo", "mpi", "nccl"};

struct Plan {
  std::vector<std::string> run;
  std::vector<SkippedTransport> skipped;
};

Plan plan_transports(const Options& o, const Config& base) {
  Plan p;
  if (o.transport != "all") {
    const std::string name = o.transport.empty() ? base.transport : o.transport;
    // "" (none named) is resolved at creation: local for threads, else the best host transport.
    if (std::string why = name.empty() ? "" : transport_unavailable_reason(name); !why.empty())
      throw Error(ErrorCode::unknown_transport, std::string(o.transport.empty() ? "COMM_TRANSPORT" : "--transport") +
                                                    " '" + name + "': " + why + " (available: " +
                                                    available_transports_list() + ", or all)");
    p.run.push_back(name);
    return p;
  }
  std::vector<std::string> names(std::begin(kKnownTransports), std::end(kKnownTransports));
  for (const auto& n : available_transports())
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  for (const auto& n : names) {
    if (std::string why = transport_unavailable_reason(n); !why.empty())
      p.skipped.push_back({n, why});
    else if (n == "local" && base.world_size > 1)
      p.skipped.push_back({n, "joins threads of one process only; this job has " + std::to_string(base.world_size) +
                                  " processes"});
    else
      p.run.push_back(n);
  }
  return p;
}

std::string describe_link(const Communicator& c) {
  if (c.size() < 2) return {};
  const LinkInfo l = c.link(0, 1);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%s, alpha %.3g us, beta %.3g GB/s", std::string(to_string(l.kind)).c_str(),
                l.alpha_us, l.beta_gbps);
  return std::string(buf) + (l.detail.empty() ? "" : " (" + l.detail + ")");
}

bool write_file(const std::string& path, const std::string& text, const char* what) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) {
    std::fprintf(stderr, "comm-bench: cannot write the %s to '%s'\n", what, path.c_str());
    return false;
  }
  return true;
}

// Every rank's pid and host, for nccl-tests' "Using devices" lines.
std::vector<RankPlace> gather_places(Communicator& comm) {
  constexpr std::size_t kHost = 64;
  std::vector<std::uint8_t> mine(kHost + 8, 0), all(mine.size() * static_cast<std::size_t>(comm.size()));
  ::gethostname(reinterpret_cast<char*>(mine.data()), kHost - 1);
  const std::int64_t pid = ::getpid();
  std::memcpy(mine.data() + kHost, &pid, 8);
  comm.allgather(view(mine), view(all));
  std::vector<RankPlace> out;
  for (int r = 0; r < comm.size(); ++r) {
    const std::uint8_t* p = all.data() + static_cast<std::size_t>(r) * mine.size();
    std::int64_t rp = 0;
    std::memcpy(&rp, p + kHost, 8);
    out.push_back({r, static_cast<long>(rp), std::string(reinterpret_cast<const char*>(p))});
  }
  return out;
}

// Runs every --coll on one transport; false if the transport failed at run
// time (the job may then be out of step: stop, but keep what was measured).
bool run_transport(Communicator& comm, const Options& o, RunInfo& info, std::vector<Result>& results,
                   std::chrono::steady_clock::time_point start) {
  const bool lead = comm.rank() == 0;
  // As chosen at creation when none was named (the results carry the same name).
  const std::string name(comm.transport_name());
  const std::vector<RankPlace> places = o.nccl_format() ? gather_places(comm) : std::vector<RankPlace>{};
  for (BenchColl coll : o.colls) {
    Options oc = o;
    oc.coll = coll;
    Runner runner(comm, oc);
    if (lead && o.nccl_format()) print_nccl_header(stdout, oc, name, describe_link(comm), places);
    else if (lead) print_header(stdout, oc, name, comm.size(), describe_link(comm));
    std::vector<Result> these;
    Callbacks cb;
    cb.on_result = [&](const Result& r) {
      results.push_back(r);
      these.push_back(r);
      if (lead && o.nccl_format()) print_nccl_row(stdout, r);
      else if (lead) print_row(stdout, r);
    };
    cb.on_skip = [&](const Skip& s) {
      info.skipped_points.push_back(s);
      if (lead) print_skip(stdout, s);
    };
    cb.on_size = [&](std::size_t done, std::size_t total, std::size_t bytes) {
      if (!lead || o.quiet) return;
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::fprintf(stderr, "comm-bench: %s %s %s (%zu/%zu) at %.1f s\n", name.c_str(),
                   std::string(to_string(coll)).c_str(), format_bytes(bytes).c_str(), done + 1, total, s);
    };
    try {
      runner.run(cb);
    } catch (const Error& e) {
      if (e.is_usage()) throw;
      std::fprintf(stderr, "comm-bench: rank %d: transport %s failed: %s\n", comm.rank(), name.c_str(), e.what());
      // On stdout too, where the results are: the table stops here for a reason.
      std::printf("# FAILED: rank %d: transport %s failed during %s: %s\n", comm.rank(), name.c_str(),
                  std::string(to_string(coll)).c_str(), e.what());
      return false;
    }
    if (lead && o.nccl_format()) {
      std::int64_t wrong = 0;
      for (const auto& r : these) wrong += std::max<std::int64_t>(r.wrong, 0) + std::max<std::int64_t>(r.inplace.wrong, 0);
      print_nccl_footer(stdout, wrong, these);
    }
    if (lead && o.side_by_side() && coll != BenchColl::sendrecv)
      print_summary(stdout, name, summarize(results, name, coll));
  }
  return true;
}

int run(const Options& o, const std::string& command) {
  const Config base = Config::from_env();
  const bool lead = base.rank == 0;
  std::shared_ptr<Store> store =
      base.world_size == 1 && base.store.empty() ? make_memory_store() : make_store(base);
  const Plan plan = plan_transports(o, base);

  RunInfo info;
  info.command = command;
  info.ranks = base.world_size;
  info.skipped_transports = plan.skipped;
  std::vector<Result> results;
  int status = 0;
  std::string failed_transport;  // the transport that failed at run time, if one did
  const auto start = std::chrono::steady_clock::now();
  auto report_skip = [&](const SkippedTransport& s) {
    if (lead) std::printf("# transport %s skipped: %s\n", s.name.c_str(), s.reason.c_str());
  };
  for (const auto& s : plan.skipped) report_skip(s);

  for (const auto& name : plan.run) {
    Config cfg = base;
    cfg.transport = name;
    Communicator comm;
    try {
      comm = Communicator::create(cfg, store);
    } catch (const Error& e) {
      if (o.transport != "all") throw;
      // Creation fails alike on every rank for a machine-level reason (no GPU,
      // no device), so every rank skips this transport.
      info.skipped_transports.push_back({name, e.what()});
      report_skip(info.skipped_transports.back());
      continue;
    }
    if (!run_transport(comm, o, info, results, start)) {
      status = 1;
      failed_transport = comm.transport_name();
      break;
    }
  }

  if (lead && o.side_by_side())
    for (BenchColl coll : o.colls) print_comparison(stdout, coll, base.world_size, compare(results, coll));

  // Wrong counts are summed over ranks, so every rank exits non-zero alike.
  std::int64_t wrong = 0;
  for (const auto& r : results) wrong += std::max<std::int64_t>(r.wrong, 0) + std::max<std::int64_t>(r.inplace.wrong, 0);
  if (wrong > 0) status = 1;
  if (lead) {
    if (!o.json_path.empty() && !write_file(o.json_path, results_json(info, results), "JSON results")) status = 1;
    if (!o.plot_path.empty()) {
      std::string colls;
      for (BenchColl c : o.colls) colls += (colls.empty() ? "" : " + ") + std::string(to_string(c));
      const std::string title = "comm-bench " + colls + ", " +
                                std::string(to_string(o.dtype)) + ", " + std::to_string(base.world_size) +
                                " ranks";
      if (!write_file(o.plot_path, render_svg(results, title), "plot")) status = 1;
    }
  }
  // nccl-tests' layout has its own footer; an incomplete run is said in either.
  if (o.check && (lead || !failed_transport.empty()) && (!o.nccl_format() || !failed_transport.empty())) {
    if (!failed_transport.empty())  // what was not measured was not checked either
      std::printf("# wrong elements: %lld so far; FAILED: transport %s failed, the run is incomplete\n",
                  static_cast<long long>(wrong), failed_transport.c_str());
    else
      std::printf("# wrong elements: %lld %s\n", static_cast<long long>(wrong), wrong ? "FAILED" : "OK");
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  std::string command = "comm-bench";
  for (auto a : args) command += " " + std::string(a);
  Options o;
  try {
    o = parse_options(args);
  } catch (const comm::Error& e) {
    std::fprintf(stderr, "comm-bench: %s\n", e.what());
    return 2;
  }
  if (o.help) {
    std::fputs(usage().c_str(), stdout);
    return 0;
  }
  try {
    return run(o, command);
  } catch (const comm::Error& e) {
    std::fprintf(stderr, "comm-bench: %s\n", e.what());
    return e.is_usage() ? 2 : 1;
  }
}
