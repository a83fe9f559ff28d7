// comm-bench internals (statistics, busbw factors, layouts, option parsing,
// JSON output, reference data), the tuning file, and start-up calibration.

#include "select_fixtures.hpp"
#include "tools/bench/compare.hpp"
#include "tools/bench/data.hpp"
#include "tools/bench/options.hpp"
#include "tools/bench/plot.hpp"
#include "tools/bench/report.hpp"
#include "tools/bench/runner.hpp"
#include "tools/bench/stats.hpp"

#include "select/calibration.hpp"
#include "select/calibration_measure.hpp"
#include "select/tuning_file.hpp"
#include "local_group.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include <sys/mman.h>
#include <unistd.h>

using namespace comm;
using namespace comm::bench;

namespace {

Options parse(std::initializer_list<std::string_view> args) { return parse_options(std::vector<std::string_view>(args)); }

// The message of the invalid_argument error parse() throws for `args`.
std::string parse_error(std::initializer_list<std::string_view> args) {
  try {
    parse(args);
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
    return e.what();
  }
  FAIL("expected an error");
  return {};
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("comm_test_bench_" + name)).string();
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

LinkMatrix two_rank_matrix(LinkKind kind, double alpha, double beta) {
  LinkMatrix m;
  m.n = 2;
  m.links = {{LinkKind::self, 0.05, 10, "self"}, {kind, alpha, beta, "a"}, {kind, alpha, beta, "b"},
             {LinkKind::self, 0.05, 10, "self"}};
  return m;
}

}  // namespace

TEST_CASE("median and percentiles") {
  CHECK(median({3.0, 1.0, 2.0}) == 2.0);
  CHECK(median({4.0, 1.0, 3.0, 2.0}) == 2.5);
  CHECK(median({7.0}) == 7.0);
  CHECK(std::isnan(median({})));
  const std::vector<double> v{10, 20, 30, 40, 50};
  CHECK(percentile(v, 0) == 10);
  CHECK(percentile(v, 100) == 50);
  CHECK(percentile(v, 25) == 20);
  CHECK(percentile(v, 10) == doctest::Approx(14.0));  // 0.4 of the way from 10 to 20
  CHECK(gbps(1000, 1.0) == doctest::Approx(1.0));      // 1000 B in 1 us = 1 GB/s
  CHECK(gbps(1000, 0.0) == 0.0);
}

TEST_CASE("busbw factors follow nccl-tests") {
  for (int n : {1, 2, 3, 4, 8, 16}) {
    const double ring = (n - 1.0) / n;
    CHECK(busbw_factor(BenchColl::allreduce, n) == doctest::Approx(2 * ring));
    CHECK(busbw_factor(BenchColl::reduce_scatter, n) == doctest::Approx(ring));
    CHECK(busbw_factor(BenchColl::allgather, n) == doctest::Approx(ring));
    CHECK(busbw_factor(BenchColl::alltoall, n) == doctest::Approx(ring));
    CHECK(busbw_factor(BenchColl::broadcast, n) == 1.0);
    CHECK(busbw_factor(BenchColl::reduce, n) == 1.0);
    CHECK(busbw_factor(BenchColl::sendrecv, n) == 1.0);
  }
}

TEST_CASE("collective names and layouts") {
  for (BenchColl c : kAllBenchColls) CHECK(parse_bench_coll(to_string(c)) == c);
  CHECK(parse_bench_coll("all_to_all") == BenchColl::alltoall);
  CHECK(parse_bench_coll("reduce-scatter") == BenchColl::reduce_scatter);
  CHECK_THROWS_AS(parse_bench_coll("gather"), Error);

  // 100 B of f32 on 3 ranks: 25 elements, 8 per rank block.
  const Layout rs = make_layout(BenchColl::reduce_scatter, 100, 4, 3);
  CHECK(rs.block == 8);
  CHECK(rs.count == 24);
  CHECK(rs.bytes == 96);
  CHECK(rs.in_count == 24);
  CHECK(rs.out_count == 8);
  const Layout ag = make_layout(BenchColl::allgather, 100, 4, 3);
  CHECK(ag.in_count == 8);
  CHECK(ag.out_count == 24);
  const Layout a2a = make_layout(BenchColl::alltoall, 100, 4, 3);
  CHECK(a2a.in_count == 24);
  CHECK(a2a.out_count == 24);
  const Layout ar = make_layout(BenchColl::allreduce, 10, 4, 3);  // rounds down to whole elements
  CHECK(ar.count == 2);
  CHECK(ar.bytes == 8);
  CHECK(make_layout(BenchColl::allgather, 8, 4, 3).count == 0);  // 2 elements cannot split over 3 ranks
}

TEST_CASE("size sweep and iteration scaling") {
  CHECK(size_sweep(8, 65536, 4) == std::vector<std::size_t>{8, 32, 128, 512, 2048, 8192, 32768, 65536});
  CHECK(size_sweep(8, 8, 2) == std::vector<std::size_t>{8});
  CHECK(size_sweep(1, 8, 2) == std::vector<std::size_t>{1, 2, 4, 8});
  CHECK(size_sweep(0, 4, 2) == std::vector<std::size_t>{0, 1, 2, 4});
  CHECK(size_sweep(3, 10, 1.5) == std::vector<std::size_t>{3, 4, 6, 10});  // 3, 4.5, 6.75 then the end point
  CHECK(scaled_iters(50, 4 << 20) == 50);
  CHECK(scaled_iters(50, 8 << 20) == 25);
  CHECK(scaled_iters(50, 64 << 20) == 10);
  CHECK(scaled_iters(3, 64 << 20) == 3);
  CHECK(scaled_warmup(5, 8) == 5);
  CHECK(scaled_warmup(5, 8 << 20) == 2);
  CHECK(scaled_warmup(5, 64 << 20) == 1);
  CHECK(scaled_warmup(0, 64 << 20) == 0);
}

