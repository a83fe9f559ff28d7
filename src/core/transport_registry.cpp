// Transports by name. Built-in ones register on first use; any other name is
// looked up as a plugin module libcomm_<name>.so (NCCL ships that way so the
// core never depends on CUDA libraries).

#include "core/peer_table.hpp"
#include "core/builtin_transports.hpp"
#include "util/log.hpp"
#include "util/transport_name.hpp"

#include <comm/transport.hpp>

#include <cstdlib>
#include <dlfcn.h>
#include <map>
#include <mutex>
#include <string>

namespace comm {

Transport::~Transport() = default;
NativeCollectives::~NativeCollectives() = default;
StreamEngine::~StreamEngine() = default;
DirectMemory::~DirectMemory() = default;
PeerReads::~PeerReads() = default;

namespace {
[[noreturn]] void no_host_p2p(const Transport& t, const char* what, int peer) {
  throw Error(ErrorCode::unsupported,
              std::string(t.name()) + " transport: " + what + " rank " + std::to_string(peer) +
                  " through the host executor is not possible: it is stream-ordered (TransportCaps::stream_ordered); "
                  "its work runs through its stream engine or its native collectives");
}
}  // namespace

void Transport::isend(int peer, std::uint64_t, const void*, std::size_t, Completion&) {
  no_host_p2p(*this, "isend to", peer);
}

void Transport::irecv(int peer, std::uint64_t, void*, std::size_t, Completion&) {
  no_host_p2p(*this, "irecv from", peer);
}

namespace {

// Names a user may ask for that this build can know about even when absent.
constexpr std::string_view kKnownTransports[] = {"local", "auto", "shm", "ucx", "ofi", "gloo", "nccl", "mpi"};

struct Registry {
  std::mutex mu;
  std::map<std::string, TransportFactory, std::less<>> factories;
  std::map<std::string, std::string, std::less<>> unavailable;  // name -> reason
  std::map<std::string, StoreScheme, std::less<>> store_schemes;
  std::map<std::string, std::string, std::less<>> default_schemes;  // transport -> scheme

  Registry() {
    pending.push_back(register_local_transport);
#if COMM_HAVE_SHM
    pending.push_back(register_shm_transport);
#else
    unavailable["shm"] = "this build of comm has no shm transport (it needs Linux; configure without COMM_WITH_SHM=OFF)";
#endif
    pending.push_back(register_auto_transport);
#if COMM_HAVE_UCX
    pending.push_back(register_ucx_transport);
#else
    unavailable["ucx"] = "this build of comm has no UCX support (configure with libucx-dev installed)";
#endif
#if COMM_HAVE_OFI
    pending.push_back(register_ofi_transport);
#else
    unavailable["ofi"] = "this build of comm has no libfabric support (configure with libfabric-dev installed)";
#endif
#if COMM_HAVE_GLOO
    pending.push_back(register_gloo_transport);
#else
    unavailable["gloo"] = "this build of comm has no Gloo support (configure with libgloo-dev installed)";
#endif
#if COMM_HAVE_MPI
    pending.push_back(register_mpi_transport);
#else
    unavailable["mpi"] = "this build of comm has no MPI support (configure with libopenmpi-dev installed)";
#endif
  }

  // Registration functions of the built-in transports, run on first use by
  // registry() (they call register_transport, which needs the registry built).
  std::vector<void (*)()> pending;
};

// The registry without the built-ins guarantee: what register_transport uses,
// because the built-in registration functions themselves call it.
Registry& raw_registry() {
  static Registry r;
  return r;
}

Registry& registry() {
  Registry& r = raw_registry();
  static std::once_flag once;
  std::call_once(once, [&r] {
    for (auto fn : r.pending) fn();
    r.pending.clear();
  });
  return r;
}

// The directory holding libcomm itself, for finding plugins installed beside it.
std::string library_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&library_dir), &info) && info.dli_fname) {
    std::string path = info.dli_fname;
    auto slash = path.rfind('/');
    if (slash != std::string::npos) return path.substr(0, slash);
  }
  return {};
}

// Tries to load libcomm_<name>.so; returns "" on success or why it failed.
std::string load_plugin(const std::string& name) {
  const std::string file = "libcomm_" + name + ".so";
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("COMM_PLUGIN_PATH")) {
    std::string paths = env;
    std::size_t start = 0;
    while (start <= paths.size()) {
      auto end = paths.find(':', start);
      if (end == std::string::npos) end = paths.size();
      if (end > start) candidates.push_back(paths.substr(start, end - start) + "/" + file);
      start = end + 1;
    }
  }
  if (auto dir = library_dir(); !dir.empty()) candidates.push_back(dir + "/" + file);
  candidates.push_back(file);
  std::string errors;
  for (const auto& path : candidates) {
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      errors += std::string(errors.empty() ? "" : "; ") + dlerror();
      continue;
    }
    auto* reg = reinterpret_cast<void (*)()>(dlsym(handle, "comm_plugin_register"));
    if (!reg) return path + " has no comm_plugin_register()";
    reg();  // handle intentionally kept open: the factory's code lives there
    COMM_INFO("loaded transport plugin " << path);
    return {};
  }
  return "could not load " + file + " (" + errors + ")";
}

}  // namespace

