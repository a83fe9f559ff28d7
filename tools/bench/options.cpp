#include "options.hpp"

#include <comm/config.hpp>
#include <comm/error.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>

namespace comm::bench {
namespace {

[[noreturn]] void bad(std::string_view flag, std::string_view value, std::string_view expected) {
  throw Error(ErrorCode::invalid_argument, std::string(flag) + " '" + std::string(value) + "' is not valid: expected " +
                                               std::string(expected) + " (see comm-bench --help)");
}

int parse_int(std::string_view flag, std::string_view v, int min) {
  int x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc{} || end != v.data() + v.size() || x < min)
    bad(flag, v, "an integer >= " + std::to_string(min));
  return x;
}

double parse_factor(std::string_view flag, std::string_view v) {
  const std::string s(v);
  char* end = nullptr;
  const double x = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(x) || x <= 1.0)
    bad(flag, v, "a number greater than 1, e.g. 2 or 4");
  return x;
}

std::size_t parse_size(std::string_view flag, std::string_view v) {
  try {
    return parse_bytes(v, flag);
  } catch (const Error&) {
    bad(flag, v, "a byte count with an optional K, M or G suffix, e.g. 8, 64K, 1M");
  }
}

bool parse_flag01(std::string_view flag, std::string_view v) {
  if (v == "1" || v == "true" || v == "on") return true;
  if (v == "0" || v == "false" || v == "off") return false;
  bad(flag, v, "0 or 1");
}

// Re-throws a library parse error (dtype, op, collective) under the flag's name.
template <class F>
auto with_flag(std::string_view flag, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    throw Error(ErrorCode::invalid_argument, std::string(flag) + ": " + e.what() + " (see comm-bench --help)");
  }
}

std::vector<BenchColl> parse_coll_list(std::string_view flag, std::string_view v) {
  std::vector<BenchColl> out;
  std::size_t start = 0;
  while (start <= v.size()) {
    const std::size_t end = std::min(v.find(',', start), v.size());
    const std::string_view name = v.substr(start, end - start);
    if (name.empty()) bad(flag, v, "collective names separated by commas, e.g. allreduce,sendrecv");
    const BenchColl c = with_flag(flag, [&] { return parse_bench_coll(name); });
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
    start = end + 1;
  }
  return out;
}

}  // namespace

Options parse_options(const std::vector<std::string_view>& args) {
  Options o;
  using Setter = std::function<void(std::string_view flag, std::string_view value)>;
  // Short flags follow nccl-tests; the long spellings are ours and theirs.
  const std::map<std::string_view, Setter> with_value = {
      {"-b", [&](auto f, auto v) { o.min_bytes = parse_size(f, v); }},
      {"--minbytes", [&](auto f, auto v) { o.min_bytes = parse_size(f, v); }},
      {"-e", [&](auto f, auto v) { o.max_bytes = parse_size(f, v); }},
      {"--maxbytes", [&](auto f, auto v) { o.max_bytes = parse_size(f, v); }},
      {"-f", [&](auto f, auto v) { o.step_factor = parse_factor(f, v); }},
      {"--stepfactor", [&](auto f, auto v) { o.step_factor = parse_factor(f, v); }},
      {"-n", [&](auto f, auto v) { o.iters = parse_int(f, v, 1); }},
      {"--iters", [&](auto f, auto v) { o.iters = parse_int(f, v, 1); }},
      {"-w", [&](auto f, auto v) { o.warmup = parse_int(f, v, 0); }},
      {"--warmup_iters", [&](auto f, auto v) { o.warmup = parse_int(f, v, 0); }},
      {"-c", [&](auto f, auto v) { o.check = parse_flag01(f, v); }},
      {"--check", [&](auto f, auto v) { o.check = parse_flag01(f, v); }},
      {"-d", [&](auto f, auto v) { o.dtype = with_flag(f, [&] { return parse_dtype(v); }); }},
      {"--datatype", [&](auto f, auto v) { o.dtype = with_flag(f, [&] { return parse_dtype(v); }); }},
      {"-o", [&](auto f, auto v) { o.op = with_flag(f, [&] { return parse_reduce_op(v); }); }},
      {"--op", [&](auto f, auto v) { o.op = with_flag(f, [&] { return parse_reduce_op(v); }); }},
      {"-r", [&](auto f, auto v) { o.root = parse_int(f, v, 0); }},
      {"--root", [&](auto f, auto v) { o.root = parse_int(f, v, 0); }},
      {"--coll", [&](auto f, auto v) { o.colls = parse_coll_list(f, v); }},
      {"--transport", [&](auto, auto v) { o.transport = std::string(v); }},
      {"--algo", [&](auto, auto v) { o.algo = std::string(v); }},
      {"--json", [&](auto, auto v) { o.json_path = std::string(v); }},
      {"--plot", [&](auto, auto v) { o.plot_path = std::string(v); }},
  };

  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view a = args[i];
    if (a == "-h" || a == "--help") {
      o.help = true;
      continue;
    }
    if (a == "--quiet" || a == "-q") {
      o.quiet = true;
      continue;
    }
    std::string_view flag = a, value;
    bool inline_value = false;
    if (a.starts_with("--")) {
      if (auto eq = a.find('='); eq != std::string_view::npos) {
        flag = a.substr(0, eq);
        value = a.substr(eq + 1);
        inline_value = true;
      }
    } else if (a.size() > 2 && a[0] == '-' && with_value.count(a.substr(0, 2))) {
      flag = a.substr(0, 2);  // getopt style: -b8
      value = a.substr(2);
      inline_value = true;
    }
    auto it = with_value.find(flag);
    if (it == with_value.end())
      throw Error(ErrorCode::invalid_argument,
                  "unknown option '" + std::string(a) + "' (see comm-bench --help for the list)");
    if (!inline_value) {
      if (i + 1 >= args.size())
        throw Error(ErrorCode::invalid_argument, std::string(flag) + " needs a value (see comm-bench --help)");
      value = args[++i];
    }
    if (value.empty()) bad(flag, value, "a non-empty value");
    it->second(flag, value);
  }

  if (o.min_bytes > o.max_bytes)
    throw Error(ErrorCode::invalid_argument, "-b " + std::to_string(o.min_bytes) + " is larger than -e " +
                                                 std::to_string(o.max_bytes) + ": the sweep would be empty");
  o.coll = o.colls.front();
  const bool p2p_only = o.colls.size() == 1 && o.coll == BenchColl::sendrecv;
  if (p2p_only && o.algo != "auto" && o.algo != "all")
    throw Error(ErrorCode::invalid_argument,
                "--coll sendrecv measures the transport's point-to-point path and has no algorithm '" + o.algo +
                    "': leave --algo at auto");
  return o;
}