TEST_CASE("every warm-up is topped up to a millisecond at the pace of its calls") {
  CHECK(warmup_top_up(2, 100.0) == 19);       // 50 us a call: 900 us more is 18 calls, and one over
  CHECK(warmup_top_up(5, 999.0) == 1);        // just short: one more call
  CHECK(warmup_top_up(2, 1000.0) == 0);       // a millisecond already
  CHECK(warmup_top_up(1, 2500.0) == 0);       // one call longer than that
  CHECK(warmup_top_up(2, 0.2) == kMaxWarmupCalls);  // 0.1 us calls: capped
  CHECK(warmup_top_up(0, 0.0) == 0);          // -w 0: none
  CHECK(warmup_top_up(3, 0.0) == 0);          // no time measured: no pace to go by
}

TEST_CASE("option parsing") {
  const Options d = parse({});
  CHECK(d.min_bytes == 8);
  CHECK(d.max_bytes == std::size_t{64} << 20);
  CHECK(d.check == 1);
  CHECK(d.agg == 1);
  CHECK(d.rank_time == RankTime::max);
  CHECK(d.step_bytes == 0);
  CHECK(d.measure_inplace());  // a single algorithm: nccl-tests' layout with both column groups
  CHECK(d.algo == "auto");
  CHECK(d.coll == BenchColl::allreduce);

  const Options o = parse({"-b", "1K", "-e", "1M", "-f", "2", "-n", "7", "-w", "0", "-c", "0", "-d", "bf16", "-o",
                           "max", "-r", "1", "--coll", "alltoall", "--algo", "pairwise", "--transport", "all",
                           "--json", "r.json", "--plot", "p.svg", "-q"});
  CHECK(o.min_bytes == 1024);
  CHECK(o.max_bytes == 1 << 20);
  CHECK(o.step_factor == 2.0);
  CHECK(o.iters == 7);
  CHECK(o.warmup == 0);
  CHECK(o.check == 0);
  CHECK(o.dtype == DataType::bf16);
  CHECK(o.op == ReduceOp::max);
  CHECK(o.root == 1);
  CHECK(o.coll == BenchColl::alltoall);
  CHECK(o.colls == std::vector<BenchColl>{BenchColl::alltoall});
  CHECK(o.algo == "pairwise");
  CHECK(o.transport == "all");
  CHECK(o.json_path == "r.json");
  CHECK(o.plot_path == "p.svg");
  CHECK(o.quiet);

  const Options n = parse({"-t", "1", "-g", "1", "-c", "3", "-m", "4", "-a", "1", "-i", "1K", "--algo", "all",
                           "--rounds", "4"});
  CHECK(n.rounds == 4);
  CHECK(d.rounds == 1);
  CHECK(n.check == 3);
  CHECK(n.agg == 4);
  CHECK(n.rank_time == RankTime::mean);
  CHECK(n.step_bytes == 1024);
  CHECK_FALSE(n.measure_inplace());  // --algo all keeps the side-by-side table
  CHECK(parse({"--algo", "all", "--inplace", "1"}).measure_inplace());

  const Options g = parse({"-b8", "-e64K", "--iters=5", "-d", "float", "--help"});  // getopt and --x=y forms
  CHECK(g.min_bytes == 8);
  CHECK(g.max_bytes == 65536);
  CHECK(g.iters == 5);
  CHECK(g.dtype == DataType::f32);
  CHECK(g.help);

  CHECK(parse_error({"--frobnicate"}).find("unknown option '--frobnicate'") != std::string::npos);
  CHECK(parse_error({"-f", "1"}).find("-f '1'") != std::string::npos);
  CHECK(parse_error({"-b", "12X"}).find("-b '12X'") != std::string::npos);
  CHECK(parse_error({"-n", "0"}).find("an integer >= 1") != std::string::npos);
  CHECK(parse_error({"-c", "-1"}).find("an integer >= 0") != std::string::npos);
  CHECK(parse_error({"--rounds", "0"}).find("--rounds") != std::string::npos);
  CHECK(parse_error({"--inplace", "2"}).find("0 or 1") != std::string::npos);
  CHECK(parse_error({"-g", "8"}).find("one rank per process (GPUs per process must be 1)") != std::string::npos);
  CHECK(parse_error({"-t", "2"}).find("threads per process must be 1") != std::string::npos);
  CHECK(parse_error({"-a", "4"}).find("-a '4'") != std::string::npos);
  CHECK(parse_error({"-e"}).find("-e needs a value") != std::string::npos);
  CHECK(parse_error({"-d", "float17"}).find("-d:") != std::string::npos);
  CHECK(parse_error({"-o", "xor"}).find("-o:") != std::string::npos);
  CHECK(parse_error({"--coll", "gather"}).find("unknown collective 'gather'") != std::string::npos);
  CHECK(parse_error({"-b", "1M", "-e", "1K"}).find("larger than -e") != std::string::npos);
  CHECK(parse_error({"--coll", "sendrecv", "--algo", "ring"}).find("sendrecv") != std::string::npos);
  CHECK(parse_error({"--coll", "allreduce,,sendrecv"}).find("separated by commas") != std::string::npos);
  CHECK(parse_error({"--coll", "allreduce,gather"}).find("unknown collective 'gather'") != std::string::npos);
  const Options list = parse({"--coll", "allreduce,sendrecv,allreduce", "--algo", "all"});
  CHECK(list.colls == std::vector<BenchColl>{BenchColl::allreduce, BenchColl::sendrecv});
  CHECK(list.coll == BenchColl::allreduce);
  CHECK(usage().find("median over iterations") != std::string::npos);
}

