// The TCP store server against abusive clients (unauthenticated big frames,
// a thousand silent connections, a process out of file descriptors) and its
// check that the ranks agree on the world (two claims of one rank, two world
// sizes). The abusers run in a child process where they need descriptors of
// their own, so that the server's process is limited only by what it opens.

#include "store_test_util.hpp"

#include <sys/resource.h>
#include <sys/wait.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

using namespace comm::test;
using comm::ErrorCode;

namespace {

// VmRSS of this process, in KiB.
long rss_kib() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  return -1;
}

int open_fds() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (::readdir(d)) ++n;
    ::closedir(d);
  }
  return n - 3;  // ".", ".." and the directory's own descriptor
}

// Sets this process's soft descriptor limit for the scope.
class FdLimit {
 public:
  explicit FdLimit(rlim_t soft) {
    ::getrlimit(RLIMIT_NOFILE, &old_);
    rlimit r = old_;
    r.rlim_cur = std::min(soft, old_.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &r);
  }
  ~FdLimit() { ::setrlimit(RLIMIT_NOFILE, &old_); }

 private:
  rlimit old_{};
};

// A child process holding `n` silent connections to `port` until killed.
class SilentClients {
 public:
  SilentClients(std::uint16_t port, int n) {
    int p[2];
    REQUIRE(::pipe(p) == 0);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::close(p[0]);
      rlimit r{};
      ::getrlimit(RLIMIT_NOFILE, &r);
      r.rlim_cur = r.rlim_max;
      ::setrlimit(RLIMIT_NOFILE, &r);
      int made = 0;
      for (int i = 0; i < n; ++i) {
        const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) ++made;
      }
      [[maybe_unused]] ssize_t w = ::write(p[1], &made, sizeof made);
      for (;;) ::pause();
    }
    ::close(p[1]);
    pollfd pf{p[0], POLLIN, 0};
    REQUIRE(::poll(&pf, 1, 30000) == 1);
    REQUIRE(::read(p[0], &made_, sizeof made_) == static_cast<ssize_t>(sizeof made_));
    ::close(p[0]);
  }
  ~SilentClients() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  int made() const { return made_; }

 private:
  pid_t pid_ = -1;
  int made_ = 0;
};

// Sends stderr to a file for the scope; lines() counts those containing `what`.
class CaptureStderr {
 public:
  CaptureStderr() : path_("/tmp/comm-stderr-" + std::to_string(::getpid())) {
    std::fflush(stderr);
    saved_ = ::dup(2);
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, 2);
    ::close(fd);
  }
  ~CaptureStderr() {
    restore();
    ::unlink(path_.c_str());
  }
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    saved_ = -1;
  }
  int lines(const std::string& what) const {
    std::ifstream in(path_);
    int n = 0;
    for (std::string line; std::getline(in, line);) n += line.find(what) != std::string::npos;
    return n;
  }

 private:
  std::string path_;
  int saved_ = -1;
};

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

std::shared_ptr<comm::Store> rank_store(std::uint16_t port, int rank, int size, bool server = false) {
  comm::TcpStoreOptions o;
  o.is_server = server;
  o.port = port;
  o.token = "tok";
  o.rank = rank;
  o.world_size = size;
  o.connect_timeout = 2s;
  return comm::make_tcp_store(o);
}

}  // namespace

TEST_CASE("tcp store: 40 clients sending big frames before authenticating do not grow the server") {
  auto server = tcp_server("tok");
  const std::uint16_t port = comm::tcp_store_port(*server);
  const std::string chunk(256 * 1024, 'x');
  const long before = rss_kib();
  std::vector<int> fds;
  for (int i = 0; i < 40; ++i) {
    const int fd = raw_connect(port);
    timeval t{2, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &t, sizeof t);
    fds.push_back(fd);
  }
  // Each announces a 60 MiB frame and sends 2 MiB of it (as far as the server takes it).
  for (int fd : fds) {
    std::string head = be32(60u << 20) + "\x02";
    if (::send(fd, head.data(), head.size(), MSG_NOSIGNAL) <= 0) continue;
    for (int k = 0; k < 8; ++k)
      if (::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL) <= 0) break;
  }
  std::this_thread::sleep_for(300ms);
  const long grown = rss_kib() - before;
  INFO("VmRSS grew by " << grown << " KiB");
  CHECK(grown < 16 * 1024);
  for (int fd : fds) CHECK(closed_by_peer(fd, 2s));
  for (int fd : fds) ::close(fd);
  auto client = tcp_client(port, "tok");
  check_still_serving(*client, "after-big-frames");
}