std::string usage() {
  return R"(usage: commrun -n N comm-bench [options]

Measures collectives like nccl-tests: for each message size, the time of one
operation, algbw = size / time and busbw = algbw * factor (allreduce 2(n-1)/n;
reduce_scatter, allgather, alltoall (n-1)/n; broadcast, reduce, sendrecv 1).
time(us) is the median over iterations; each iteration is timed between
barriers (barrier; t0; op; t1), and every iteration's time is the maximum over
ranks, so all ranks report the same number. pred_us is the cost model's
prediction (Communicator::candidates).

sizes and iterations
  -b, --minbytes SIZE     smallest message (default 8); K/M/G suffixes
  -e, --maxbytes SIZE     largest message (default 64M); always measured
  -f, --stepfactor F      size multiplier between points (default 4)
  -n, --iters N           timed iterations per size (default 50); scaled down
                          in proportion above 4 MiB, to no fewer than 10
  -w, --warmup_iters N    untimed iterations first (default 5, scaled likewise)
  -c, --check 0|1         check every result element against a locally computed
                          reference (default 1); #wrong counts mismatches
data
  -d, --datatype T        f32 (float), f64, f16, bf16, i8, u8, i32, i64 (default float)
  -o, --op OP             sum, prod, min, max, avg (default sum)
  -r, --root R            root of broadcast and reduce (default 0)
what to run
  --coll NAME[,NAME...]   allreduce (default), reduce_scatter, allgather, broadcast,
                          reduce, alltoall, sendrecv (2-rank ping-pong: half round
                          trip time and bandwidth of the transport's send/recv);
                          several run one after the other on each transport, e.g.
                          allreduce,sendrecv puts the floor beside the collective
  --transport NAME|all    a transport (default: COMM_TRANSPORT, else local), or
                          every transport available here, one after the other
                          (unavailable ones are listed with the reason)
  --algo NAME|auto|all    an algorithm, automatic selection (default), or every
                          algorithm of the collective side by side plus auto,
                          followed by a per-size summary: fastest algorithm, the
                          automatic pick and time(pick)/time(best)
output
  --json FILE             one record per (coll, transport, algo, size)
  --plot FILE.svg         time vs size per (transport, algo), log-log
  -q, --quiet             no progress lines on stderr
  -h, --help              this text

The exit status is 1 if any element was wrong or a transport failed, 2 for bad
options. Example (every transport x every all-reduce algorithm, 2 ranks):
  commrun -n 2 comm-bench --transport all --algo all -b 8 -e 64M -f 4 --json r.json
)";
}

}  // namespace comm::bench
