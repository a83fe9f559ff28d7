#include "options.hpp"

#include <comm/config.hpp>
#include <comm/error.hpp>

#include "util/cli.hpp"
#include "util/units.hpp"

#include <algorithm>

namespace comm::bench {
namespace {

double parse_factor(std::string_view v) {
  const auto x = util::parse_real(v);
  if (!x || *x <= 1.0) throw cli::BadValue("a number greater than 1, e.g. 2 or 4");
  return *x;
}

bool parse_flag01(std::string_view v) {
  if (v == "1" || v == "true" || v == "on") return true;
  if (v == "0" || v == "false" || v == "off") return false;
  throw cli::BadValue("0 or 1");
}

std::vector<BenchColl> parse_coll_list(std::string_view v) {
  std::vector<BenchColl> out;
  std::size_t start = 0;
  while (start <= v.size()) {
    const std::size_t end = std::min(v.find(',', start), v.size());
    const std::string_view name = v.substr(start, end - start);
    if (name.empty()) throw cli::BadValue("collective names separated by commas, e.g. allreduce,sendrecv");
    const BenchColl c = parse_bench_coll(name);
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
    start = end + 1;
  }
  return out;
}

constexpr const char* kDescription = R"(Measures collectives like nccl-tests: for each message size, the time of one
operation, algbw = size / time and busbw = algbw * factor (allreduce 2(n-1)/n;
reduce_scatter, allgather, alltoall (n-1)/n; broadcast, reduce, sendrecv 1).
time(us) is the median over iterations; each iteration is timed between
barriers (barrier; t0; op; t1), and every iteration's time is the maximum over
ranks, so all ranks report the same number. pred_us is the cost model's
prediction (Communicator::candidates).)";

constexpr const char* kEpilog = R"(The exit status is 1 if any element was wrong or a transport failed, 2 for bad
options. Example (every transport x every all-reduce algorithm, 2 ranks):
  commrun -n 2 comm-bench --transport all --algo all -b 8 -e 64M -f 4 --json r.json)";

// The options of comm-bench, bound to `o` (which must outlive the parser).
cli::Parser make_parser(Options& o) {
  cli::Parser p("comm-bench", "commrun -n N comm-bench [options]");
  p.description(kDescription).epilog(kEpilog);
  // Short flags follow nccl-tests; the long spellings are ours and theirs.
  p.section("sizes and iterations");
  p.bytes("-b,--minbytes", "smallest message (default 8); K/M/G suffixes", o.min_bytes);
  p.bytes("-e,--maxbytes", "largest message (default 64M); always measured", o.max_bytes);
  p.option("-f,--stepfactor", "F", "size multiplier between points (default 4)",
           [&o](std::string_view v) { o.step_factor = parse_factor(v); });
  p.integer("-n,--iters", "N",
            "timed iterations per size (default 50); scaled down\nin proportion above 4 MiB, to no fewer than 10",
            o.iters, 1);
  p.integer("-w,--warmup_iters", "N", "untimed iterations first (default 5, scaled likewise)", o.warmup, 0);
  p.option("-c,--check", "0|1",
           "check every result element against a locally computed\nreference (default 1); #wrong counts mismatches",
           [&o](std::string_view v) { o.check = parse_flag01(v); });
  p.section("data");
  p.option("-d,--datatype", "T", "f32 (float), f64, f16, bf16, i8, u8, i32, i64 (default float)",
           [&o](std::string_view v) { o.dtype = parse_dtype(v); });
  p.option("-o,--op", "OP", "sum, prod, min, max, avg (default sum)",
           [&o](std::string_view v) { o.op = parse_reduce_op(v); });
  p.integer("-r,--root", "R", "root of broadcast and reduce (default 0)", o.root, 0);
  p.section("what to run");
  p.option("--coll", "NAME[,NAME...]",
           "allreduce (default), reduce_scatter, allgather, broadcast,\n"
           "reduce, alltoall, sendrecv (2-rank ping-pong: half round\n"
           "trip time and bandwidth of the transport's send/recv);\n"
           "several run one after the other on each transport, e.g.\n"
           "allreduce,sendrecv puts the floor beside the collective",
           [&o](std::string_view v) { o.colls = parse_coll_list(v); });
  p.text("--transport", "NAME|all",
         "a transport (default: COMM_TRANSPORT, else local), or\n"
         "every transport available here, one after the other\n"
         "(unavailable ones are listed with the reason)",
         o.transport);
  p.text("--algo", "NAME|auto|all",
         "an algorithm, automatic selection (default), or every\n"
         "algorithm of the collective side by side plus auto,\n"
         "followed by a per-size summary: fastest algorithm, the\n"
         "automatic pick and time(pick)/time(best)",
         o.algo);
  p.section("output");
  p.text("--json", "FILE", "one record per (coll, transport, algo, size)", o.json_path);
  p.text("--plot", "FILE.svg", "time vs size per (transport, algo), log-log", o.plot_path);
  p.flag("-q,--quiet", "no progress lines on stderr", o.quiet);
  return p;
}

}  // namespace

Options parse_options(const std::vector<std::string_view>& args) {
  Options o;
  try {
    o.help = !make_parser(o).parse(args);
  } catch (const cli::UsageError& e) {
    throw Error(ErrorCode::invalid_argument, std::string(e.what()) + " (see comm-bench --help)");
  }
  o.coll = o.colls.front();
  if (o.help) return o;
  if (o.min_bytes > o.max_bytes)
    throw Error(ErrorCode::invalid_argument, "-b " + std::to_string(o.min_bytes) + " is larger than -e " +
                                                 std::to_string(o.max_bytes) + ": the sweep would be empty");
  const bool p2p_only = o.colls.size() == 1 && o.coll == BenchColl::sendrecv;
  if (p2p_only && o.algo != "auto" && o.algo != "all")
    throw Error(ErrorCode::invalid_argument,
                "--coll sendrecv measures the transport's point-to-point path and has no algorithm '" + o.algo +
                    "': leave --algo at auto");
  return o;
}

std::string usage() {
  Options o;
  return make_parser(o).help();
}

}  // namespace comm::bench
