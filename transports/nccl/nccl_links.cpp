// Link detection for the NCCL transport: what joins this rank's GPU to each
// peer's GPU (NVSwitch, NVLink, PCIe peer-to-peer, host memory, network) and
// default alpha/beta per kind. transports/nccl/README.md documents the numbers.

#include "nccl_transport.hpp"
#include "util/c_locale.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <type_traits>

namespace comm::nccl {

namespace {

// ---- NVML, loaded at run time: optional, and absent on many containers.
// Only the few entry points and the one struct we need are declared here; the
// layout of nvmlPciInfo_t is part of NVML's stable ABI (_v2 functions).
struct NvmlPciInfo {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
using NvmlDevice = void*;
constexpr int kNvmlSuccess = 0;
constexpr unsigned kNvmlMaxLinks = 18;   // NVML_NVLINK_MAX_LINKS (Hopper has 18)
constexpr int kNvmlDeviceTypeSwitch = 2; // NVML_NVLINK_DEVICE_TYPE_SWITCH

struct Nvml {
  void* lib = nullptr;
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*by_bus)(const char*, NvmlDevice*) = nullptr;
  int (*link_state)(NvmlDevice, unsigned, int*) = nullptr;
  int (*remote_pci)(NvmlDevice, unsigned, NvmlPciInfo*) = nullptr;
  int (*remote_type)(NvmlDevice, unsigned, int*) = nullptr;
  int (*pcie_gen)(NvmlDevice, unsigned*) = nullptr;
  int (*pcie_width)(NvmlDevice, unsigned*) = nullptr;

