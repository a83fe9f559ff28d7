// The `ofi` transport's watchdog over libfabric's shm provider (transports/ofi/
// ofi_shm.cpp): a process it ends for being stuck in the provider must not
// leave its region in /dev/shm. Built only when ofi is enabled.
#include "transports/ofi/ofi_transport.hpp"

#include "util/process.hpp"

#include "forked_child.hpp"

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
  const comm::test::ForkedChild child = comm::test::run_forked([](int fd) {
    const std::string name = comm::ofi::shm_region_name(static_cast<long>(::getpid()), 0);
    const int region = ::shm_open(("/" + name).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (region < 0 || ::ftruncate(region, 4096) != 0) return 2;
    ::close(region);
    if (::write(fd, name.data(), name.size()) != static_cast<ssize_t>(name.size())) return 3;
    ::close(fd);
    comm::ofi::ProviderWatchdog watchdog([] { return std::string("rank 1 (pid 1) died"); },
                                         [] { comm::detail::remove_shm_files_of(static_cast<long>(::getpid())); },
                                         0, 50ms, 50ms);
    watchdog.enter();
    std::this_thread::sleep_for(20s);  // "inside the provider"
    return 4;                          // the watchdog never ended it
  });
  const std::string& name = child.output;
  REQUIRE(WIFEXITED(child.status));
  CHECK(WEXITSTATUS(child.status) == 70);
  REQUIRE(name.rfind("comm-ofi-" + std::to_string(child.pid) + "-0-", 0) == 0);
  CHECK_MESSAGE(!shm_file_exists(name), "/dev/shm/" << name << " is left after the watchdog ended its process");
  comm::detail::remove_shm_files_of(static_cast<long>(child.pid));  // whatever the outcome, nothing stays
}