TEST_CASE("results JSON has one record per point with the documented fields") {
  Result r;
  r.coll = BenchColl::allreduce;
  r.transport = "ucx";
  r.algo = "auto";
  r.ran = "ring";
  r.auto_pick = "ring";
  r.ranks = 2;
  r.layout = make_layout(BenchColl::allreduce, 4096, 4, 2);
  r.iters = 50;
  r.time_us = 12.5;
  r.algbw_gbps = gbps(4096, 12.5);
  r.busbw_gbps = r.algbw_gbps * busbw_factor(BenchColl::allreduce, 2);
  r.wrong = 0;
  r.pred_us = 11.0;
  r.sent_bytes = 6144;
  r.cross_host_bytes = 2048;
  Result p2p = r;
  p2p.coll = BenchColl::sendrecv;
  p2p.algo = p2p.ran = "p2p";
  p2p.auto_pick.clear();
  p2p.pred_us = -1;
  RunInfo info;
  info.command = "comm-bench --algo all";
  info.ranks = 2;
  info.skipped_transports = {{"nccl", "no GPU"}};
  const json::Value v = json::parse(results_json(info, {r, p2p}));
  const auto& recs = v.find("records")->array;
  REQUIRE(recs.size() == 2);
  for (const char* key : {"coll", "transport", "algo", "ranks", "bytes", "count", "dtype", "time_us", "algbw_gbps",
                          "busbw_gbps", "wrong", "pred_us", "auto_pick", "sent_bytes", "cross_host_bytes"}) {
    CAPTURE(key);
    CHECK(recs[0].find(key) != nullptr);
  }
  CHECK(recs[0].find("coll")->string == "allreduce");
  CHECK(recs[0].find("bytes")->number == 4096);
  CHECK(recs[0].find("count")->number == 1024);
  CHECK(recs[0].find("time_us")->number == 12.5);
  CHECK(recs[0].find("busbw_gbps")->number == doctest::Approx(4096 / 12.5e3));
  CHECK(recs[0].find("auto_pick")->string == "ring");
  CHECK(recs[0].find("sent_bytes")->number == 6144);
  CHECK(recs[0].find("cross_host_bytes")->number == 2048);
  CHECK(recs[1].find("auto_pick")->kind == json::Value::Kind::null);
  CHECK(recs[1].find("pred_us")->kind == json::Value::Kind::null);
  CHECK(v.find("skipped_transports")->array[0].find("reason")->string == "no GPU");
}

TEST_CASE("summary picks the fastest algorithm and the auto ratio") {
  auto res = [](std::string algo, std::size_t bytes, double us) {
    Result r;
    r.transport = "ucx";
    r.algo = algo;
    r.auto_pick = "ring";
    r.layout.bytes = bytes;
    r.time_us = us;
    return r;
  };
  const auto rows = summarize({res("ring", 8, 2.0), res("direct", 8, 1.0), res("auto", 8, 2.1), res("ring", 64, 5.0),
                               res("direct", 64, 6.0)},
                              "ucx", BenchColl::allreduce);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].best == "direct");
  CHECK(rows[0].ratio() == doctest::Approx(2.0));
  CHECK(rows[0].auto_us == 2.1);
  CHECK(rows[1].best == "ring");
  CHECK(rows[1].ratio() == doctest::Approx(1.0));
  CHECK(rows[1].auto_us < 0);
}

TEST_CASE("comparison: comm's best and auto across transports against each library's native") {
  auto res = [](std::string transport, std::string algo, std::size_t bytes, double us, std::string ran = "") {
    Result r;
    r.transport = std::move(transport);
    r.algo = std::move(algo);
    r.ran = ran.empty() ? r.algo : ran;
    r.layout.bytes = bytes;
    r.time_us = us;
    return r;
  };
  std::vector<Result> all = {
      res("ucx", "ring", 8, 3.0), res("ucx", "auto", 8, 3.1, "ring"), res("mpi", "direct", 8, 2.0),
      res("mpi", "native", 8, 0.5), res("mpi", "auto", 8, 2.2, "direct"), res("gloo", "native", 8, 100.0),
      res("gloo", "native_bcube", 8, 0.1),  // the library's own, never "comm best"
      res("ucx", "ring", 64, 4.0), res("ucx", "auto", 64, 4.0, "ring"), res("mpi", "native", 64, 8.0)};
  Result other = res("mpi", "native", 8, 0.01);
  other.coll = BenchColl::broadcast;  // another collective: ignored
  all.push_back(other);
  const Comparison c = compare(all, BenchColl::allreduce);
  REQUIRE(c.native_transports == std::vector<std::string>{"mpi", "gloo"});
  REQUIRE(c.rows.size() == 2);
  CHECK(c.rows[0].bytes == 8);
  CHECK(c.rows[0].best.transport == "mpi");
  CHECK(c.rows[0].best.algo == "direct");
  CHECK(c.rows[0].automatic.transport == "mpi");
  CHECK(c.rows[0].automatic.algo == "direct");
  CHECK(c.rows[0].automatic.us == 2.2);
  CHECK(c.rows[0].natives[0].us == 0.5);
  CHECK(c.rows[0].natives[1].us == 100.0);
  CHECK(c.rows[1].automatic.us == 4.0);
  CHECK(c.rows[1].natives[0].us == 8.0);
  CHECK(c.rows[1].natives[1].us < 0);  // gloo native not measured at 64 B

  char text[4096] = {};
  std::FILE* f = fmemopen(text, sizeof text - 1, "w");
  print_comparison(f, BenchColl::allreduce, 2, c);
  std::fclose(f);
  const std::string out = text;
  CHECK(out.find("native on mpi, gloo") != std::string::npos);
  CHECK(out.find("mpi/direct") != std::string::npos);
  CHECK(out.find("4.400") != std::string::npos);  // auto/mpi at 8 B: 2.2 / 0.5
  CHECK(out.find("0.500") != std::string::npos);  // auto/mpi at 64 B: 4.0 / 8.0
}