  Nvml() {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    auto sym = [&](auto& fn, const char* name) { fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name)); };
    sym(init, "nvmlInit_v2");
    sym(shutdown, "nvmlShutdown");
    sym(by_bus, "nvmlDeviceGetHandleByPciBusId_v2");
    sym(link_state, "nvmlDeviceGetNvLinkState");
    sym(remote_pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    sym(remote_type, "nvmlDeviceGetNvLinkRemoteDeviceType");
    sym(pcie_gen, "nvmlDeviceGetMaxPcieLinkGeneration");
    sym(pcie_width, "nvmlDeviceGetMaxPcieLinkWidth");
    if (!init || !shutdown || !by_bus || init() != kNvmlSuccess) {
      dlclose(lib);
      lib = nullptr;
    }
  }
  ~Nvml() {
    if (lib) {
      shutdown();
      dlclose(lib);
    }
  }
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;
  bool ok() const noexcept { return lib != nullptr; }
};

// PCI bus ids compare by (domain, bus, device): CUDA prints a 4-digit domain
// ("0000:3b:00.0"), NVML an 8-digit one ("00000000:3B:00.0").
bool same_bus(const std::string& a, const std::string& b) {
  unsigned d1 = 0, b1 = 0, v1 = 0, d2 = 0, b2 = 0, v2 = 0;
  if (std::sscanf(a.c_str(), "%x:%x:%x", &d1, &b1, &v1) != 3) return false;
  if (std::sscanf(b.c_str(), "%x:%x:%x", &d2, &b2, &v2) != 3) return false;
  return d1 == d2 && b1 == b2 && v1 == v2;
}

// Per-link, per-direction NVLink bandwidth in GB/s by GPU generation
// (compute capability major): NVLink1 (P100) 20, NVLink2 (V100), NVLink3
// (A100) and NVLink4 (H100/H200) 25, NVLink5 (B200) 50.
double nvlink_gbps_per_link(int cc_major) {
  if (cc_major >= 10) return 50.0;
  if (cc_major >= 7) return 25.0;
  return 20.0;
}

// Achievable fraction of a raw link rate (nccl-tests busbw on H100 NVSwitch
// systems reaches ~360 of 450 GB/s without NVLS).
constexpr double kEfficiency = 0.8;

struct LocalGpu {
  std::string bus;
  int cc_major = 0;
  int switch_links = 0;        // active NVLinks that end at an NVSwitch
  std::vector<std::string> link_peers;  // bus ids of GPUs at the end of direct NVLinks
  double pcie_gbps = 0;        // from NVML; 0 = unknown
};

LocalGpu describe_local(const Nvml& nvml, const std::string& bus, int device) {
  LocalGpu g;
  g.bus = bus;
  cudaDeviceGetAttribute(&g.cc_major, cudaDevAttrComputeCapabilityMajor, device);
  if (!nvml.ok()) return g;
  NvmlDevice dev = nullptr;
  if (nvml.by_bus(bus.c_str(), &dev) != kNvmlSuccess) return g;
  for (unsigned l = 0; nvml.link_state && l < kNvmlMaxLinks; ++l) {
    int active = 0;
    if (nvml.link_state(dev, l, &active) != kNvmlSuccess || !active) continue;
    int type = -1;
    if (nvml.remote_type && nvml.remote_type(dev, l, &type) == kNvmlSuccess && type == kNvmlDeviceTypeSwitch) {
      ++g.switch_links;
      continue;
    }
    NvmlPciInfo pci{};
    if (nvml.remote_pci && nvml.remote_pci(dev, l, &pci) == kNvmlSuccess) g.link_peers.emplace_back(pci.bus_id);
  }
  unsigned gen = 0, width = 0;
  if (nvml.pcie_gen && nvml.pcie_width && nvml.pcie_gen(dev, &gen) == kNvmlSuccess &&
      nvml.pcie_width(dev, &width) == kNvmlSuccess && gen > 0 && width > 0) {
    // Per-lane, per-direction GB/s after line coding: gen1 0.25, gen2 0.5, gen3 0.985, then doubling.
    const double lane = gen == 1 ? 0.25 : gen == 2 ? 0.5 : 0.985 * static_cast<double>(1u << (gen - 3));
    g.pcie_gbps = lane * width * kEfficiency;
  }
  return g;
}

// The network NCCL will use between hosts: NCCL_NET=Socket or NCCL_IB_DISABLE=1
// mean TCP sockets; otherwise NCCL prefers InfiniBand/RoCE, assumed present.
LinkInfo network_link() {
  const char* net = std::getenv("NCCL_NET");
  const char* ib_off = std::getenv("NCCL_IB_DISABLE");
  const bool socket = (net && std::strcmp(net, "Socket") == 0) || (ib_off && std::strcmp(ib_off, "1") == 0);
  LinkInfo l = default_link(socket ? LinkKind::tcp : LinkKind::ib);
  l.detail = socket ? "other host, NCCL socket transport" : "other host, NCCL IB/RoCE transport (assumed)";
  return l;
}

}  // namespace

LinkInfo default_link(LinkKind kind) {
  // alpha = NCCL's base latency for a launch (tuning.cc baseLat, Ring/LL:
  // 6.6 us) plus one hop of its hardware latency (hwLat, LL: NVLink 0.6,
  // PCI 1.0, NET 2.7 us); beta = achievable per-direction bandwidth.
  switch (kind) {
    case LinkKind::self: return {kind, 2.0, 1000.0, "same GPU (device memory copy)"};
    case LinkKind::nvswitch: return {kind, 7.2, 360.0, "NVSwitch (H100 NVLink4: 18 links x 25 GB/s x 0.8)"};
    case LinkKind::nvlink: return {kind, 7.2, 120.0, "NVLink (6 links x 25 GB/s x 0.8)"};
    case LinkKind::pcie: return {kind, 7.6, 20.0, "PCIe peer-to-peer (gen4 x16 x 0.8)"};
    case LinkKind::shm: return {kind, 7.6, 10.0, "no GPU peer access: through host shared memory"};
    case LinkKind::ib: return {kind, 9.3, 40.0, "InfiniBand NDR 400 Gb/s x 0.8"};
    case LinkKind::tcp: return {kind, 30.0, 2.5, "TCP sockets (25 GbE x 0.8)"};
  }
  return {kind, 10.0, 1.0, "unknown"};
}

