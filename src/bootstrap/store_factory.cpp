// make_store: the store a Config names.

#include "core/builtin_transports.hpp"
#include "util/process.hpp"
#include "util/socket_util.hpp"

#include <comm/config.hpp>
#include <comm/error.hpp>
#include <comm/store.hpp>

#include <cstdlib>
#include <string>

namespace comm {
namespace {

// COMM_STORE_PID="<pid>:<start ticks>:<boot id>:<pid namespace>", set by
// commrun for the ranks it starts: the store's host process. Used only when
// it names a process of this boot and pid namespace (else the pid means
// nothing here); malformed values are ignored, as the variable is a hint.
void watch_server_process(TcpStoreOptions& opt) {
  const char* v = std::getenv("COMM_STORE_PID");
  if (!v) return;
  const std::string text = v;
  const auto a = text.find(':'), b = text.find(':', a + 1), c = text.find(':', b + 1);
  if (a == std::string::npos || b == std::string::npos || c == std::string::npos) return;
  if (text.substr(b + 1, c - b - 1) != detail::boot_id() || text.substr(c + 1) != detail::pid_namespace()) return;
  try {
    opt.server_pid = std::stol(text.substr(0, a));
    opt.server_start_ticks = std::stoull(text.substr(a + 1, b - a - 1));
  } catch (const std::exception&) {
    opt.server_pid = 0;
  }
}

}  // namespace

std::shared_ptr<Store> make_store(const Config& config) {
  const std::string& s = config.store;
  if (s.empty())
    throw Error(ErrorCode::invalid_config,
                "no store configured: set COMM_STORE to host:port (rank 0 hosts a TCP store) or file:/shared/dir, "
                "or run under commrun/torchrun");
  if (auto store = make_scheme_store(config)) return store;  // e.g. "mpi"
  if (s.starts_with("file:")) {
    const std::string dir = s.substr(5);
    if (dir.empty())
      throw Error(ErrorCode::invalid_config, "COMM_STORE='" + s + "' names no directory (use file:/shared/dir)");
    return make_file_store(dir);
  }
  const detail::HostPort hp = detail::parse_host_port(s, "COMM_STORE");
  TcpStoreOptions opt;
  opt.host = hp.host;
  opt.port = hp.port;
  opt.is_server = config.rank == 0;
  opt.bind = config.store_bind;
  opt.token = config.store_token;
  opt.connect_timeout = config.timeout;
  opt.rank = config.rank;  // the server checks that the ranks agree on the world
  opt.world_size = config.world_size;
  if (!opt.is_server) watch_server_process(opt);
  if (!opt.is_server && opt.port == 0)
    throw Error(ErrorCode::invalid_config, "COMM_STORE='" + s + "' has port 0: rank " +
                                               std::to_string(config.rank) +
                                               " is a client and needs the port rank 0 listens on");
  return make_tcp_store(opt);
}

}  // namespace comm