TEST_CASE("half and bfloat16 conversions") {
  CHECK(to_f16(1.0f) == 0x3c00);
  CHECK(to_f16(-2.0f) == 0xc000);
  CHECK(to_f16(65504.0f) == 0x7bff);
  CHECK(to_f16(70000.0f) == 0x7c00);               // overflow: infinity
  CHECK(to_f16(std::ldexp(1.0f, -24)) == 0x0001);  // smallest subnormal
  CHECK(to_f16(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);  // tie rounds to even
  CHECK(from_f16(0x3555) == doctest::Approx(0.333251953125));
  CHECK(from_f16(0x0001) == std::ldexp(1.0f, -24));
  for (float f : {0.0f, 1.0f, 3.0f, 97.0f, 1024.0f, -5.5f}) CHECK(from_f16(to_f16(f)) == f);
  CHECK(to_bf16(1.0f) == 0x3f80);
  CHECK(from_bf16(0x4040) == 3.0f);
  for (float f : {0.0f, 1.0f, 96.0f, 255.0f, -7.0f}) CHECK(from_bf16(to_bf16(f)) == f);
}

TEST_CASE("reference results") {
  // Sum over 3 ranks of the documented input values, computed here by hand.
  for (std::size_t i = 0; i < 20; ++i) {
    const double expect = (1 + (0 + i) % 5) + (1 + (3 + i) % 5) + (1 + (6 + i) % 5);
    CHECK(expected_reduction(BenchColl::allreduce, DataType::f32, ReduceOp::sum, 3, i) == expect);
  }
  // i8 wraps: 100 ranks x values 1..5 overflow 127 the same way the type does.
  double sum = 0;
  for (int r = 0; r < 100; ++r) sum += input_value(BenchColl::allreduce, ReduceOp::sum, r, 7);
  CHECK(expected_reduction(BenchColl::allreduce, DataType::i8, ReduceOp::sum, 100, 7) ==
        static_cast<std::int8_t>(static_cast<int>(sum)));

  std::vector<float> out(16);
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<float>(expected_reduction(BenchColl::allreduce, DataType::f32, ReduceOp::max, 2, i));
  CheckArgs a;
  a.op = ReduceOp::max;
  a.nranks = 2;
  a.block = out.size();
  CHECK(count_wrong(out.data(), a) == 0);
  out[3] += 1;
  out[9] = std::nanf("");
  CHECK(count_wrong(out.data(), a) == 2);
  fill_poison(out.data(), DataType::f32, out.size());
  CHECK(count_wrong(out.data(), a) == out.size());
}

TEST_CASE("runner measures and checks every collective over the local transport") {
  for (int n : {2, 3}) {
    for (BenchColl c : kAllBenchColls) {
      if (c == BenchColl::sendrecv && n != 2) continue;
      CAPTURE(n);
      CAPTURE(to_string(c));
      std::vector<Result> results[3];
      test::run_local(n, [&](Communicator& comm) {
        Options o;
        o.coll = c;
        o.min_bytes = 4;
        o.max_bytes = 4096;
        o.step_factor = 8;
        o.iters = 3;
        o.warmup = 1;
        o.dtype = c == BenchColl::allgather ? DataType::f16 : DataType::i32;
        o.root = n - 1;
        o.algo = c == BenchColl::sendrecv ? "auto" : "all";
        Runner runner(comm, o);
        Callbacks cb;
        cb.on_result = [&](const Result& r) { results[comm.rank()].push_back(r); };
        runner.run(cb);
      });
      REQUIRE_FALSE(results[0].empty());
      for (const auto& r : results[0]) {
        CAPTURE(r.algo);
        CAPTURE(r.layout.bytes);
        CHECK(r.wrong == 0);
        CHECK(r.time_us >= 0);
        CHECK(r.iters == 3);
        CHECK(r.ranks == n);
      }
      // Every rank reports the same (max over ranks) time.
      for (int k = 1; k < n; ++k) {
        REQUIRE(results[k].size() == results[0].size());
        for (std::size_t i = 0; i < results[0].size(); ++i) CHECK(results[k][i].time_us == results[0][i].time_us);
      }
    }
  }
}

TEST_CASE("runner in rounds: every algorithm's iterations over its turns, checked, the same points as one round") {
  for (int n : {2, 3}) {
    CAPTURE(n);
    std::vector<Result> by_rounds[2][3];  // [rounds == 3][rank]
    std::vector<Skip> skips[2];
    for (int r : {1, 3}) {
      test::run_local(n, [&](Communicator& comm) {
        Options o;
        o.min_bytes = 4;
        o.max_bytes = 4096;
        o.step_factor = 16;
        o.iters = 7;  // not a multiple of the rounds: turns of 3, 2 and 2
        o.warmup = 1;
        o.dtype = DataType::i32;
        o.algo = "all";
        o.rounds = r;
        Runner runner(comm, o);
        Callbacks cb;
        cb.on_result = [&](const Result& x) { by_rounds[r == 3][comm.rank()].push_back(x); };
        cb.on_skip = [&](const Skip& x) {
          if (comm.rank() == 0) skips[r == 3].push_back(x);
        };
        runner.run(cb);
      });
    }
    const auto& one = by_rounds[0][0];
    const auto& three = by_rounds[1][0];
    REQUIRE(three.size() == one.size());
    CHECK(skips[1].size() == skips[0].size());
    for (std::size_t i = 0; i < three.size(); ++i) {
      CAPTURE(three[i].algo);
      CAPTURE(three[i].layout.bytes);
      CHECK(three[i].algo == one[i].algo);
      CHECK(three[i].layout.bytes == one[i].layout.bytes);
      CHECK(three[i].iters == 7);
      CHECK(three[i].wrong == 0);
      CHECK(three[i].time_us > 0);
      for (int k = 1; k < n; ++k) CHECK(by_rounds[1][k][i].time_us == three[i].time_us);
    }
  }
}

TEST_CASE("tuning file round trip") {
  const std::string path = temp_path("roundtrip.json");
  ComputeParams saved;
  saved.reduce_gbps = 6.25;
  saved.copy_gbps = 11.5;
  saved.step_overhead_us = 0.125;
  save_tuning(path, two_rank_matrix(LinkKind::tcp, 12.5, 2.75), saved);

  LinkMatrix m = two_rank_matrix(LinkKind::tcp, 99, 99);
  ComputeParams c;
  REQUIRE(load_tuning(path, m, c));
  CHECK(m.at(0, 1).alpha_us == 12.5);
  CHECK(m.at(1, 0).beta_gbps == 2.75);
  CHECK(m.at(0, 1).detail == "a, from tuning file");
  CHECK(m.at(0, 0).alpha_us == 0.05);  // self links are not in the file and stay as they were
  CHECK(m.at(0, 0).detail == "self");
  CHECK(c.reduce_gbps == 6.25);
  CHECK(c.copy_gbps == 11.5);
  CHECK(c.step_overhead_us == 0.125);
  CHECK(m.at(0, 1).rndv_threshold_bytes == std::numeric_limits<std::size_t>::max());  // none saved, none loaded

  // Version 2 fields: rendezvous step, large-data rates, per-operation overhead.
  LinkMatrix v2 = two_rank_matrix(LinkKind::tcp, 6, 5.5);
  for (auto& l : v2.links) {
    l.rndv_threshold_bytes = 16384;
    l.rndv_extra_us = 8.5;
    l.beta_large_gbps = 4.25;
    l.receiver_copies = true;
  }
  saved.op_overhead_us = 0.375;
  saved.cache_bytes = std::size_t{4} << 20;
  saved.reduce_large_gbps = 3.5;
  saved.copy_large_gbps = 5.25;
  save_tuning(path, v2, saved);
  LinkMatrix back = two_rank_matrix(LinkKind::tcp, 99, 99);
  ComputeParams cb;
  REQUIRE(load_tuning(path, back, cb));
  CHECK(back.at(0, 1).rndv_threshold_bytes == 16384);
  CHECK(back.at(1, 0).rndv_extra_us == 8.5);
  CHECK(back.at(0, 1).beta_large_gbps == 4.25);
  CHECK(back.at(0, 1).receiver_copies);
  CHECK_FALSE(back.at(0, 0).receiver_copies);
  CHECK(back.at(0, 0).rndv_threshold_bytes == std::numeric_limits<std::size_t>::max());  // self untouched
  CHECK(cb.op_overhead_us == 0.375);
  CHECK(cb.cache_bytes == (std::size_t{4} << 20));
  CHECK(cb.reduce_large_gbps == 3.5);
  CHECK(cb.copy_large_gbps == 5.25);
  CHECK(back.at(0, 1).transfer_curve.empty());  // none saved, none loaded

  // Version 5: the measured transfer curve.
  const std::vector<std::pair<std::size_t, double>> curve{{8, 0.0}, {65536, 11.5}, {524288, 85.25}, {1048576, 190.5}};
  for (auto& l : v2.links)
    if (l.kind != LinkKind::self) l.transfer_curve = curve;
  save_tuning(path, v2, saved);
  REQUIRE(load_tuning(path, back, cb));
  CHECK(back.at(0, 1).transfer_curve == curve);
  CHECK(back.at(1, 0).transfer_curve == curve);
  CHECK(back.at(0, 0).transfer_curve.empty());  // self untouched

  LinkMatrix other = two_rank_matrix(LinkKind::shm, 1, 5);  // a kind the file does not list: untouched
  REQUIRE(load_tuning(path, other, c));
  CHECK(other.at(0, 1).alpha_us == 1);
  std::remove(path.c_str());
  CHECK_FALSE(load_tuning(path, m, c));  // a missing file is not an error
}

TEST_CASE("malformed tuning files are errors naming the file and the problem") {
  const std::string path = temp_path("bad.json");
  const std::pair<const char*, const char*> cases[] = {
      {"{\"comm_tuning_version\": 1, \"links\": {\"shm\": {\"alpha_us\": 1,}}}", "line 1, column"},
      {"{\"links\": {}}", "missing \"comm_tuning_version\""},
      {"{\"comm_tuning_version\": 6}", "version 6 is not supported"},
      {"{\"comm_tuning_version\": 5, \"links\": {\"tcp\": {\"transfer_us\": [[8, 1], [4096, 0.5]]}}}",
       "links.tcp.transfer_us must list sizes above 0 in increasing order with times that do not decrease (entry 1"},
      {"{\"comm_tuning_version\": 5, \"links\": {\"tcp\": {\"transfer_us\": [[0, 1]]}}}", "(entry 0"},
      {"{\"comm_tuning_version\": 5, \"links\": {\"tcp\": {\"transfer_us\": [8, 1]}}}",
       "links.tcp.transfer_us holds an entry that is not a [bytes, microseconds] pair"},
      {"{\"comm_tuning_version\": 3, \"native\": {\"allreduce\": {\"native\": [[8]]}}}", "[bytes, microseconds] pair"},
      {"{\"comm_tuning_version\": 3, \"native\": {\"allreduse\": {}}}", "allreduse"},
      {"{\"comm_tuning_version\": 3, \"key\": {\"id\": 5}}", "key.id must be a string"},
      {"{\"comm_tuning_version\": 2, \"links\": {\"tcp\": {\"rndv_extra_us\": -1}}}", "links.tcp.rndv_extra_us = -1"},
      {"{\"comm_tuning_version\": 2, \"links\": {\"shm\": {\"receiver_copies\": 1}}}", "must be a boolean"},
      {"{\"comm_tuning_version\": 1, \"links\": {\"warp\": {\"alpha_us\": 1}}}", "warp"},
      {"{\"comm_tuning_version\": 1, \"links\": {\"tcp\": {\"beta_gbps\": 0}}}", "links.tcp.beta_gbps = 0"},
      {"{\"comm_tuning_version\": 1, \"links\": {\"tcp\": {\"alpha_us\": \"fast\"}}}", "must be a number"},
      {"{\"comm_tuning_version\": 1, \"compute\": {\"reduce_gbs\": 1}}", "unknown key \"reduce_gbs\""},
      {"{\"comm_tuning_version\": 1, \"links\": []}", "links must be an object"},
      {"[1]", "the top level must be an object"},
  };
  for (const auto& [text, expect] : cases) {
    CAPTURE(text);
    write_text(path, text);
    LinkMatrix m = two_rank_matrix(LinkKind::tcp, 3, 4);
    ComputeParams c;
    try {
      load_tuning(path, m, c);
      FAIL("expected an error");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::invalid_config);
      CHECK(std::string(e.what()).find(path) != std::string::npos);
      CHECK(std::string(e.what()).find(expect) != std::string::npos);
    }
    CHECK(m.at(0, 1).alpha_us == 3);  // nothing applied
  }
  std::remove(path.c_str());
  CHECK_THROWS_AS(save_tuning("/nonexistent-dir/x/tuning.json", two_rank_matrix(LinkKind::tcp, 1, 1), {}), Error);
}