std::vector<LinkInfo> detect_links(int rank, const std::vector<PeerIdentity>& peers) {
  int device = 0;
  cudaGetDevice(&device);
  const Nvml nvml;
  const PeerIdentity& me = peers[static_cast<std::size_t>(rank)];
  const LocalGpu local = describe_local(nvml, me.bus_id, device);

  std::vector<LinkInfo> row(peers.size());
  for (std::size_t p = 0; p < peers.size(); ++p) {
    LinkInfo& l = row[p];
    if (static_cast<int>(p) == rank) {
      l = default_link(LinkKind::self);
      continue;
    }
    if (peers[p].host != me.host) {
      l = network_link();
      continue;
    }
    if (same_bus(peers[p].bus_id, me.bus_id)) {
      l = default_link(LinkKind::self);
      l.detail = "same GPU as this rank (NCCL rejects duplicate GPUs in one communicator)";
      continue;
    }
    // CUDA answers only for GPUs this process can see (CUDA_VISIBLE_DEVICES);
    // NVML sees every GPU of the host.
    int peer_dev = -1, access = 0, atomics = 0;
    const bool visible = cudaDeviceGetByPCIBusId(&peer_dev, peers[p].bus_id.c_str()) == cudaSuccess;
    if (visible) {
      cudaDeviceGetP2PAttribute(&access, cudaDevP2PAttrAccessSupported, device, peer_dev);
      cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, device, peer_dev);
    }
    cudaGetLastError();  // the queries above are probes; keep no sticky error
    int direct = 0;
    for (const auto& b : local.link_peers) direct += same_bus(b, peers[p].bus_id) ? 1 : 0;
    const double per_link = nvlink_gbps_per_link(local.cc_major);
    if (local.switch_links > 0) {
      l = default_link(LinkKind::nvswitch);
      l.beta_gbps = local.switch_links * per_link * kEfficiency;
      l.detail = "NVSwitch, " + std::to_string(local.switch_links) + " NVLinks (NVML)";
    } else if (direct > 0) {
      l = default_link(LinkKind::nvlink);
      l.beta_gbps = direct * per_link * kEfficiency;
      l.detail = "NVLink, " + std::to_string(direct) + " direct links (NVML)";
    } else if (!nvml.ok() && access && atomics) {
      // Without NVML: native peer atomics are offered over NVLink, not over PCIe.
      l = default_link(LinkKind::nvlink);
      l.detail = "NVLink (inferred from CUDA peer atomics; NVML unavailable)";
    } else if (access || (!visible && !nvml.ok())) {
      l = default_link(LinkKind::pcie);
      if (local.pcie_gbps > 0) l.beta_gbps = local.pcie_gbps;
      l.detail = access ? "PCIe peer-to-peer" : "PCIe (assumed: peer GPU not visible, NVML unavailable)";
    } else {
      l = default_link(LinkKind::shm);
    }
  }
  return row;
}

std::string encode_links(const std::vector<LinkInfo>& row) {
  std::string out;
  for (const auto& l : row) {
    out += to_string(l.kind);
    // Shortest round-trip text (to_chars, not the locale's printf): every rank sees the same numbers.
    out += " " + util::shortest(l.alpha_us) + " " + util::shortest(l.beta_gbps) + " ";
    for (char c : l.detail) out += c == '\n' ? ' ' : c;
    out += '\n';
  }
  return out;
}

std::vector<LinkInfo> decode_links(const std::string& text, int expected) {
  std::vector<LinkInfo> row;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls = util::c_istream(line);
    std::string kind, alpha, beta;
    ls >> kind >> alpha >> beta;
    LinkInfo l;
    l.kind = parse_link_kind(kind);
    l.alpha_us = util::parse_double(alpha).value_or(0);
    l.beta_gbps = util::parse_double(beta).value_or(0);
    std::getline(ls >> std::ws, l.detail);
    row.push_back(std::move(l));
  }
  if (static_cast<int>(row.size()) != expected)
    throw Error(ErrorCode::store_failure, "nccl transport: a rank published " + std::to_string(row.size()) +
                                              " links, expected " + std::to_string(expected) +
                                              " (ranks disagree on the group size?)");
  return row;
}

}  // namespace comm::nccl
