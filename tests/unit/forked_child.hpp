#pragma once
// A test's code run in a child process of its own (a fresh network namespace,
// a process a watchdog ends, ...): what the child writes to the descriptor it
// is given comes back to the test, with the child's pid and wait status.

#include <doctest/doctest.h>

#include <string>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

namespace comm::test {

struct ForkedChild {
  pid_t pid = -1;
  std::string output;  ///< everything the child wrote to its descriptor
  int status = 0;      ///< as waitpid reports it
};

// Forks; the child runs `body(fd)` and exits with what it returns (it must
// not return from the test). The parent reads the descriptor to its end and
// waits for the child.
template <class Body>
ForkedChild run_forked(Body&& body) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  ForkedChild c;
  c.pid = ::fork();
  REQUIRE(c.pid >= 0);
  if (c.pid == 0) {
    ::close(fds[0]);
    ::_exit(body(fds[1]));
  }
  ::close(fds[1]);
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) c.output.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  REQUIRE(::waitpid(c.pid, &c.status, 0) == c.pid);
  return c;
}

}  // namespace comm::test