TEST_CASE("a version 1 tuning file still loads and leaves the newer figures alone") {
  const std::string path = temp_path("v1.json");
  write_text(path, "{\"comm_tuning_version\": 1, \"links\": {\"tcp\": {\"alpha_us\": 11.5, \"beta_gbps\": 2.9}},"
                   " \"compute\": {\"reduce_gbps\": 6.1, \"copy_gbps\": 11.0, \"step_overhead_us\": 0.05}}");
  LinkMatrix m = two_rank_matrix(LinkKind::tcp, 3, 4);
  m.links[1].rndv_threshold_bytes = 8192;
  m.links[1].rndv_extra_us = 2.0;
  ComputeParams c;
  c.op_overhead_us = 0.75;
  REQUIRE(load_tuning(path, m, c));
  test::check_link_figures(m.at(0, 1), 11.5, 2.9, 8192, 2.0);
  CHECK(c.reduce_gbps == 6.1);
  CHECK(c.op_overhead_us == 0.75);
  CHECK(c.cache_bytes == 0);
  std::remove(path.c_str());
}

TEST_CASE("the calibration fit recovers a synthetic link") {
  const double alpha = 6.0, beta = 5.5, extra = 9.0;
  const std::size_t sizes[] = {8, 1024, 4096, 8192, 16384, 24576, 32768, 65536, 262144, std::size_t{1} << 20};
  auto samples_for = [&](std::size_t threshold, double step) {
    std::vector<std::pair<std::size_t, double>> s;
    for (std::size_t b : sizes)
      s.emplace_back(b, alpha + static_cast<double>(b) / (beta * 1e3) + (b > threshold ? step : 0.0));
    return s;
  };
  const LinkFit f = fit_link(samples_for(16384, extra));
  CHECK(f.alpha_us == doctest::Approx(alpha));
  CHECK(f.beta_gbps == doctest::Approx(beta));
  CHECK(f.rndv_threshold_bytes == 16384);
  CHECK(f.rndv_extra_us == doctest::Approx(extra));
  const LinkFit later = fit_link(samples_for(65536, extra));
  CHECK(later.rndv_threshold_bytes == 65536);
  CHECK(later.rndv_extra_us == doctest::Approx(extra));
  // No step (or one too small to be more than noise): every message eager.
  const LinkFit eager = fit_link(samples_for(16384, 0.0));
  CHECK(eager.rndv_threshold_bytes == std::numeric_limits<std::size_t>::max());
  CHECK(eager.rndv_extra_us == 0);
  CHECK(eager.alpha_us == doctest::Approx(alpha));
  CHECK(eager.beta_gbps == doctest::Approx(beta));
  const LinkFit noise = fit_link(samples_for(16384, 0.1));
  CHECK(noise.rndv_threshold_bytes == std::numeric_limits<std::size_t>::max());
  CHECK(noise.beta_gbps == doctest::Approx(beta).epsilon(0.02));
  CHECK_THROWS_AS(fit_link({{8, 1.0}, {1024, 2.0}}), Error);
}

