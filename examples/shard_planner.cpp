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
  comm::LinkInfo link;   // between the GPUs of one host (or the nodes, with one GPU per node)
  comm::ComputeModel compute;
  const char* what;      // the hardware the preset stands for
  const char* source;    // where alpha and beta come from
  int gpus_per_host = 1;  // a TP degree above this spans hosts of this many GPUs...
  comm::LinkInfo inter{};  // ...joined by this (one NIC per GPU)
};

// What a GPU collective pays beyond the wire (kernel launch per collective,
// a flag handshake per step) and its reduce/copy rates: the library's H100
// preset (comm::fabric_preset, src/select/fabric_presets.cpp, which cites them).
const comm::ComputeModel kGpu = comm::fabric_preset("h100-8").compute;
// Between hosts of NVLink machines: the preset's NDR 400 Gb/s NIC per GPU.
const comm::LinkInfo kNdr = comm::fabric_preset("h100-2x8").fabric.inter;
const comm::LinkInfo kHdr{comm::LinkKind::ib, 2.7, 23.0, "preset HDR InfiniBand 200 Gb/s"};

const Fabric kFabrics[] = {
    {"nvswitch",
     {comm::LinkKind::nvswitch, 0.6, 450.0, "preset nvswitch"},
     kGpu,
     "8x H100 SXM per host, NVLink 4 through NVSwitch (DGX/HGX H100); beyond 8 GPUs, hosts joined by one NDR "
     "400 Gb/s NIC per GPU",
     "alpha: NCCL's latency model, per NVLink hop, LL protocol (src/graph/tuning.cc hwLat, 0.6 us); "
     "beta: NVLink 4 one way (450 GB/s; NCCL's ring reaches ~370 GB/s bus bandwidth, NVIDIA/nccl-tests#212); "
     "between hosts 48 GB/s per NIC (NVIDIA/nccl-tests#290)",
     8, kNdr},
    {"nvlink",
     {comm::LinkKind::nvlink, 0.6, 235.0, "preset nvlink"},
     kGpu,
     "8x A100 SXM per host, NVLink 3 (HGX A100); beyond 8 GPUs, one HDR 200 Gb/s NIC per GPU",
     "alpha: NCCL's latency model, per NVLink hop, LL protocol (0.6 us); "
     "beta: the cap NCCL's tuning model puts on A100 NVLink bus bandwidth (235 GB/s of 300 GB/s NVLink 3)",
     8, kHdr},
    {"pcie",
     {comm::LinkKind::pcie, 1.0, 22.0, "preset pcie"},
     kGpu,
     "8 GPUs under PCIe Gen4 x16 switches, peer-to-peer; beyond 8 GPUs, one HDR 200 Gb/s NIC per GPU",
     "alpha: NCCL's latency model, per PCI hop, LL protocol (1.0 us); "
     "beta: PCIe Gen4 x16 peer-to-peer as measured by p2p bandwidth tests (~22 GB/s of 32 GB/s raw)",
     8, kHdr},
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

// The cluster a TP degree occupies on `f`: one host up to gpus_per_host GPUs, then whole hosts.
comm::HostFabric cluster(const Fabric& f, int tp) {
  if (tp <= f.gpus_per_host || f.gpus_per_host <= 1)
    return {1, tp, f.link, f.gpus_per_host <= 1 ? f.link : f.inter};
  return {(tp + f.gpus_per_host - 1) / f.gpus_per_host, f.gpus_per_host, f.link, f.inter};
}

// A published number a preset must land near (within 30 %), for the
// algorithm the publisher ran at that size. `lo`..`hi` is the published range;
// busbw_per_nic: the figure is bus bandwidth per NIC (GB/s), not time.
struct Reference {
  const char* fabric;
  std::size_t bytes;
  const char* algorithm;  // "" = the fastest of this library
  double lo, hi;
  bool busbw_per_nic;
  const char* source;
};
const Reference kReferences[] = {
    {"h100-8", 8 << 10, "ring", 15.0, 20.0, false,
     "NCCL all-reduce, 8 x H100 NVSwitch, <= 64 KiB: ~15-20 us (ring/tree LL; NCCL's latency model "
     "src/graph/tuning.cc: ring LL base 6.6 us + 14 hops x 0.6 us = 15.0 us)"},
    {"h100-8", 64 << 10, "ring", 15.0, 20.0, false, "as above, at 64 KiB"},
    {"h100-8", 8 << 10, "direct", 6.0, 10.0, false,
     "custom one-shot all-reduce kernels, 8 x H100: 6-10 us at 8-256 KiB (TensorRT-LLM's one-shot measured "
     "5.7-7.8 us up to 32 KiB in sgl-project/sglang#2904)"},
    {"h100-8", 256 << 10, "direct", 6.0, 10.0, false,
     "as above, at 256 KiB (sgl-project/sglang#2904 measured 16.7 us there)"},
    {"h100-8", std::size_t{1} << 30, "ring", 360.0, 475.0, false,
     "NCCL ring all-reduce bus bandwidth, 8 x H100, >= 1 GiB: ~370 GB/s (NVIDIA/nccl-tests#212, "
     "NVIDIA/nccl#1455; 475-480 GB/s with NVLink SHARP, NVIDIA/nccl-tests#290)"},
    {"h100-2x8", std::size_t{1} << 30, "", 45.0, 49.0, true,
     "2 x 8 H100 over NDR 400 Gb/s InfiniBand: 46-48 GB/s of bus bandwidth per NIC (NVIDIA/nccl-tests#290)"},
};

// Fastest eligible algorithm (predict sorts them first), or the named one.
comm::Prediction best(const comm::HostFabric& f, std::size_t bytes, const comm::ComputeModel& compute,
                      const std::string& only = "") {
  if (f.hosts * f.ranks_per_host == 1) return {"(none)", 0.0};
  for (const comm::Prediction& p : comm::predict(comm::Collective::allreduce, f, bytes, compute))
    if (p.us >= 0 && (only.empty() || p.algorithm == only)) return p;
  return {only.empty() ? "(none eligible)" : only + " (not eligible)", -1.0};
}

std::string human_bytes(std::size_t b) {
  char buf[32];
  if (b >= (1u << 30))
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(b) / (1u << 30));
  else if (b >= (1u << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1u << 20));
  else if (b >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024);
  else
    std::snprintf(buf, sizeof buf, "%zu B", b);
  return buf;
}

