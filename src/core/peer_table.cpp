// The peer table: host identity, the one exchange at creation, and hosts.

#include "core/peer_table.hpp"

#include <comm/error.hpp>

#include "util/process.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

namespace comm {
namespace {

std::string read_first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string this_hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

}  // namespace

// Two ranks share memory and loopback only on one kernel (boot id) and in one
// network namespace (emulated hosts and containers have their own); the
// hostname alone is not unique across containers.
std::string host_identity() {
  std::string id = this_hostname();
  id += '|';
  id += read_first_line("/proc/sys/kernel/random/boot_id");
  char ns[128] = {};
  const ssize_t n = ::readlink("/proc/self/ns/net", ns, sizeof ns - 1);
  id += '|';
  if (n > 0) id.append(ns, static_cast<std::size_t>(n));
  return id;
}

bool PeerTable::one_process() const {
  for (int r = 1; r < size(); ++r)
    if (!same_process(0, r)) return false;
  return true;
}

void PeerTable::index_hosts() {
  hosts.clear();
  std::map<std::string, int> index;
  for (int r = 0; r < size(); ++r) {
    PeerInfo& p = peers[static_cast<std::size_t>(r)];
    auto [it, fresh] = index.emplace(p.host, static_cast<int>(hosts.size()));
    if (fresh) hosts.emplace_back();
    auto& members = hosts[static_cast<std::size_t>(it->second)];
    p.host_index = it->second;
    p.local_rank = static_cast<int>(members.size());
    members.push_back(r);
  }
}

std::string PeerTable::describe() const {
  std::string s;
  for (std::size_t h = 0; h < hosts.size(); ++h) {
    s += "host " + std::to_string(h) + " (" + (*this)[hosts[h].front()].hostname + "): rank";
    s += hosts[h].size() == 1 ? " " : "s ";
    for (std::size_t i = 0; i < hosts[h].size(); ++i) s += (i ? ", " : "") + std::to_string(hosts[h][i]);
    s += '\n';
  }
  return s;
}

namespace detail {
namespace {
std::mutex g_override_mu;
std::function<std::string(const Config&)> g_host_override;
}  // namespace

void set_host_override_for_tests(std::function<std::string(const Config&)> host) {
  std::lock_guard lk(g_override_mu);
  g_host_override = std::move(host);
}

PeerInfo describe_self(const Config& config) {
  PeerInfo p;
  p.host = host_identity();
  p.hostname = this_hostname();
  {
    std::lock_guard lk(g_override_mu);
    if (g_host_override)
      if (std::string fake = g_host_override(config); !fake.empty()) p.host = p.hostname = fake;
  }
  p.pid = static_cast<std::int64_t>(::getpid());
  if (const auto st = detail::read_process_stat(static_cast<long>(p.pid))) p.start_ticks = st->start_ticks;
  p.pid_namespace = detail::pid_namespace();
  p.device = config.device;
  return p;
}

// One field per line; host identities and hostnames hold no newlines.
std::string serialize_peer(const PeerInfo& p) {
  return p.host + '\n' + p.hostname + '\n' + std::to_string(p.pid) + '\n' + std::to_string(p.device) + '\n' +
         std::to_string(p.start_ticks) + '\n' + p.pid_namespace + '\n';
}

PeerInfo parse_peer(const std::string& text, int from) {
  std::istringstream in(text);
  PeerInfo p;
  std::string pid, device, start_ticks;
  const auto number = [&](const std::string& s, auto& out) {
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc{} && end == s.data() + s.size();
  };
  if (!std::getline(in, p.host) || !std::getline(in, p.hostname) || !std::getline(in, pid) ||
      !std::getline(in, device) || !std::getline(in, start_ticks) || !std::getline(in, p.pid_namespace) ||
      !number(pid, p.pid) || !number(device, p.device) || !number(start_ticks, p.start_ticks))
    throw Error(ErrorCode::store_failure, "peer exchange: malformed entry from rank " + std::to_string(from) +
                                              " (is it running another version of comm?)");
  return p;
}

PeerTable self_peer_table(const Config& config) {
  PeerTable t;
  t.peers.push_back(describe_self(config));
  t.index_hosts();
  return t;
}

PeerTable exchange_peers(Store& store, const Config& config, std::chrono::milliseconds timeout) {
  store.set("peer/" + std::to_string(config.rank), serialize_peer(describe_self(config)));
  PeerTable t;
  t.peers.reserve(static_cast<std::size_t>(config.world_size));
  for (int r = 0; r < config.world_size; ++r)
    t.peers.push_back(parse_peer(store.get("peer/" + std::to_string(r), timeout), r));
  t.index_hosts();
  return t;
}

}  // namespace detail
}  // namespace comm