TEST_CASE("the transfer curve keeps where a link bends, which the line fit averages away") {
  // Loopback TCP's shape: one rate up to 512 KiB, three times slower per byte beyond.
  const std::size_t sizes[] = {8,     1024,  4096,   8192,   16384,  24576,
                               32768, 65536, 131072, 262144, 524288, std::size_t{1} << 20};
  const auto time_at = [](std::size_t b) {
    const double kib = static_cast<double>(b) / 1024;
    return 40.0 + 0.25 * std::min(kib, 512.0) + 0.75 * std::max(kib - 512.0, 0.0);
  };
  std::vector<std::pair<std::size_t, double>> samples;
  for (std::size_t b : sizes) samples.emplace_back(b, time_at(b));
  const LinkFit fit = fit_link(samples);
  const auto curve = transfer_curve(samples, fit);
  REQUIRE(curve.size() == samples.size());
  for (std::size_t i = 0; i < curve.size(); ++i) {
    CAPTURE(sizes[i]);
    CHECK(curve[i].first == sizes[i]);
    const double handshake = sizes[i] > fit.rndv_threshold_bytes ? fit.rndv_extra_us : 0.0;
    CHECK(curve[i].second == doctest::Approx(std::max(samples[i].second - fit.alpha_us - handshake, 0.0)));
  }
  // Through the curve the model puts each size where it was measured; the line misses the bend.
  LinkInfo link{LinkKind::tcp, fit.alpha_us, fit.beta_gbps, "bent"};
  link.rndv_threshold_bytes = fit.rndv_threshold_bytes;
  link.rndv_extra_us = fit.rndv_extra_us;
  const auto modelled = [&](std::size_t b) {
    return link.alpha_us + (b > link.rndv_threshold_bytes ? link.rndv_extra_us : 0.0) +
           link_transfer_us(link, b, false);
  };
  const std::size_t half = std::size_t{512} << 10;
  CHECK(modelled(half) > 1.1 * time_at(half));  // the line alone: 12 % over
  link.transfer_curve = curve;
  for (std::size_t b : sizes) CHECK(modelled(b) == doctest::Approx(time_at(b)));

  // Noise that inverts neighbours pools them to their mean; nothing is negative.
  const std::vector<std::pair<std::size_t, double>> noisy{{8, 9.0}, {1024, 12.0}, {4096, 14.0}, {8192, 10.0},
                                                           {16384, 20.0}};
  LinkFit flat;
  flat.alpha_us = 10.0;
  const auto pooled = transfer_curve(noisy, flat);
  const std::vector<double> want{0.0, 2.0, 2.0, 2.0, 10.0};  // 9 - 10 < 0: 0; 14 and 10 pooled: (4 + 0) / 2
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(pooled[i].second == doctest::Approx(want[i]));
}

