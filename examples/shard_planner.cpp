// shard_planner: how far can tensor parallelism split a model before the
// all-reduces dominate a decode step?
//
// For TP degrees 1..16 it predicts, with the library's own cost model
// (comm::predict, the model the selector uses), the time of the two
// all-reduces per layer that tensor parallelism costs, and sets them against
// the per-step compute time, which shrinks as 1/TP. The fabric is a preset
// with published latency/bandwidth (see examples/README.md for the sources) or
// the links this job's communicator measured (--calibrated, under commrun).
//
// Run: build/bin/shard_planner --fabric nvswitch --layers 80 --hidden 8192 --batch 8

#include "util/cli.hpp"

#include <comm/comm.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace {

struct Fabric {
  const char* name;
  comm::LinkInfo link;
  comm::ComputeModel compute;
  const char* what;    // the hardware the preset stands for
  const char* source;  // where alpha and beta come from
};

// A GPU reduces and copies at HBM speed (H100 SXM: 3.35 TB/s; a reduce reads
// two operands and writes one, so ~1 TB/s of output; a copy reads and writes,
// ~1.5 TB/s). Each step of a schedule run on a GPU is a kernel queued on the
// stream behind the previous one; with the launch already queued, what a step
// costs is the gap between dependent kernels, about 1 us (not the 2-5 us of a
// launch the host waits for, and not a host loop's 0.05 us).
constexpr comm::ComputeModel kGpu{1000.0, 1500.0, 1.0};

const Fabric kFabrics[] = {
    {"nvswitch",
     {comm::LinkKind::nvswitch, 0.6, 360.0, "preset nvswitch"},
     kGpu,
     "8x H100 SXM, NVLink 4 through NVSwitch (DGX/HGX H100)",
     "alpha: NCCL's latency model, per NVLink hop, LL protocol (src/graph/tuning.cc hwLat, 0.6 us); "
     "beta: nccl-tests all-reduce bus bandwidth on H100 NVSwitch without NVLS (~360 GB/s of 450 GB/s NVLink 4)"},
    {"nvlink",
     {comm::LinkKind::nvlink, 0.6, 235.0, "preset nvlink"},
     kGpu,
     "8x A100 SXM, NVLink 3 (HGX A100)",
     "alpha: NCCL's latency model, per NVLink hop, LL protocol (0.6 us); "
     "beta: the cap NCCL's tuning model puts on A100 NVLink bus bandwidth (235 GB/s of 300 GB/s NVLink 3)"},
    {"pcie",
     {comm::LinkKind::pcie, 1.0, 22.0, "preset pcie"},
     kGpu,
     "GPUs under one PCIe Gen4 x16 switch, peer-to-peer",
     "alpha: NCCL's latency model, per PCI hop, LL protocol (1.0 us); "
     "beta: PCIe Gen4 x16 peer-to-peer as measured by p2p bandwidth tests (~22 GB/s of 32 GB/s raw)"},
    {"ib",
     {comm::LinkKind::ib, 2.7, 45.0, "preset ib"},
     kGpu,
     "one GPU per node, NDR InfiniBand 400 Gb/s with GPUDirect RDMA",
     "alpha: NCCL's latency model, per network hop, ring LL protocol (2.7 us); "
     "beta: NDR 400 Gb/s = 50 GB/s raw, ~45 GB/s in nccl-tests inter-node runs"},
    {"tcp",
     {comm::LinkKind::tcp, 15.0, 10.0, "preset tcp"},
     kGpu,
     "one GPU per node, 100 Gb/s Ethernet with kernel TCP sockets",
     "alpha: kernel TCP half round trip (~10 us on loopback measured in this project, ~15 us over a NIC); "
     "beta: 100 Gb/s = 12.5 GB/s raw, ~10 GB/s with socket copies"},
};

// A published small-message number a preset must land near, for the
// algorithm the publisher ran at that size.
struct Reference {
  const char* fabric;
  int nranks;
  std::size_t bytes;
  const char* algorithm;
  double us;
  const char* source;
};
const Reference kReferences[] = {
    {"nvswitch", 8, 1024, "ring", 15.0,
     "NCCL, 8x H100 on NVSwitch, all-reduce <= 1 KiB: ~15 us with ring/tree LL (NCCL's own latency model, "
     "src/graph/tuning.cc: ring LL base 6.6 us + 14 hops x 0.6 us = 15.0 us; tree LL 15.2 us)"},
};

// Fastest eligible algorithm (predict sorts them first), or the named one.
comm::Prediction best(int nranks, std::size_t bytes, const comm::LinkInfo& link, const comm::ComputeModel& compute,
                      const std::string& only = "") {
  if (nranks == 1) return {"(none)", 0.0};
  for (const comm::Prediction& p : comm::predict(comm::Collective::allreduce, nranks, bytes, link, compute))
    if (p.us >= 0 && (only.empty() || p.algorithm == only)) return p;
  return {only.empty() ? "(none eligible)" : only + " (not eligible)", -1.0};
}

