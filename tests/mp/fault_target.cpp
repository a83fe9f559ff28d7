// comm-fault-target: the program the kill campaign (tools/kill-campaign.sh)
// runs under commrun. Someone else kills or freezes rank --victim R at a time
// of their choosing, from start-up on; every other rank must then fail with a
// comm::Error that names rank R, within seconds, and exit.
//
//   comm-fault-target --victim R [--seconds S] [--freeze-after K]
//
// With --freeze-after K the victim stops itself (SIGSTOP) before its K-th
// all-reduce instead of waiting to be killed; the others then time out at
// COMM_TIMEOUT and must name it as the rank that has not entered that call.
// Each rank creates the communicator and runs all-reduces of mixed sizes
// (16 B to 4 MiB, so every protocol of a transport is in flight at some
// point) for at most S seconds (default 30). A survivor prints exactly one
// line
//   fault-target: rank N: error after T s in <phase>: <code>: <message>
// where <phase> is "create" or "allreduce #K", T the seconds from the start
// of that call to the error, and exits 0 if the message names rank R (as the
// rank that failed; see names_culprit), 3 if it does not, 4 if no error came
// within S seconds. The victim, if it is not killed, behaves like the others.
// Exit 77 when the transport is not built.

#include "mp_test_util.hpp"

#include <comm/comm.hpp>

#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int victim = -1;
  double seconds = 30;
  long freeze_after = -1;
};

[[noreturn]] void usage() {
  std::fprintf(stderr, "usage: comm-fault-target --victim R [--seconds S] [--freeze-after K]\n");
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage();
    if (a == "--victim") o.victim = std::atoi(argv[++i]);
    else if (a == "--seconds") o.seconds = std::atof(argv[++i]);
    else if (a == "--freeze-after") o.freeze_after = std::atol(argv[++i]);
    else usage();
  }
  if (o.victim < 0 || o.seconds <= 0) usage();
  return o;
}

// True when `message` names `victim` and blames no other rank: every phrase
// of comm's that says a rank failed, died, exited, was lost or is unreachable
// must be about the victim. (A message may still name the peer an operation
// was waiting on, e.g. "recv from rank 1".)
bool names_culprit(const std::string& message, int victim) {
  const std::string v = std::to_string(victim);
  if (!std::regex_search(message, std::regex("rank " + v + "([^0-9]|$)"))) return false;
  // comm found the first failure and says so: what the transport saw before
  // (a survivor that gave up and closed its connection) is the symptom.
  if (message.find("the cause: rank " + v + " failed first") != std::string::npos) return true;
  static const std::regex blame(
      "rank ([0-9]+) (failed|died|exited|has exited|is unreachable|was lost|disconnected|closed its|"
      "left|has not entered|is frozen|stopped)");
  for (auto it = std::sregex_iterator(message.begin(), message.end(), blame); it != std::sregex_iterator(); ++it)
    if ((*it)[1] != v) return false;
  return true;
}

int report(int rank, const char* phase, Clock::time_point t0, const comm::Error& e, int victim) {
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("fault-target: rank %d: error after %.3f s in %s: %s: %s\n", rank, secs, phase,
              std::string(comm::to_string(e.code())).c_str(), e.what());
  return names_culprit(e.what(), victim) ? 0 : 3;
}

// A survivor that crashes instead of naming the victim is a defect the
// campaign must be able to diagnose from its log alone (a CI machine keeps no
// core): print the frames, then die of the same signal so commrun reports it.
void on_crash(int sig) {
  static const char head[] = "fault-target: crashed; backtrace (addr2line -e <object> <offset> resolves it):\n";
  if (::write(STDERR_FILENO, head, sizeof head - 1) < 0) {}
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), STDERR_FILENO);
  ::raise(sig);  // SA_RESETHAND restored the default action
}

void print_backtrace_on_crash() {
  void* warm[1];
  backtrace(warm, 1);  // loads the unwinder now: it allocates on first use
  struct sigaction sa {};
  sa.sa_handler = on_crash;
  sa.sa_flags = SA_RESETHAND;
  for (const int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) ::sigaction(sig, &sa, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  print_backtrace_on_crash();
  const Options o = parse(argc, argv);
  comm::Config cfg = comm::Config::from_env();
  const auto t_create = Clock::now();
  comm::Communicator c;
  try {
    c = comm::Communicator::create(cfg);
  } catch (const comm::Error& e) {
    mptest::exit_if_not_built(cfg, e);
    return report(cfg.rank, "create", t_create, e, o.victim);
  }
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  // 16 B, 64 KiB and 4 MiB: eager, medium and rendezvous/large protocols;
  // 1200 B: shm's one-shot in line flags.
  const std::size_t sizes[] = {4, 300, 16384, 1 << 20};
  std::vector<float> buf(sizes[3]);
  for (std::uint64_t it = 0; Clock::now() < end; ++it) {
    const std::size_t n = sizes[it % std::size(sizes)];
    if (c.rank() == o.victim && static_cast<long>(it) == o.freeze_after) {
      std::printf("fault-target: rank %d: stopping myself (SIGSTOP) before allreduce #%llu\n", c.rank(),
                  static_cast<unsigned long long>(it));
      ::raise(SIGSTOP);
    }
    const auto t0 = Clock::now();
    try {
      c.allreduce(comm::View{buf.data(), n, comm::DataType::f32}, comm::ReduceOp::max);
    } catch (const comm::Error& e) {
      const std::string phase = "allreduce #" + std::to_string(it);
      return report(c.rank(), phase.c_str(), t0, e, o.victim);
    }
  }
  std::printf("fault-target: rank %d: no error within %g s although rank %d was to be killed\n", c.rank(), o.seconds,
              o.victim);
  return 4;
}