TEST_CASE("the agreed tuning file is rank 0's, on every rank") {
  const std::string path = temp_path("agreed.json");
  ComputeParams saved;
  saved.reduce_gbps = 3.5;
  save_tuning(path, two_rank_matrix(LinkKind::shm, 0.75, 6.5), saved);
  const std::string bad_path = temp_path("agreed_bad.json");
  write_text(bad_path, "{\"comm_tuning_version\": 1, \"links\": 5}");
  for (const bool malformed : {false, true}) {
    CAPTURE(malformed);
    auto store = make_memory_store();
    LinkMatrix m[2] = {two_rank_matrix(LinkKind::shm, 9, 9), two_rank_matrix(LinkKind::shm, 9, 9)};
    ComputeParams c[2];
    std::string errors[2];
    bool found[2] = {false, false};
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r)
      threads.emplace_back([&, r] {
        // Rank 1 names a file it does not have: rank 0's file decides.
        const std::string mine = r == 0 ? (malformed ? bad_path : path) : temp_path("absent.json");
        try {
          found[r] = load_tuning_agreed(mine, *store, r, m[r], c[r], std::chrono::seconds(10));
        } catch (const Error& e) {
          errors[r] = e.what();
        }
      });
    for (auto& t : threads) t.join();
    if (malformed) {
      CHECK(errors[0].find("links must be an object") != std::string::npos);
      CHECK(errors[1] == errors[0]);
    } else {
      for (int r = 0; r < 2; ++r) {
        CHECK(errors[r].empty());
        CHECK(found[r]);
        CHECK(m[r].at(0, 1).alpha_us == 0.75);
        CHECK(m[r].at(1, 0).beta_gbps == 6.5);
        CHECK(c[r].reduce_gbps == 3.5);
      }
    }
  }
  std::remove(path.c_str());
  std::remove(bad_path.c_str());
}

TEST_CASE("calibration's scratch lanes: pages faulted when first asked for, zeros, the lane's end enforced") {
  calib::Scratch scratch;
  const std::size_t mib = std::size_t{1} << 20;
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  // Which of the pages of [at, at + bytes) are resident (mincore).
  const auto resident = [&](std::byte* at, std::size_t bytes) {
    std::vector<unsigned char> v(bytes / page);
    REQUIRE(::mincore(at, bytes, v.data()) == 0);
    std::size_t n = 0;
    for (const unsigned char c : v) n += c & 1;
    return n;
  };
  std::byte* const lane0 = scratch.lane(0, mib);
  CHECK(resident(lane0, mib) == mib / page);
  CHECK(resident(lane0 + 16 * mib, mib) == 0);  // not asked for yet (far past any huge page of the first)
  CHECK(std::all_of(lane0, lane0 + mib, [](std::byte b) { return b == std::byte{0}; }));
  // The same address at every size; the lanes do not overlap.
  CHECK(scratch.lane(0, 8 * mib) == lane0);
  CHECK(resident(lane0, 8 * mib) == 8 * mib / page);
  std::byte* const lane1 = scratch.lane(1, mib);
  CHECK(lane1 >= lane0 + calib::Scratch::kLaneBytes);
  CHECK(reinterpret_cast<std::byte*>(scratch.floats(1, 4, 2)) == lane1 + 2 * sizeof(float));
  scratch.lane(0, calib::Scratch::kLaneBytes);  // the whole lane
  CHECK_THROWS_WITH_AS(scratch.lane(1, mib, calib::Scratch::kLaneBytes - mib + 1),
                       doctest::Contains("scratch lane 1 has no 1048576 B at offset"), Error);
  CHECK_THROWS_AS(scratch.lane(2, 1), Error);
}

