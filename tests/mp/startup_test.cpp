// comm-mp-startup: a rank that fails or dies while the communicator is being
// created must make the others fail within seconds, naming it (and quoting
// its message when it had one), instead of waiting out the timeout.
//
//   comm-mp-startup MODE R --within S [--expect TEXT]
//
// MODE says what rank R does:
//   kill-in-transport   dies (SIGKILL) inside a transport's bootstrap, before
//                       publishing its key, while the others wait for every
//                       rank's key (the "startup_probe" transport below does
//                       what ucx/ofi/gloo do: set one key, get the others)
//   throw-in-transport  its transport factory throws comm::Error
//   bad-config          its COMM_ALGO is malformed (a usage error on one rank)
//   kill-before-store   dies before it ever connects to the store (R = 0: the
//                       store's host dies before listening)
// Every other rank must get a comm::Error within S seconds whose message
// names rank R and contains TEXT. Exit 0 when it does, 1 otherwise.

#include <comm/comm.hpp>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <string>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string mode;
  int victim = -1;
  double within = 0;
  std::string expect;
};

[[noreturn]] void usage() {
  std::fprintf(stderr, "usage: comm-mp-startup MODE R --within S [--expect TEXT]\n");
  std::exit(2);
}

Options parse(int argc, char** argv) {
  if (argc < 5) usage();
  Options o{argv[1], std::atoi(argv[2]), 0, {}};
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--within") o.within = std::atof(argv[i + 1]);
    else if (a == "--expect") o.expect = argv[i + 1];
    else usage();
  }
  if (o.within <= 0) usage();
  return o;
}

[[noreturn]] void die() {
  std::printf("rank dying now (SIGKILL)\n");
  std::fflush(stdout);
  ::kill(::getpid(), SIGKILL);
  std::abort();
}

// A transport whose bootstrap is what real ones do: publish this rank's
// address, then read every other rank's (so it never gets to return).
void register_probe_transport(const Options& o) {
  comm::register_transport("startup_probe", [o](const comm::TransportInit& init) -> std::unique_ptr<comm::Transport> {
    if (init.rank == o.victim && o.mode == "throw-in-transport")
      throw comm::Error(comm::ErrorCode::transport_failure, "startup_probe: this rank refuses on purpose");
    if (init.rank == o.victim && o.mode == "kill-in-transport") die();
    init.store->set("probe/addr/" + std::to_string(init.rank), "here");
    for (int r = 0; r < init.size; ++r) init.store->get("probe/addr/" + std::to_string(r), init.config->timeout);
    throw comm::Error(comm::ErrorCode::internal, "startup_probe: every rank published its address, "
                                                 "although rank " + std::to_string(o.victim) + " should not have");
  });
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const Options o = parse(argc, argv);
  comm::Config cfg = comm::Config::from_env();
  const bool victim = cfg.rank == o.victim;
  if (victim && o.mode == "kill-before-store") die();
  if (victim && o.mode == "bad-config") cfg.algo_override = "allreduce=ring:64K-0";
  if (o.mode != "bad-config") cfg.transport = "startup_probe";
  register_probe_transport(o);

  const auto t0 = Clock::now();
  try {
    comm::Communicator c = comm::Communicator::create(cfg);
    std::printf("FAIL: rank %d created its communicator although rank %d %s\n", cfg.rank, o.victim, o.mode.c_str());
    return 1;
  } catch (const comm::Error& e) {
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    std::printf("rank %d: creation failed after %.3f s: %s: %s\n", cfg.rank, secs,
                std::string(comm::to_string(e.code())).c_str(), e.what());
    if (victim) return 0;  // its own error (throw-in-transport, bad-config)
    const std::string msg = e.what();
    bool ok = true;
    if (!std::regex_search(msg, std::regex("rank " + std::to_string(o.victim) + "([^0-9]|$)"))) {
      std::printf("FAIL: the error does not name rank %d\n", o.victim);
      ok = false;
    }
    if (!o.expect.empty() && msg.find(o.expect) == std::string::npos) {
      std::printf("FAIL: the error does not contain '%s'\n", o.expect.c_str());
      ok = false;
    }
    if (secs > o.within) {
      std::printf("FAIL: the error took %.3f s (limit %g s)\n", secs, o.within);
      ok = false;
    }
    return ok ? 0 : 1;
  }
}