// Checks the model against each published figure for `preset`; prints one
// line each. Returns how many lie outside 30 % of the published range.
int check_references(const std::string& preset) {
  const comm::FabricPreset f = comm::fabric_preset(preset);
  const int n = f.fabric.hosts * f.fabric.ranks_per_host;
  int outside = 0;
  for (const Reference& r : kReferences) {
    if (preset != r.fabric) continue;
    const comm::Prediction p = best(f.fabric, r.bytes, f.compute, r.algorithm);
    double model = p.us;
    if (r.busbw_per_nic)  // nccl-tests' bus bandwidth, shared by the NICs of a host
      model = 2.0 * (n - 1) / n * static_cast<double>(r.bytes) / (p.us * 1e3) / f.fabric.ranks_per_host;
    else if (r.lo > 100)  // a bandwidth figure (GB/s)
      model = 2.0 * (n - 1) / n * static_cast<double>(r.bytes) / (p.us * 1e3);
    const double dev = model < r.lo ? (model - r.lo) / r.lo : model > r.hi ? (model - r.hi) / r.hi : 0.0;
    const bool ok = std::fabs(dev) <= 0.30;
    outside += ok ? 0 : 1;
    std::printf("reference check: %s, %s all-reduce, '%s': model %.1f %s vs published %.0f-%.0f (%+.0f %%, %s 30 %%)\n"
                "  published: %s\n",
                preset.c_str(), human_bytes(r.bytes).c_str(), p.algorithm.c_str(), model,
                r.busbw_per_nic ? "GB/s per NIC" : r.lo > 100 ? "GB/s bus bandwidth" : "us", r.lo, r.hi, 100.0 * dev,
                ok ? "within" : "OUTSIDE", r.source);
  }
  return outside;
}

