// libFuzzer target: arbitrary bytes sent to a running TCP store server (with
// a token) over a real loopback connection must neither crash nor stall it;
// after every input a legitimate client must still be served.

#include <comm/error.hpp>
#include <comm/store.hpp>

#include <arpa/inet.h>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {

struct Fixture {
  std::shared_ptr<comm::Store> server, client;
  std::uint16_t port = 0;
  Fixture() {
    comm::TcpStoreOptions o;
    o.is_server = true;
    o.token = "fuzz-secret";
    server = comm::make_tcp_store(o);
    port = comm::tcp_store_port(*server);
    comm::TcpStoreOptions c;
    c.port = port;
    c.token = "fuzz-secret";
    client = comm::make_tcp_store(c);
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

void send_raw(std::uint16_t port, const std::uint8_t* data, std::size_t size) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    char hello[64];
    [[maybe_unused]] auto r = ::recv(fd, hello, sizeof hello, MSG_DONTWAIT);
    [[maybe_unused]] auto w = ::send(fd, data, size, MSG_NOSIGNAL);
  }
  ::close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Fixture& f = fixture();
  send_raw(f.port, data, size);
  static std::uint64_t n = 0;
  const std::string key = "k" + std::to_string(n++ % 64);
  f.client->set(key, "v");
  if (f.client->get(key, std::chrono::milliseconds(5000)) != "v") std::abort();
  return 0;
}