std::string human_bytes(std::size_t b) {
  char buf[32];
  if (b >= (1u << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1u << 20));
  else if (b >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024);
  else
    std::snprintf(buf, sizeof buf, "%zu B", b);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t hidden = 8192, batch = 8, tokens = 1;
  int layers = 32, max_tp = 16;
  std::string dtype_name = "bf16", fabric_name = "nvswitch";
  double compute_given = -1, hbm_gbps = 2700, alpha_us = -1, beta_gbps = -1, step_us = -1;
  bool calibrated = false, csv = false;
  comm::cli::Parser args("shard_planner", "shard_planner [options]");
  args.description("Predicts per-step all-reduce time of tensor parallelism for TP = 1, 2, 4, ... --max-tp\n"
                   "and compares it with the per-step compute time.");
  args.section("the fabric");
  args.text("--fabric", "nvswitch|nvlink|pcie|ib|tcp",
            "link preset (default nvswitch); sources are printed and in examples/README.md", fabric_name);
  args.flag("--calibrated", "use the link this job's communicator measured (run under commrun, >= 2 ranks)",
            calibrated);
  args.real("--alpha-us", "US", "override the preset's link latency", alpha_us, 0, true);
  args.real("--beta-gbps", "G", "override the preset's link bandwidth", beta_gbps, 0);
  args.real("--step-us", "US", "override the preset's per-step compute overhead", step_us, 0, true);
  args.section("the model and the step");
  args.integer("--layers", "N", "decoder layers (default 32)", layers, 1);
  args.integer("--hidden", "N", "model width (default 8192)", hidden, 1);
  args.integer("--batch", "N", "sequences per step (default 8)", batch, 1);
  args.integer("--tokens", "N", "tokens per sequence per step (default 1 = decode)", tokens, 1);
  args.text("--dtype", "T", "activation type (default bf16)", dtype_name);
  args.real("--compute-us", "US", "compute time of one step on ONE GPU; default: weight bytes / --hbm-gbps",
            compute_given, 0, true);
  args.real("--hbm-gbps", "G", "assumed achievable HBM bandwidth for the default (2700 = 80 % of H100 SXM)",
            hbm_gbps, 0);
  args.integer("--max-tp", "N", "largest TP degree (default 16)", max_tp, 1);
  args.section("output");
  args.flag("--csv", "machine-readable rows: tp,bytes,algorithm,allreduce_us,comm_us,compute_us", csv);
  args.parse_or_exit(argc, argv);
  if (calibrated && args.given("--fabric")) args.fail("--fabric and --calibrated exclude each other");

  try {
    const comm::DataType dtype = comm::parse_dtype(dtype_name);
    const std::size_t elem = comm::dtype_size(dtype);
    Fabric fabric{};
    comm::Communicator world;  // only with --calibrated
    if (calibrated) {
      comm::Config cfg = comm::Config::from_env();
      cfg.calibrate = true;  // measure alpha/beta instead of trusting the transport's nominal figures
      world = comm::Communicator::create(cfg);
      if (world.size() < 2)
        throw comm::Error(comm::ErrorCode::invalid_argument,
                          "shard_planner --calibrated needs a link to measure: run it on at least 2 ranks "
                          "(commrun -n 2 shard_planner --calibrated)");
      // The slowest link out of rank 0 stands for the fabric: a collective
      // runs at the pace of its slowest hop.
      comm::LinkInfo slow = world.link(0, 1);
      for (int p = 2; p < world.size(); ++p) {
        const comm::LinkInfo l = world.link(0, p);
        if (l.alpha_us > slow.alpha_us) slow = l;
      }
      // Measured now, or earlier and cached (see COMM_CALIBRATE in config.hpp).
      const bool measured = slow.detail.find("calibrated") != std::string::npos ||
                            slow.detail.find("from tuning file") != std::string::npos;
      fabric = {"calibrated", slow, comm::ComputeModel{}, "the links of this job",
                measured ? "measured by the communicator (at start-up, or cached from an earlier run); host compute model"
                         : "as the transport reports them (the communicator did not calibrate); host compute model"};
      if (world.rank() != 0) return 0;  // one table is enough
    } else {
      const auto it = std::find_if(std::begin(kFabrics), std::end(kFabrics),
                                   [&](const Fabric& f) { return fabric_name == f.name; });
      if (it == std::end(kFabrics)) args.fail("--fabric '" + fabric_name + "': use nvswitch, nvlink, pcie, ib or tcp");
      fabric = *it;
    }
    // Your own measurements beat the preset's; the reference check then
    // shows how far they move the model from the published number.
    if (alpha_us >= 0) fabric.link.alpha_us = alpha_us;
    if (beta_gbps > 0) fabric.link.beta_gbps = beta_gbps;
    if (step_us >= 0) fabric.compute.step_overhead_us = step_us;
    const bool overridden = alpha_us >= 0 || beta_gbps > 0 || step_us >= 0;

    const std::size_t bytes = batch * tokens * hidden * elem;
    // Default compute: decode streams every weight once per step. A GPT-style
    // layer has 12 * hidden^2 weights (4 h^2 attention, 8 h^2 MLP).
    const double weight_bytes = 12.0 * static_cast<double>(hidden) * static_cast<double>(hidden) *
                                static_cast<double>(elem) * layers;
    const double compute1 = compute_given >= 0 ? compute_given : weight_bytes / (hbm_gbps * 1e3);

    if (!csv) {
      std::printf("fabric: %s -- %s\n  alpha %.2f us, beta %.1f GB/s (%s)\n  source: %s%s\n", fabric.name,
                  fabric.what, fabric.link.alpha_us, fabric.link.beta_gbps, fabric.link.detail.c_str(), fabric.source,
                  overridden ? "\n  overridden on the command line: --alpha-us / --beta-gbps / --step-us" : "");
      std::printf("  compute model: reduce %.0f GB/s, copy %.0f GB/s, %.2f us per step\n", fabric.compute.reduce_gbps,
                  fabric.compute.copy_gbps, fabric.compute.step_overhead_us);
      std::printf("model: %d layers, hidden %zu, batch %zu x %zu tokens, %s: 2 all-reduces of %s per layer\n",
                  layers, hidden, batch, tokens, dtype_name.c_str(), human_bytes(bytes).c_str());
      if (compute_given >= 0)
        std::printf("compute per step on one GPU: %.1f us (given)\n\n", compute1);
      else
        std::printf("compute per step on one GPU: %.1f us (assumed: %.2f GB of weights streamed at %.0f GB/s)\n\n",
                    compute1, weight_bytes / 1e9, hbm_gbps);
      std::printf("%4s  %-20s %14s %14s %14s %8s\n", "TP", "algorithm", "allreduce us", "comm us/step",
                  "compute us", "comm %");
    }
    int dominated_from = 0;
    for (int tp = 1; tp <= max_tp; tp *= 2) {
      const comm::Prediction p = best(tp, bytes, fabric.link, fabric.compute);
      const double comm_us = p.us < 0 ? -1.0 : 2.0 * layers * p.us;
      const double compute_us = compute1 / tp;
      if (csv) {
        std::printf("%d,%zu,%s,%.4f,%.4f,%.4f\n", tp, bytes, p.algorithm.c_str(), p.us, comm_us, compute_us);
        continue;
      }
      const bool dominates = comm_us >= compute_us;
      if (dominates && dominated_from == 0) dominated_from = tp;
      std::printf("%4d  %-20s %14.2f %14.1f %14.1f %7.1f%%%s\n", tp, p.algorithm.c_str(), p.us, comm_us, compute_us,
                  comm_us < 0 ? 0.0 : 100.0 * comm_us / (comm_us + compute_us),
                  dominates && dominated_from == tp ? "  <- communication dominates from here" : "");
    }
    if (csv) return 0;
    if (dominated_from == 0)
      std::printf("\ncommunication stays below compute up to TP %d\n", max_tp);
    else if (dominated_from == 1)
      std::printf("\ncommunication dominates at every TP degree\n");
    else
      std::printf("\ncommunication dominates beyond TP %d (from TP %d on)\n", dominated_from / 2, dominated_from);

    for (const Reference& r : kReferences) {
      if (fabric_name != r.fabric || calibrated) continue;
      const comm::Prediction same = best(r.nranks, r.bytes, fabric.link, fabric.compute, r.algorithm);
      const comm::Prediction fastest = best(r.nranks, r.bytes, fabric.link, fabric.compute);
      const double err = (same.us - r.us) / r.us;
      std::printf("\nreference check: %d ranks, %zu B all-reduce, '%s': model %.1f us vs published %.1f us "
                  "(%+.0f %%, %s 30 %%)\n  published: %s\n"
                  "  (the fastest algorithm of this library at that size, '%s', is predicted at %.1f us)\n",
                  r.nranks, r.bytes, r.algorithm, same.us, r.us, 100.0 * err,
                  std::fabs(err) <= 0.30 ? "within" : "OUTSIDE", r.source, fastest.algorithm.c_str(), fastest.us);
    }
    return 0;
  } catch (const comm::Error& e) {
    std::fprintf(stderr, "shard_planner: %s\n", e.what());
    return 1;
  }
}