// --compare: hierarchical against flat ring on a preset cluster, 8 KiB - 1 GiB,
// and what the selector (the same cost model) picks.
int compare_hosts(const std::string& preset) {
  const comm::FabricPreset f = comm::fabric_preset(preset);
  const int n = f.fabric.hosts * f.fabric.ranks_per_host;
  std::printf("fabric: %s -- %s\n  source: %s\n\n", f.name.c_str(), f.what.c_str(), f.source.c_str());
  std::printf("%10s %12s %14s %18s  %-18s %12s %12s\n", "size", "ring us", "hierarchical", "hierarchical_rail",
              "selector picks", "pick us", "busbw/NIC");
  int worse = 0;
  for (std::size_t bytes = 8 << 10; bytes <= (std::size_t{1} << 30); bytes *= 2) {
    const auto all = comm::predict(comm::Collective::allreduce, f.fabric, bytes, f.compute);
    auto us = [&](const char* name) {
      for (const auto& p : all)
        if (p.algorithm == name) return p.us;
      return -1.0;
    };
    const comm::Prediction pick = all.front();  // sorted fastest first: what the selector chooses
    const double ring = us("ring"), hier = us("hierarchical"), rail = us("hierarchical_rail");
    const double faster = std::min(ring, std::min(hier, rail));
    worse += pick.us > faster ? 1 : 0;
    const double busbw = 2.0 * (n - 1) / n * static_cast<double>(bytes) / (pick.us * 1e3);
    std::printf("%10s %12.1f %14.1f %18.1f  %-18s %12.1f %12.1f\n", human_bytes(bytes).c_str(), ring, hier, rail,
                pick.algorithm.c_str(), pick.us, busbw / f.fabric.ranks_per_host);
  }
  std::printf("\nthe selector's pick is %s the faster of flat ring and hierarchical at every size\n\n",
              worse == 0 ? "at least as fast as" : "NOT always as fast as");
  const int outside = check_references(preset);
  return worse == 0 && outside == 0 ? 0 : 1;
}

// The command line.
struct Options {
  std::size_t hidden = 8192, batch = 8, tokens = 1;
  int layers = 32, max_tp = 16;
  std::string dtype_name = "bf16", fabric_name = "nvswitch";
  double compute_given = -1, hbm_gbps = 2700, alpha_us = -1, beta_gbps = -1, step_us = -1;
  bool calibrated = false, csv = false, compare = false;
};

void add_options(comm::cli::Parser& args, Options& o) {
  args.description("Predicts per-step all-reduce time of tensor parallelism for TP = 1, 2, 4, ... --max-tp\n"
                   "and compares it with the per-step compute time.");
  args.section("the fabric");
  args.text("--fabric", "nvswitch|nvlink|pcie|ib|tcp",
            "link preset (default nvswitch; with --compare h100-2x8, or h100-8, h100-8x8, h100-<H>x8);\n"
            "sources are printed and in examples/README.md", o.fabric_name);
  args.flag("--compare",
            "hierarchical vs flat ring all-reduce at 8 KiB - 1 GiB on a cluster preset, the\n"
            "selector's pick, and the published figures it must match",
            o.compare);
  args.flag("--calibrated", "use the link this job's communicator measured (run under commrun, >= 2 ranks)",
            o.calibrated);
  args.real("--alpha-us", "US", "override the preset's link latency", o.alpha_us, 0, true);
  args.real("--beta-gbps", "G", "override the preset's link bandwidth", o.beta_gbps, 0);
  args.real("--step-us", "US", "override the preset's per-step compute overhead", o.step_us, 0, true);
  args.section("the model and the step");
  args.integer("--layers", "N", "decoder layers (default 32)", o.layers, 1);
  args.integer("--hidden", "N", "model width (default 8192)", o.hidden, 1);
  args.integer("--batch", "N", "sequences per step (default 8)", o.batch, 1);
  args.integer("--tokens", "N", "tokens per sequence per step (default 1 = decode)", o.tokens, 1);
  args.text("--dtype", "T", "activation type (default bf16)", o.dtype_name);
  args.real("--compute-us", "US", "compute time of one step on ONE GPU; default: weight bytes / --hbm-gbps",
            o.compute_given, 0, true);
  args.real("--hbm-gbps", "G", "assumed achievable HBM bandwidth for the default (2700 = 80 % of H100 SXM)",
            o.hbm_gbps, 0);
  args.integer("--max-tp", "N", "largest TP degree (default 16)", o.max_tp, 1);
  args.section("output");
  args.flag("--csv", "machine-readable rows: tp,bytes,algorithm,allreduce_us,comm_us,compute_us", o.csv);
}

