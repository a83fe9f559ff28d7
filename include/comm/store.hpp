#pragma once
/// \file store.hpp
/// The bootstrap key-value store through which ranks meet. All methods are
/// thread safe. Every blocking method takes a timeout and throws
/// comm::Error(timeout) naming the missing keys when it expires, or
/// comm::Error(store_failure) when the store cannot be reached.

#include <comm/export.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace comm {

class COMM_API Store {
 public:
  virtual ~Store();
  /// Sets key to value (overwrites). Values are arbitrary bytes.
  virtual void set(const std::string& key, const std::string& value) = 0;
  /// Returns the value of key, waiting up to `timeout` for it to be set.
  virtual std::string get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  /// Waits until every key exists.
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  /// Atomically adds delta to the integer stored at key (missing = 0) and
  /// returns the new value.
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;
  /// Non-blocking: true if key exists.
  virtual bool check(const std::string& key) = 0;
  /// Removes key; true if it existed.
  virtual bool erase(const std::string& key) = 0;
};

/// An in-memory store for ranks that are threads of one process.
COMM_API std::shared_ptr<Store> make_memory_store();

/// A view of `base` in which every key is prefixed by `prefix` (sub-groups,
/// per-communicator namespaces).
COMM_API std::shared_ptr<Store> make_prefix_store(std::shared_ptr<Store> base, std::string prefix);

}  // namespace comm

namespace comm {

struct Config;

/// Options of the TCP store. Rank 0 (is_server) hosts it; clients connect with
/// retry until `connect_timeout`.
struct TcpStoreOptions {
  std::string host = "127.0.0.1";  ///< address clients connect to
  std::uint16_t port = 0;          ///< 0 on the server: pick a free port (see port())
  bool is_server = false;
  std::string bind;                ///< server listen address; "" = host
  std::string token;               ///< shared secret; "" = none
  std::chrono::milliseconds connect_timeout{60'000};
  std::size_t max_key_bytes = 4096;
  std::size_t max_value_bytes = std::size_t{64} << 20;
  std::size_t max_connections = 4096;
  /// Server: connections that have not authenticated yet, at most (the
  /// oldest is closed to admit a new one); 0 = a quarter of the file
  /// descriptor limit (RLIMIT_NOFILE), at most 256, so that abusive clients
  /// cannot exhaust the server process's descriptors.
  std::size_t max_unauthenticated = 0;
  /// This process's rank and the world size it was started for; make_store
  /// fills them from the Config. The server refuses a rank claimed by two
  /// processes, or a world size that differs from its own, and then fails
  /// every rank's store requests with ErrorCode::invalid_config naming both.
  /// -1 / 0: not said (no check).
  /// The server also records a rank whose connections close without the
  /// goodbye the store's destructor sends, so that ranks waiting for its keys
  /// learn that it died (the core reads it).
  int rank = -1;
  int world_size = 0;
  /// The server's process on this host, if known (commrun passes it in
  /// COMM_STORE_PID): while it cannot connect, a client stops retrying as
  /// soon as that process has exited. 0: unknown. `server_start_ticks`
  /// guards against pid reuse (field 22 of /proc/<pid>/stat; 0: unchecked).
  long server_pid = 0;
  unsigned long long server_start_ticks = 0;
};

/// A store served over TCP. The server runs on a background thread owned by
/// the returned object (the server process is also a client of itself).
COMM_API std::shared_ptr<Store> make_tcp_store(const TcpStoreOptions& options);
/// The port a TCP store (server or client) is using; 0 for other stores.
COMM_API std::uint16_t tcp_store_port(const Store& store) noexcept;

/// A store in a directory on a (shared) filesystem; removes what it created
/// when the last rank that opened it is destroyed.
COMM_API std::shared_ptr<Store> make_file_store(const std::string& directory);

/// The store named by config.store ("host:port" -> TCP, rank 0 serves;
/// "file:/dir" -> file store). Throws invalid_config for "" or a bad address.
COMM_API std::shared_ptr<Store> make_store(const Config& config);

}  // namespace comm