void register_transport(std::string name, TransportFactory factory) {
  if (!util::is_plain_transport_name(name))
    throw Error(ErrorCode::invalid_argument, "register_transport: '" + name + "' is not valid: expected " +
                                                 std::string(util::kTransportNameRule));
  auto& r = raw_registry();
  std::lock_guard lk(r.mu);
  r.unavailable.erase(name);
  r.factories[std::move(name)] = std::move(factory);
}

std::vector<std::string> available_transports() {
  auto& r = registry();
  for (std::string_view known : kKnownTransports) transport_unavailable_reason(known);
  std::lock_guard lk(r.mu);
  std::vector<std::string> out;
  for (auto& [name, f] : r.factories) out.push_back(name);
  return out;
}

std::string transport_unavailable_reason(std::string_view name) {
  // Checked before anything is looked up: the name becomes part of a file name.
  if (!util::is_plain_transport_name(name))
    return "'" + std::string(name) + "' is not valid: expected " + std::string(util::kTransportNameRule);
  auto& r = registry();
  {
    std::lock_guard lk(r.mu);
    if (r.factories.count(name)) return {};
    if (auto it = r.unavailable.find(name); it != r.unavailable.end()) return it->second;
  }
  // Not built in: try a plugin once and remember the outcome.
  std::string why = load_plugin(std::string(name));
  std::lock_guard lk(r.mu);
  if (r.factories.count(name)) return {};
  if (why.empty()) why = "plugin libcomm_" + std::string(name) + ".so did not register '" + std::string(name) + "'";
  r.unavailable[std::string(name)] = why;
  return why;
}

namespace detail {

std::string default_transport(const PeerTable& peers) {
  if (peers.one_process()) return "local";
  // Ranks in separate processes: per pair the best transport that reaches it.
  COMM_INFO("no transport named (COMM_TRANSPORT / Config::transport): ranks are separate processes, using 'auto'");
  return "auto";
}

}  // namespace detail

void register_store_scheme(std::string scheme, StoreScheme make) {
  auto& r = raw_registry();
  std::lock_guard lk(r.mu);
  r.store_schemes[std::move(scheme)] = std::move(make);
}

std::shared_ptr<Store> make_scheme_store(const Config& config) {
  StoreScheme make;
  {
    auto& r = registry();
    std::lock_guard lk(r.mu);
    const auto it = r.store_schemes.find(config.store);
    if (it != r.store_schemes.end()) make = it->second;
  }
  if (make) return make(config);
  if (config.store == "mpi")
    throw Error(ErrorCode::invalid_config, "COMM_STORE='mpi' (meet through MPI) needs comm built with MPI: " +
                                               transport_unavailable_reason("mpi"));
  return nullptr;
}

void set_default_store_scheme(std::string transport, std::string scheme) {
  auto& r = raw_registry();
  std::lock_guard lk(r.mu);
  r.default_schemes[std::move(transport)] = std::move(scheme);
}

std::string default_store_scheme(std::string_view transport) {
  auto& r = registry();
  std::lock_guard lk(r.mu);
  const auto it = r.default_schemes.find(transport);
  return it == r.default_schemes.end() ? std::string() : it->second;
}

std::string available_transports_list() {
  std::string names;
  for (auto& n : available_transports()) names += (names.empty() ? "" : ", ") + n;
  return names;
}

std::unique_ptr<Transport> create_transport(std::string_view name, const TransportInit& init) {
  if (std::string why = transport_unavailable_reason(name); !why.empty()) {
    // Name where the name came from: the environment (also what commrun
    // --transport sets) when it says so, else the code that filled Config.
    const char* env = std::getenv("COMM_TRANSPORT");
    const std::string source = env && name == env ? "COMM_TRANSPORT" : "Config::transport";
    throw Error(ErrorCode::unknown_transport, source + "='" + std::string(name) + "': transport not available: " +
                                                  why + " (available: " + available_transports_list() + ")");
  }
  TransportFactory factory;
  {
    auto& r = registry();
    std::lock_guard lk(r.mu);
    factory = r.factories.find(name)->second;
  }
  if (init.peers || (!init.store && init.size != 1)) return factory(init);
  // Created outside a communicator (tests, tools): meet the peers here.
  Config self = init.config ? *init.config : Config{};
  self.rank = init.rank;
  self.world_size = init.size;
  TransportInit with_peers = init;
  with_peers.peers = std::make_shared<const PeerTable>(
      init.store ? detail::exchange_peers(*init.store, self, self.timeout) : detail::self_peer_table(self));
  return factory(with_peers);
}

}  // namespace comm
