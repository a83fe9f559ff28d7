// Fabric presets for planning (comm/model.hpp): H100 hosts on NVSwitch, one
// 400 Gb/s NIC per GPU between hosts, with what a GPU collective pays beyond
// the wire. The figures are chosen so that the cost model reproduces
// published measurements within 30 % (tests/unit/test_hierarchy.cpp checks
// each; examples/shard_planner --compare prints them):
//   - NCCL all-reduce on 8 x H100 NVSwitch, small messages: ~15-20 us;
//   - NCCL ring all-reduce bus bandwidth on 8 x H100 at >= 1 GiB: ~360-370 GB/s
//     (NVIDIA/nccl-tests#212, NVIDIA/nccl#1455; ~475 GB/s with NVLink SHARP,
//     NVIDIA/nccl-tests#290);
//   - custom one-shot kernels on 8 x H100: ~6-8 us up to 32 KiB, ~17 us at 256 KiB
//     (TensorRT-LLM's one-shot in sgl-project/sglang#2904; 6-10 us is the range
//     usually quoted for 8-256 KiB);
//   - 2 x 8 H100 over NDR 400 Gb/s: 46-48 GB/s of bus bandwidth per NIC
//     (NVIDIA/nccl-tests#290).

#include <comm/error.hpp>
#include <comm/model.hpp>

#include <charconv>

namespace comm {
namespace {

// NVLink 4 through NVSwitch: NCCL's per-hop latency model for NVLink, LL
// protocol (src/graph/tuning.cc: 0.6 us); 450 GB/s is the line rate one way,
// ~370 GB/s what NCCL's ring achieves (NVIDIA/nccl-tests#212).
const LinkInfo kNvSwitch{LinkKind::nvswitch, 0.6, 450.0, "preset: H100 NVLink 4 via NVSwitch"};
// NDR InfiniBand 400 Gb/s = 50 GB/s raw, 46-48 GB/s through NCCL
// (NVIDIA/nccl-tests#290); NCCL's latency model puts a network hop at 2.7 us.
const LinkInfo kNdr{LinkKind::ib, 2.7, 48.0, "preset: NDR InfiniBand 400 Gb/s, GPUDirect RDMA"};
// A GPU reduces and copies at HBM speed (3.35 TB/s: ~1 TB/s of reduce output,
// ~1.5 TB/s of copy). Beyond the wire every collective pays its kernel launch
// and completion (3 us) and every step a flag handshake between GPUs (0.25 us),
// which is what brings a 14-step ring on 8 GPUs to NCCL's ~15 us.
constexpr ComputeModel kH100{1000.0, 1500.0, 0.25, 3.0};

FabricPreset h100(int hosts) {
  FabricPreset p;
  p.fabric = HostFabric{hosts, 8, kNvSwitch, kNdr};
  p.compute = kH100;
  if (hosts == 1) {
    p.name = "h100-8";
    p.what = "8 x H100 SXM, NVLink 4 through NVSwitch (one DGX/HGX H100)";
  } else {
    p.name = "h100-" + std::to_string(hosts) + "x8";
    p.what = std::to_string(hosts) + " hosts of 8 x H100 SXM on NVSwitch, one NDR 400 Gb/s InfiniBand NIC per GPU";
  }
  p.source =
      "NVSwitch: alpha 0.6 us (NCCL tuning model, NVLink hop), beta 450 GB/s (NVLink 4 one way; NCCL ring busbw ~370, "
      "nccl-tests#212); NIC: alpha 2.7 us, beta 48 GB/s (46-48 GB/s per NDR NIC, nccl-tests#290); GPU: 3 us launch "
      "per collective, 0.25 us flag handshake per step, reduce 1 TB/s, copy 1.5 TB/s (H100 HBM3)";
  return p;
}

}  // namespace

std::vector<std::string> fabric_preset_names() { return {"h100-8", "h100-2x8", "h100-8x8", "h100-<H>x8"}; }

FabricPreset fabric_preset(std::string_view name) {
  if (name == "h100-8") return h100(1);
  constexpr std::string_view kPrefix = "h100-", kSuffix = "x8";
  if (name.starts_with(kPrefix) && name.ends_with(kSuffix) && name.size() > kPrefix.size() + kSuffix.size()) {
    const std::string_view num = name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
    int hosts = 0;
    const auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), hosts);
    if (ec == std::errc{} && end == num.data() + num.size() && hosts >= 1 && hosts <= 1024) return h100(hosts);
  }
  throw Error(ErrorCode::invalid_argument, "no fabric preset '" + std::string(name) +
                                               "' (presets: h100-8, h100-2x8, h100-8x8, h100-<H>x8 for 1 to 1024 hosts)");
}

}  // namespace comm