TEST_CASE("calibration measures every link kind and agrees on all ranks") {
  constexpr int n = 3;
  // Links moved by CPU copies (shared memory) and links that are not.
  for (const LinkKind kind : {LinkKind::shm, LinkKind::tcp}) {
    CAPTURE(to_string(kind));
    LinkMatrix result[n];
    ComputeParams compute[n];
    test::run_transports(n, Config{}, [&](int r, Transport& t, Store& store, const Config&) {
      // A nominal latency of one second: no measurement comes near it, even
      // with 3 threads on 2 busy cores (which have measured over 200 us).
      LinkMatrix m = test::uniform_links(n, kind, 1e6, 0.001, "nominal");
      calib::Scratch scratch;
      calibrate_links(t, store, scratch, r, n, n, m, compute[r], std::chrono::seconds(30));
      result[r] = m;
    });
    const LinkInfo& l = result[0].at(0, 1);
    CHECK(l.alpha_us > 0);
    CHECK(l.alpha_us < 1e5);  // replaced by a measurement of threads exchanging 8 B
    CHECK(l.beta_gbps > 0.001);
    CHECK(l.detail.find("calibrated") != std::string::npos);
    CHECK(result[0].at(0, 0).alpha_us == 0);  // self links are not measured
    CHECK(compute[0].reduce_gbps > 0);
    CHECK(compute[0].copy_gbps > 0);
    // Shared-memory links move data by CPU copies: from memory they slow down
    // as the host's memcpy does (no streamed exchange); others are measured.
    const double copy_slowdown = compute[0].copy_large_gbps / compute[0].copy_gbps;
    if (kind == LinkKind::shm)
      CHECK(l.beta_large_gbps == doctest::Approx(l.beta_gbps * copy_slowdown));
    else
      CHECK(l.beta_large_gbps > 0);
    CHECK(l.beta_large_gbps <= l.beta_gbps);
    CHECK(compute[0].reduce_large_gbps > 0);
    CHECK(compute[0].reduce_large_gbps <= compute[0].reduce_gbps);
    CHECK(compute[0].cache_bytes > 0);
    for (int r = 1; r < n; ++r)
      for (std::size_t i = 0; i < result[0].links.size(); ++i) {
        CHECK(result[r].links[i].alpha_us == result[0].links[i].alpha_us);
        CHECK(result[r].links[i].beta_gbps == result[0].links[i].beta_gbps);
        CHECK(result[r].links[i].rndv_threshold_bytes == result[0].links[i].rndv_threshold_bytes);
        CHECK(result[r].links[i].rndv_extra_us == result[0].links[i].rndv_extra_us);
        CHECK(result[r].links[i].beta_large_gbps == result[0].links[i].beta_large_gbps);
        CHECK(compute[r].reduce_large_gbps == compute[0].reduce_large_gbps);
        CHECK(compute[r].reduce_gbps == compute[0].reduce_gbps);
        CHECK(compute[r].copy_gbps == compute[0].copy_gbps);
      }
  }
}

TEST_CASE("the plot has time and bandwidth panels per transport, bands, auto, best and pick/best") {
  std::vector<Result> rs;
  for (const char* t : {"ucx", "gloo"})
    for (const char* a : {"ring", "direct", "auto"})
      for (std::size_t b : {std::size_t{8}, std::size_t{4096}, std::size_t{1} << 20}) {
        Result r;
        r.transport = t;
        r.algo = a;
        r.ran = std::string(a) == "auto" ? "direct" : a;
        r.auto_pick = "direct";
        r.layout.bytes = b;
        r.time_us = (std::string(a) == "ring" ? 2.0 : 1.0) * (1 + static_cast<double>(b) / 1000);
        r.p10_us = r.time_us * 0.9;
        r.p90_us = r.time_us * 1.3;
        r.busbw_gbps = static_cast<double>(b) / (r.time_us * 1e3);
        rs.push_back(r);
      }
  const std::string svg = render_svg(rs, "t");
  for (const char* panel : {"ucx: time per operation", "ucx: bus bandwidth", "gloo: time per operation",
                            "gloo: bus bandwidth", "automatic pick / best fixed algorithm"})
    CHECK(svg.find(panel) != std::string::npos);
  CHECK(svg.find("<polygon") != std::string::npos);  // p10-p90 bands
  CHECK(svg.find("best fixed algorithm per size") != std::string::npos);
  CHECK(svg.find("auto (automatic selection)") != std::string::npos);
  // ring and direct: different colours and dashes in the legend.
  CHECK(svg.find("stroke-dasharray=\"7,4\"") != std::string::npos);
  CHECK(svg.find("#0072B2") != std::string::npos);
  CHECK(svg.find("#D55E00") != std::string::npos);
  CHECK(render_svg({}, "t").find("no measurements") != std::string::npos);
}
