// COMM_STORE=mpi: meeting through MPI. comm's Store is asynchronous (a rank
// sets a key, another reads it whenever it likes; a split sub-group meets
// without the others), which no MPI collective expresses, so the store stays
// our TCP store, hosted by rank 0; MPI only tells every rank where it is: rank
// 0 broadcasts its address, port and a fresh token. Every MPI call here is
// non-blocking and bounded by Config::timeout, or watched.

#include "mpi_transport.hpp"

#include <comm/store.hpp>

#include <charconv>
#include <cstring>
#include <random>
#include <unistd.h>

namespace comm::mpi_detail {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kMessageBytes = 512;  // "host\nport\ntoken" or "!error"

std::string fresh_token() {
  std::random_device rd;
  std::string t;
  for (int i = 0; i < 4; ++i) {
    char buf[9];
    std::snprintf(buf, sizeof buf, "%08x", static_cast<unsigned>(rd()));
    t += buf;
  }
  return t;
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

// A bounded collective on `comm`: `start` posts it; times out naming `what`.
template <class Start>
void bounded(Start&& start, std::chrono::milliseconds timeout, const std::string& what) {
  MPI_Request req = MPI_REQUEST_NULL;
  {
    CallLock lock;
    check(start(&req), what);
  }
  if (!test_until(req, Clock::now() + timeout, what)) {
    record_failure(what + " timed out");
    throw Error(ErrorCode::store_failure, what + ": not every process arrived within the timeout (MPI does not say "
                                                 "which); every rank must create the communicator");
  }
}

// Where rank 0's store listens; "!reason" if it could not start one.
std::string serve(const Config& config, bool one_host, std::shared_ptr<Store>& store) {
  try {
    TcpStoreOptions opt;
    opt.host = !config.iface.empty() ? config.iface : one_host ? std::string("127.0.0.1") : host_name();
    opt.port = 0;
    opt.is_server = true;
    opt.bind = config.store_bind;
    opt.token = fresh_token();
    opt.connect_timeout = config.timeout;
    store = make_tcp_store(opt);
    const std::string msg = opt.host + "\n" + std::to_string(tcp_store_port(*store)) + "\n" + opt.token;
    if (msg.size() >= kMessageBytes) return "!the store's host name '" + opt.host + "' is too long";
    return msg;
  } catch (const Error& e) {
    return std::string("!") + e.what();
  }
}

}  // namespace

std::shared_ptr<Store> make_bootstrap_store(const Config& config) {
  const MPI_Comm base = base_comm(&config);
  const std::string base_name = describe_base(&config);
  int rank = 0, size = 0;
  {
    CallLock lock;
    check(MPI_Comm_rank(base, &rank), "COMM_STORE=mpi: MPI_Comm_rank");
    check(MPI_Comm_size(base, &size), "COMM_STORE=mpi: MPI_Comm_size");
  }
  if (config.rank != rank || config.world_size != size)
    throw Error(ErrorCode::invalid_config,
                "the Config says rank " + std::to_string(config.rank) + " of " + std::to_string(config.world_size) +
                    ", but MPI says this process is rank " + std::to_string(rank) + " of " + std::to_string(size) +
                    " in " + base_name +
                    "; under mpirun leave COMM_RANK/COMM_WORLD_SIZE (and RANK/WORLD_SIZE) unset, build the Config "
                    "with comm::mpi::config(), or start the job with mpirun -np " +
                    std::to_string(config.world_size));
  if (size == 1) return make_memory_store();

  // Everyone is here before anything blocks; then: one host or several?
  bounded([&](MPI_Request* r) { return MPI_Ibarrier(base, r); }, config.timeout, "COMM_STORE=mpi: MPI_Ibarrier");
  int local_size = 0;
  {
    CallLock lock;
    MPI_Comm local = MPI_COMM_NULL;
    check(MPI_Comm_split_type(base, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local),
          "COMM_STORE=mpi: MPI_Comm_split_type");
    MPI_Comm_size(local, &local_size);
    MPI_Comm_free(&local);
  }
  const bool one_host = local_size == size;

  std::shared_ptr<Store> store;
  char message[kMessageBytes] = {};
  if (rank == 0) {
    const std::string msg = serve(config, one_host, store);
    std::memcpy(message, msg.data(), std::min(msg.size(), kMessageBytes - 1));
  }
  bounded([&](MPI_Request* r) { return MPI_Ibcast(message, static_cast<int>(kMessageBytes), MPI_CHAR, 0, base, r); },
          config.timeout, "COMM_STORE=mpi: MPI_Ibcast of the store address");
  const std::string msg(message);
  if (msg.starts_with("!"))
    throw Error(ErrorCode::store_failure, "COMM_STORE=mpi: rank 0 could not start the store: " + msg.substr(1));
  if (rank == 0) return store;

  const auto a = msg.find('\n');
  const auto b = msg.find('\n', a == std::string::npos ? a : a + 1);
  if (a == std::string::npos || b == std::string::npos)
    throw Error(ErrorCode::store_failure, "COMM_STORE=mpi: malformed store address from rank 0: '" + msg + "'");
  TcpStoreOptions opt;
  opt.host = msg.substr(0, a);
  unsigned port = 0;
  const auto [end, ec] = std::from_chars(msg.data() + a + 1, msg.data() + b, port);
  if (ec != std::errc{} || end != msg.data() + b || port == 0 || port > 65535)
    throw Error(ErrorCode::store_failure, "COMM_STORE=mpi: malformed store port from rank 0: '" + msg + "'");
  opt.port = static_cast<std::uint16_t>(port);
  opt.is_server = false;
  opt.token = msg.substr(b + 1);
  opt.connect_timeout = config.timeout;
  return make_tcp_store(opt);
}

}  // namespace comm::mpi_detail
