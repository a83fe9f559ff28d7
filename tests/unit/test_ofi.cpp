// The `ofi` transport's watchdog over libfabric's shm provider (transports/ofi/
// ofi_shm.cpp): a process it ends for being stuck in the provider must not
// leave its region in /dev/shm. Built only when ofi is enabled.
#include "transports/ofi/ofi_transport.hpp"

#include "util/process.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <thread>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace std::chrono_literals;

namespace {

bool shm_file_exists(const std::string& name) { return ::access(("/dev/shm/" + name).c_str(), F_OK) == 0; }

}  // namespace

TEST_CASE("ofi watchdog: a process it ends leaves no region in /dev/shm") {
  // The child stands for a rank stuck in a provider call: it owns a region
  // named as the transport names them, enters a call that never returns, and
  // the watchdog ends it (exit code 70), skipping the endpoint's close.
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(fds[0]);
    const std::string name = comm::ofi::shm_region_name(static_cast<long>(::getpid()), 0);
    const int fd = ::shm_open(("/" + name).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ::ftruncate(fd, 4096) != 0) ::_exit(2);
    ::close(fd);
    if (::write(fds[1], name.data(), name.size()) != static_cast<ssize_t>(name.size())) ::_exit(3);
    ::close(fds[1]);
    comm::ofi::ProviderWatchdog watchdog([] { return std::string("rank 1 (pid 1) died"); },
                                         [] { comm::detail::remove_shm_files_of(static_cast<long>(::getpid())); },
                                         0, 50ms, 50ms);
    watchdog.enter();
    std::this_thread::sleep_for(20s);  // "inside the provider"
    ::_exit(4);                        // the watchdog never ended it
  }
  ::close(fds[1]);
  std::string name;
  char buf[256];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) name.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 70);
  REQUIRE(name.rfind("comm-ofi-" + std::to_string(child) + "-0-", 0) == 0);
  CHECK_MESSAGE(!shm_file_exists(name), "/dev/shm/" << name << " is left after the watchdog ended its process");
  comm::detail::remove_shm_files_of(static_cast<long>(child));  // whatever the outcome, nothing stays
}
