#pragma once
// The TCP store's server: a poll() loop on a background thread that owns every
// connection, so one slow or silent client never holds up another.

#include <comm/store.hpp>

#include "util/socket_util.hpp"

#include <cstdint>
#include <memory>
#include <thread>

namespace comm::detail {

class TcpStoreServer {
 public:
  /// Listens on options.bind (or options.host) : options.port and starts serving.
  /// Throws store_failure if the address cannot be bound.
  explicit TcpStoreServer(const TcpStoreOptions& options);
  ~TcpStoreServer();  ///< stops the thread and closes every connection
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  std::uint16_t port() const noexcept { return port_; }

 private:
  struct Loop;
  std::unique_ptr<Loop> loop_;
  Fd wake_read_, wake_write_;
  std::uint16_t port_ = 0;
  std::thread thread_;
};

}  // namespace comm::detail