// --calibrated: the links this job's communicator measured. The slowest link
// out of rank 0 stands for the fabric: a collective runs at the pace of its
// slowest hop.
Fabric calibrated_fabric(const comm::Communicator& world) {
  if (world.size() < 2)
    throw comm::Error(comm::ErrorCode::invalid_argument,
                      "shard_planner --calibrated needs a link to measure: run it on at least 2 ranks "
                      "(commrun -n 2 shard_planner --calibrated)");
  comm::LinkInfo slow = world.link(0, 1);
  for (int p = 2; p < world.size(); ++p) {
    const comm::LinkInfo l = world.link(0, p);
    if (l.alpha_us > slow.alpha_us) slow = l;
  }
  // Measured now, or earlier and cached (see COMM_CALIBRATE in config.hpp).
  const bool measured = slow.detail.find("calibrated") != std::string::npos ||
                        slow.detail.find("from tuning file") != std::string::npos;
  return {"calibrated", slow, comm::ComputeModel{}, "the links of this job",
          measured ? "measured by the communicator (at start-up, or cached from an earlier run); host compute model"
                   : "as the transport reports them (the communicator did not calibrate); host compute model"};
}

// The fabric, the model and the compute assumption above the table.
void print_setup(const Fabric& fabric, const Options& o, bool overridden, std::size_t bytes, double weight_bytes,
                 double compute1) {
  std::printf("fabric: %s -- %s\n  alpha %.2f us, beta %.1f GB/s (%s)\n  source: %s%s\n", fabric.name,
              fabric.what, fabric.link.alpha_us, fabric.link.beta_gbps, fabric.link.detail.c_str(), fabric.source,
              overridden ? "\n  overridden on the command line: --alpha-us / --beta-gbps / --step-us" : "");
  if (fabric.gpus_per_host > 1)
    std::printf("  beyond %d GPUs: hosts of %d joined by alpha %.2f us, beta %.1f GB/s (%s)\n", fabric.gpus_per_host,
                fabric.gpus_per_host, fabric.inter.alpha_us, fabric.inter.beta_gbps, fabric.inter.detail.c_str());
  std::printf("  compute model: reduce %.0f GB/s, copy %.0f GB/s, %.2f us per step, %.2f us per collective\n",
              fabric.compute.reduce_gbps, fabric.compute.copy_gbps, fabric.compute.step_overhead_us,
              fabric.compute.op_overhead_us);
  std::printf("model: %d layers, hidden %zu, batch %zu x %zu tokens, %s: 2 all-reduces of %s per layer\n",
              o.layers, o.hidden, o.batch, o.tokens, o.dtype_name.c_str(), human_bytes(bytes).c_str());
  if (o.compute_given >= 0)
    std::printf("compute per step on one GPU: %.1f us (given)\n\n", compute1);
  else
    std::printf("compute per step on one GPU: %.1f us (assumed: %.2f GB of weights streamed at %.0f GB/s)\n\n",
                compute1, weight_bytes / 1e9, o.hbm_gbps);
  std::printf("%4s  %-20s %14s %14s %14s %8s\n", "TP", "algorithm", "allreduce us", "comm us/step",
              "compute us", "comm %");
}

