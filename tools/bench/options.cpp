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

// -t / -g: threads and GPUs per process. One rank per process here.
void check_one_per_process(std::string_view what, std::string_view v) {
  if (v != "1")
    throw cli::BadValue("1: comm-bench runs one rank per process (" + std::string(what) +
                        " per process must be 1); start more ranks with commrun -n N instead");
}

RankTime parse_rank_time(std::string_view v) {
  if (v.size() != 1 || v[0] < '0' || v[0] > '3')
    throw cli::BadValue("0 (rank 0's time), 1 (mean over ranks), 2 (min) or 3 (max, the default)");
  return static_cast<RankTime>(v[0] - '0');
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
  p.integer("-w,--warmup_iters", "N", "untimed iterations first (default 5, scaled likewise; then more until\n"
            "each algorithm's warm-up has lasted 1 ms; 0: none)", o.warmup, 0);
  p.bytes("-i,--stepbytes", "add SIZE between points instead of multiplying by -f", o.step_bytes);
  p.integer("-m,--agg_iters", "N",
            "operations per timed iteration, back to back (default\n1); the iteration's time is divided by N", o.agg, 1);
  p.integer("--rounds", "R",
            "split each point's timed iterations into R turns; with\nseveral --algo, every algorithm takes its turn in each\n"
            "round (in an order that changes every round), so a\nslow spell of a shared machine hits them alike; each\n"
            "turn starts with its own warm-up (at least 2 calls) and\nis timed back to back (default 1)",
            o.rounds, 1);
  p.option("-a,--average", "0|1|2|3",
           "each iteration's time across ranks: rank 0's (0), the\nmean (1), the fastest (2) or the slowest rank's (3,\n"
           "the default; nccl-tests defaults to 1)",
           [&o](std::string_view v) { o.rank_time = parse_rank_time(v); });
  p.integer("-c,--check", "N",
            "N extra runs per point whose every element is checked\nagainst a locally computed reference (default 1, 0:\n"
            "none); #wrong counts mismatches",
            o.check, 0);
  p.option("-t,--nthreads", "1", "accepted for nccl-tests scripts: one rank per process\n(use commrun -n N for more ranks)",
           [](std::string_view v) { check_one_per_process("threads", v); });
  p.option("-g,--ngpus", "1", "likewise: one GPU per process", [](std::string_view v) { check_one_per_process("GPUs", v); });
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
  p.text("--algo", "NAME[,NAME..]|auto|all",
         "an algorithm, automatic selection (default), or every\n"
         "algorithm of the collective (or those listed) side by side\n"
         "plus auto, followed by a per-size summary: fastest\n"
         "algorithm, the automatic pick and time(pick)/time(best)",
         o.algo);
  p.section("output");
  p.option("--inplace", "0|1",
           "also time in-place calls (output buffer = input): on by\n"
           "default with a single --algo, which prints nccl-tests'\n"
           "out-of-place and in-place column groups and footers\n"
           "(commrun --no-prefix, or read rank 0's lines); off with --algo all",
           [&o](std::string_view v) { o.inplace = parse_flag01(v) ? 1 : 0; });
  p.text("--json", "FILE",
         "one record per (coll, transport, algo, size); sent_bytes and\n"
         "cross_host_bytes: what one operation sent, in all and to\n"
         "other hosts, the largest of any rank (byte counters)",
         o.json_path);
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
  if (o.step_bytes > 0 && o.min_bytes == 0)
    throw Error(ErrorCode::invalid_argument, "-i needs -b above 0 (the sweep starts at -b and adds -i)");
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