TEST_CASE("tcp store: 1000 silent connections under a 1024-descriptor limit do not break the job") {
  FdLimit limit(1024);
  comm::TcpStoreOptions o;
  o.is_server = true;
  o.token = "tok";
  auto server = comm::make_tcp_store(o);  // after the limit: max_unauthenticated = 1024 / 4
  const std::uint16_t port = comm::tcp_store_port(*server);
  SilentClients silent(port, 1000);
  CHECK(silent.made() >= 900);
  std::this_thread::sleep_for(500ms);  // the server accepts (and evicts) what it can
  CHECK(open_fds() < 512);
  const auto t0 = Clock::now();
  auto client = tcp_client(port, "tok");
  check_still_serving(*client, "after-silent");
  CHECK(Clock::now() - t0 < 3s);
}

TEST_CASE("tcp store: out of file descriptors, the accept loop rests and says so once") {
  auto server = tcp_server("tok");
  const std::uint16_t port = comm::tcp_store_port(*server);
  auto client = tcp_client(port, "tok");
  double cpu = 0;
  int warnings = 0;
  {
    CaptureStderr err;
    {
      FdLimit limit(static_cast<rlim_t>(open_fds() + 12));  // a few to spare, then EMFILE
      SilentClients silent(port, 64);
      const double cpu0 = cpu_seconds();
      std::this_thread::sleep_for(2s);
      cpu = cpu_seconds() - cpu0;
    }  // the clients are gone and the limit is back before anything else opens files
    err.restore();
    warnings = err.lines("cannot accept a connection");
  }
  INFO("CPU " << cpu << " s over 2 s, " << warnings << " warnings");
  CHECK(cpu < 0.5);  // a spinning loop burns about 2 s here
  CHECK(warnings >= 1);
  CHECK(warnings <= 2);
  check_still_serving(*client, "after-emfile");
  auto late = tcp_client(port, "tok");
  check_still_serving(*late, "after-emfile-new");
}

TEST_CASE("tcp store: ranks that disagree on the world size fail, every one of them, naming both sizes") {
  auto server = rank_store(0, 0, 2, true);
  const std::uint16_t port = comm::tcp_store_port(*server);
  std::string parked;
  std::thread waiter([&] { parked = error_of([&] { server->get("never", 30s); }); });
  std::this_thread::sleep_for(100ms);
  ErrorCode code{};
  const auto t0 = Clock::now();
  const std::string msg = error_of([&] { rank_store(port, 1, 3); }, &code);
  waiter.join();
  CHECK(code == ErrorCode::invalid_config);
  CHECK(msg.find("rank 1 (") != std::string::npos);
  CHECK(msg.find("was started for a world of 3 ranks, but rank 0 for 2") != std::string::npos);
  CHECK(msg.find("COMM_RANK/COMM_WORLD_SIZE") != std::string::npos);
  // Rank 0, parked in a get, hears it at once; so does any later request.
  CHECK(parked.find("world of 3 ranks, but rank 0 for 2") != std::string::npos);
  CHECK(Clock::now() - t0 < 5s);
  code = {};
  CHECK(error_of([&] { server->set("k", "v"); }, &code).find("disagree on the world size") != std::string::npos);
  CHECK(code == ErrorCode::invalid_config);
}

TEST_CASE("tcp store: two processes claiming one rank fail the job, naming the rank") {
  auto server = rank_store(0, 0, 3, true);
  const std::uint16_t port = comm::tcp_store_port(*server);
  auto first = rank_store(port, 1, 3);
  first->set("a", "1");
  ErrorCode code{};
  const std::string msg = error_of([&] { rank_store(port, 1, 3); }, &code);
  CHECK(code == ErrorCode::invalid_config);
  CHECK(msg.find("rank 1 is claimed by two processes") != std::string::npos);
  code = {};
  error_of([&] { first->set("b", "2"); }, &code);
  CHECK(code == ErrorCode::invalid_config);
  code = {};
  error_of([&] { server->get("a", 1s); }, &code);
  CHECK(code == ErrorCode::invalid_config);
}

TEST_CASE("tcp store: a rank may make a new store object after destroying its old one") {
  auto server = rank_store(0, 0, 2, true);
  const std::uint16_t port = comm::tcp_store_port(*server);
  for (int i = 0; i < 20; ++i) {
    auto client = rank_store(port, 1, 2);
    client->set("round", std::to_string(i));
  }
  CHECK(server->get("round", 1s) == "19");
}