// One row per TP degree (CSV or a table ending in a verdict).
void print_plan(const Fabric& fabric, const Options& o, std::size_t bytes, double compute1) {
  int dominated_from = 0;
  for (int tp = 1; tp <= o.max_tp; tp *= 2) {
    const comm::Prediction p = best(cluster(fabric, tp), bytes, fabric.compute);
    const double comm_us = p.us < 0 ? -1.0 : 2.0 * o.layers * p.us;
    const double compute_us = compute1 / tp;
    if (o.csv) {
      std::printf("%d,%zu,%s,%.4f,%.4f,%.4f\n", tp, bytes, p.algorithm.c_str(), p.us, comm_us, compute_us);
      continue;
    }
    const bool dominates = comm_us >= compute_us;
    if (dominates && dominated_from == 0) dominated_from = tp;
    std::printf("%4d  %-20s %14.2f %14.1f %14.1f %7.1f%%%s\n", tp, p.algorithm.c_str(), p.us, comm_us, compute_us,
                comm_us < 0 ? 0.0 : 100.0 * comm_us / (comm_us + compute_us),
                dominates && dominated_from == tp ? "  <- communication dominates from here" : "");
  }
  if (o.csv) return;
  if (dominated_from == 0)
    std::printf("\ncommunication stays below compute up to TP %d\n", o.max_tp);
  else if (dominated_from == 1)
    std::printf("\ncommunication dominates at every TP degree\n");
  else
    std::printf("\ncommunication dominates beyond TP %d (from TP %d on)\n", dominated_from / 2, dominated_from);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  comm::cli::Parser args("shard_planner", "shard_planner [options]");
  add_options(args, o);
  args.parse_or_exit(argc, argv);
  if (o.calibrated && args.given("--fabric")) args.fail("--fabric and --calibrated exclude each other");
  if (o.compare && o.calibrated) args.fail("--compare and --calibrated exclude each other");
  if (o.compare && !args.given("--fabric")) o.fabric_name = "h100-2x8";

  try {
    if (o.compare) return compare_hosts(o.fabric_name);
    const comm::DataType dtype = comm::parse_dtype(o.dtype_name);
    const std::size_t elem = comm::dtype_size(dtype);
    Fabric fabric{};
    comm::Communicator world;  // only with --calibrated
    if (o.calibrated) {
      comm::Config cfg = comm::Config::from_env();
      cfg.calibrate = true;  // measure alpha/beta instead of trusting the transport's nominal figures
      world = comm::Communicator::create(cfg);
      fabric = calibrated_fabric(world);
      if (world.rank() != 0) return 0;  // one table is enough
    } else {
      const auto it = std::find_if(std::begin(kFabrics), std::end(kFabrics),
                                   [&](const Fabric& f) { return o.fabric_name == f.name; });
      if (it == std::end(kFabrics)) args.fail("--fabric '" + o.fabric_name + "': use nvswitch, nvlink, pcie, ib or tcp");
      fabric = *it;
    }
    // Your own measurements beat the preset's; the reference check then
    // shows how far they move the model from the published number.
    if (o.alpha_us >= 0) fabric.link.alpha_us = o.alpha_us;
    if (o.beta_gbps > 0) fabric.link.beta_gbps = o.beta_gbps;
    if (o.step_us >= 0) fabric.compute.step_overhead_us = o.step_us;
    const bool overridden = o.alpha_us >= 0 || o.beta_gbps > 0 || o.step_us >= 0;

    const std::size_t bytes = o.batch * o.tokens * o.hidden * elem;
    // Default compute: decode streams every weight once per step. A GPT-style
    // layer has 12 * hidden^2 weights (4 h^2 attention, 8 h^2 MLP).
    const double weight_bytes = 12.0 * static_cast<double>(o.hidden) * static_cast<double>(o.hidden) *
                                static_cast<double>(elem) * o.layers;
    const double compute1 = o.compute_given >= 0 ? o.compute_given : weight_bytes / (o.hbm_gbps * 1e3);

    if (!o.csv) print_setup(fabric, o, overridden, bytes, weight_bytes, compute1);
    print_plan(fabric, o, bytes, compute1);
    if (o.csv) return 0;
    // The published figures the nvswitch preset's host (h100-8) must match.
    if (o.fabric_name == "nvswitch" && !o.calibrated && !overridden) {
      std::printf("\n");
      check_references("h100-8");
    }
    return 0;
  } catch (const comm::Error& e) {
    std::fprintf(stderr, "shard_planner: %s\n", e.what());
    return 1;
  }
}
