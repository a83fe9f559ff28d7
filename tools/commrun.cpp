// commrun: starts N local ranks of a program, wired to meet through a TCP
// store, prefixes their output with the rank, and stops the job as soon as one
// rank fails.
//
// Rank 0 hosts the store (COMM_STORE=host:port; Config/make_store make rank 0
// the server), so a job under commrun bootstraps exactly like one under
// torchrun or Slurm, and commrun needs nothing from the library. commrun only
// picks a free port; the short window between that and rank 0 binding it is
// reported clearly by rank 0 if another process takes the port.

#include "commrun_job.hpp"
#include "commrun_options.hpp"
#include "util/process.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

using commrun::JobEnv;
using commrun::Options;
using commrun::Rank;
using commrun::global_rank;
using commrun::multinode;
using commrun::world_size;
// The kernel's ephemeral range: it hands these ports to outgoing connections.
std::pair<int, int> ephemeral_ports() {
  int low = 32768, high = 60999;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low >> high;
  return {low, high};
}

// A free port on `host` for rank 0's store. Between this check and rank 0's
// bind the port is free for anyone to take, and on a busy machine an outgoing
// connection soon takes a free ephemeral port (the kernel's choice for port
// 0): so it is drawn at random below the ephemeral range, where only another
// listener could take it, and bound once to check it is free. Port 0 is the
// fallback when that range is too small.
int pick_port(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  if (int rc = getaddrinfo(host.c_str(), "0", &hints, &list); rc != 0) {
    std::fprintf(stderr, "commrun: cannot resolve --host '%s': %s\n", host.c_str(), gai_strerror(rc));
    return -1;
  }
  const auto try_bind = [&](int want) {
    int got = -1;
    for (addrinfo* a = list; a && got < 0; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
      if (fd < 0) continue;
      sockaddr_storage ss{};
      std::memcpy(&ss, a->ai_addr, a->ai_addrlen);
      auto* port = ss.ss_family == AF_INET6 ? &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                            : &reinterpret_cast<sockaddr_in*>(&ss)->sin_port;
      *port = htons(static_cast<std::uint16_t>(want));
      socklen_t len = sizeof ss;
      if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), a->ai_addrlen) == 0 &&
          ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0)
        got = ntohs(*port);
      ::close(fd);
    }
    return got;
  };
  int port = -1;
  const int below = ephemeral_ports().first;
  const int lowest = std::max(1024, below - 16384);
  if (below - lowest >= 1024) {
    std::mt19937 pick(std::random_device{}());
    std::uniform_int_distribution<int> in_range(lowest, below - 1);
    for (int attempt = 0; attempt < 64 && port < 0; ++attempt) port = try_bind(in_range(pick));
  }
  if (port < 0) port = try_bind(0);
  freeaddrinfo(list);
  if (port < 0) std::fprintf(stderr, "commrun: cannot bind a port on '%s': %s\n", host.c_str(), std::strerror(errno));
  return port;
}

std::string random_token() {
  std::random_device rd;
  std::string t;
  constexpr char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 8; ++i) {
    const std::uint32_t r = rd();
    for (int j = 0; j < 8; ++j) t.push_back(kHex[(r >> (4 * j)) & 15]);
  }
  return t;
}

int g_signal_pipe = -1;

extern "C" void on_signal(int sig) {
  const int saved = errno;
  const unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = ::write(g_signal_pipe, &b, 1);
  errno = saved;
}

// COMM_STORE_PID for ranks other than 0: which process hosts the store, so a
// rank that cannot reach it stops waiting once that process is gone
// (src/bootstrap/store_factory.cpp reads it).
std::string store_process(pid_t rank0) {
  const auto st = comm::detail::read_process_stat(rank0);
  return std::to_string(rank0) + ":" + std::to_string(st ? st->start_ticks : 0) + ":" + comm::detail::boot_id() +
         ":" + comm::detail::pid_namespace();
}

void remove_dir(const std::string& dir, const std::string& prefix) {
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != ".." && name.rfind(prefix, 0) == 0) ::unlink((dir + "/" + name).c_str());
    }
    ::closedir(d);
  }
  ::rmdir(dir.c_str());
}

// ---- placement (--bind)

// The cores this process may run on, each as the set of its hardware threads,
// in the order of their first CPU. CPUs whose topology cannot be read count as
// cores of their own.
std::vector<cpu_set_t> allowed_cores() {
  cpu_set_t allowed;
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) return {};
  std::map<std::pair<long, long>, std::size_t> index;  // (package, core) -> position
  std::vector<cpu_set_t> cores;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    const std::string topo = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    long package = -1, core = -1;
    std::ifstream(topo + "physical_package_id") >> package;
    std::ifstream(topo + "core_id") >> core;
    const auto key = core < 0 ? std::make_pair(-1L - cpu, -1L) : std::make_pair(package, core);
    auto [it, fresh] = index.emplace(key, cores.size());
    if (fresh) {
      cores.emplace_back();
      CPU_ZERO(&cores.back());
    }
    CPU_SET(cpu, &cores[it->second]);
  }
  return cores;
}

std::string cpu_list(const cpu_set_t& set) {
  std::string s;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) s += (s.empty() ? "" : ",") + std::to_string(cpu);
  return s;
}

bool log_info() {
  const char* l = std::getenv("COMM_LOG");
  const std::string_view v = l ? l : "";
  return v == "info" || v == "debug" || v == "trace";
}

// Rank r's CPU set for --bind core (rank r -> core r), or an empty list when
// the ranks stay unbound: --bind none, or more ranks than cores under auto.
// Binding one rank per core keeps two spinning ranks off one core (they would
// take turns per scheduler tick) and keeps each rank's cache warm.
std::vector<cpu_set_t> plan_binding(const Options& o) {
  std::vector<cpu_set_t> cores = allowed_cores();
  const bool enough = static_cast<int>(cores.size()) >= o.nranks;
  const bool bind = o.bind == "core" || (o.bind == "auto" && enough);
  if (o.bind == "core" && !enough)
    std::fprintf(stderr, "commrun: --bind core: %d ranks but %zu cores; ranks share cores round-robin\n",
                 o.nranks, cores.size());
  std::vector<cpu_set_t> plan;
  for (int r = 0; bind && !cores.empty() && r < o.nranks; ++r) plan.push_back(cores[static_cast<std::size_t>(r) % cores.size()]);
  if (log_info()) {
    if (plan.empty())
      std::fprintf(stderr, "commrun: ranks not bound (%s; %d ranks, %zu cores)\n",
                   o.bind == "none" ? "--bind none" : "more ranks than cores", o.nranks, cores.size());
    for (std::size_t r = 0; r < plan.size(); ++r)
      std::fprintf(stderr, "commrun: rank %zu bound to CPU %s\n", r, cpu_list(plan[r]).c_str());
  }
  return plan;
}

// The store the ranks meet at and its token: on one node a free port of
// --host and a fresh token; across nodes --master and the environment's token
// (every node's commrun must hand out the same one).
bool store_address(const Options& o, std::string& store, std::string& token) {
  if (multinode(o)) {
    store = o.multi.master;
    const char* t = std::getenv("COMM_STORE_TOKEN");
    token = t ? t : "";
    return true;
  }
  const int port = pick_port(o.host);
  if (port < 0) return false;
  const bool v6 = o.host.find(':') != std::string::npos;
  store = (v6 ? "[" + o.host + "]" : o.host) + ":" + std::to_string(port);
  token = random_token();
  return true;
}

// Runs in the forked child. If exec fails the child writes errno to
// `status_w` (close-on-exec: the parent reads nothing once exec succeeded),
// so that commrun, not each rank, reports it once.
[[noreturn]] void exec_rank(const Options& o, int rank, const JobEnv& job, int out_w, int err_w, int status_w,
                            const cpu_set_t* cpus) {
  ::setpgid(0, 0);
  if (cpus && ::sched_setaffinity(0, sizeof *cpus, cpus) != 0)
    std::fprintf(stderr, "commrun: rank %d: cannot bind to CPU %s: %s\n", rank, cpu_list(*cpus).c_str(),
                 std::strerror(errno));
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE}) ::signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  const int null_fd = ::open("/dev/null", O_RDONLY);
  if (null_fd >= 0) ::dup2(null_fd, 0);
  ::dup2(out_w, 1);
  ::dup2(err_w, 2);
  ::setenv("COMM_RANK", std::to_string(global_rank(o, rank)).c_str(), 1);
  ::setenv("COMM_WORLD_SIZE", std::to_string(world_size(o)).c_str(), 1);
  ::setenv("COMM_LOCAL_RANK", std::to_string(rank).c_str(), 1);
  ::setenv("COMM_STORE", job.store.c_str(), 1);
  if (!job.token.empty()) ::setenv("COMM_STORE_TOKEN", job.token.c_str(), 1);
  // Only where the store's process runs here (node 0 of a multi-node job).
  if (global_rank(o, rank) != 0 && !job.store_pid.empty()) ::setenv("COMM_STORE_PID", job.store_pid.c_str(), 1);
  if (!job.exit_notes.empty()) ::setenv("COMM_EXIT_NOTES", job.exit_notes.c_str(), 1);
  if (!job.dump_dir.empty()) ::setenv("COMM_DUMP_DIR", job.dump_dir.c_str(), 1);
  if (!o.transport.empty()) ::setenv("COMM_TRANSPORT", o.transport.c_str(), 1);
  // libinfinipath (pulled in by libfabric's psm provider) installs handlers
  // that print a backtrace and exit(1) on SIGSEGV/SIGABRT, which would hide
  // the signal from us; keep the default unless the user asked otherwise.
  ::setenv("IPATH_NO_BACKTRACE", "1", 0);
  std::vector<char*> argv;
  for (const auto& a : o.program) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  const int err = errno;
  [[maybe_unused]] ssize_t n = ::write(status_w, &err, sizeof err);
  ::_exit(127);
}

// Waits until the child has exec'd (0) or failed to (its errno).
int exec_status(int status_r) {
  int err = 0;
  ssize_t n;
  do n = ::read(status_r, &err, sizeof err);
  while (n < 0 && errno == EINTR);
  ::close(status_r);
  return n == static_cast<ssize_t>(sizeof err) ? err : 0;
}

// Where flight-recorder dumps land: COMM_DUMP_DIR, or a directory of ours
// (removed at the end), so that on --timeout we can say which rank is behind
// and where.
struct DumpDir {
  std::string path;  // "" when none could be made
  bool own = false;
};

// A fresh directory "<TMPDIR or /tmp>/commrun-<what>XXXXXX", or "" when none
// could be made. TMPDIR as mkdtemp(1) reads it: a rig of emulated hosts points
// it into its own work directory, which it removes even when it must SIGKILL us.
std::string make_job_dir(const char* what) {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/commrun-" + what + "XXXXXX";
  return ::mkdtemp(tmpl.data()) ? tmpl : std::string();
}

DumpDir make_dump_dir() {
  if (const char* d = std::getenv("COMM_DUMP_DIR"); d && *d) return {d, false};
  std::string dir = make_job_dir("");
  return {dir, !dir.empty()};
}

void remove_job_dirs(const JobEnv& job, const DumpDir& dumps) {
  if (dumps.own) remove_dir(dumps.path, "comm-flight-");
  if (!job.exit_notes.empty()) remove_dir(job.exit_notes, "");
}

// Our signals reach the supervision loop through a pipe that on_signal writes
// to. Returns the pipe's read end, or -1 (reported) when it cannot be made.
int install_signal_pipe() {
  int sp[2];
  if (::pipe2(sp, O_CLOEXEC | O_NONBLOCK) != 0) {
    std::perror("commrun: pipe");
    return -1;
  }
  g_signal_pipe = sp[1];
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) ::sigaction(sig, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  return sp[0];
}

// Every rank would fail to exec alike: say it once, stop ranks 0..last that
// started, and return the exit code a shell would give.
int stop_after_exec_failure(const Options& o, int err, std::vector<Rank>& ranks, int last, const JobEnv& job,
                            const DumpDir& dumps) {
  const bool searched = std::strchr(o.program[0].c_str(), '/') == nullptr;
  std::fprintf(stderr, "commrun: cannot run '%s': %s (%s)%s\n", o.program[0].c_str(), std::strerror(err),
               strerrorname_np(err) ? strerrorname_np(err) : "?",
               err == ENOENT && searched ? "; it is not a file in any PATH directory" : "");
  for (int q = 0; q <= last; ++q) ::kill(-ranks[static_cast<std::size_t>(q)].pid, SIGKILL);
  for (int q = 0; q <= last; ++q) ::waitpid(ranks[static_cast<std::size_t>(q)].pid, nullptr, 0);
  remove_job_dirs(job, dumps);
  return err == ENOENT ? 127 : 126;
}

// Forks and execs every rank, wiring its output to pipes we read. Returns 0
// once all of them run, else the code commrun exits with.
int start_ranks(const Options& o, JobEnv& job, const DumpDir& dumps, std::vector<Rank>& ranks) {
  const std::vector<cpu_set_t> binding = plan_binding(o);
  ranks.assign(static_cast<std::size_t>(o.nranks), Rank{});
  for (int r = 0; r < o.nranks; ++r) {
    Rank& rk = ranks[static_cast<std::size_t>(r)];
    rk.index = global_rank(o, r);  // prefixes, messages and --allow-fail speak global ranks
    int out[2], err[2], status[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 || ::pipe2(status, O_CLOEXEC) != 0) {
      std::perror("commrun: pipe");
      return 1;
    }
    // Signals stay blocked until the child has reset our handlers: a SIGTERM
    // for it must not run on_signal there, which would tell us we got it.
    sigset_t all, old;
    sigfillset(&all);
    ::sigprocmask(SIG_BLOCK, &all, &old);
    const pid_t pid = ::fork();
    if (pid == 0) exec_rank(o, r, job, out[1], err[1], status[1],
                            binding.empty() ? nullptr : &binding[static_cast<std::size_t>(r)]);
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    if (pid < 0) {
      std::perror("commrun: fork");
      return 1;
    }
    if (global_rank(o, r) == 0) job.store_pid = store_process(pid);
    ::setpgid(pid, pid);  // also in the child: whichever runs first wins the race
    ::close(out[1]);
    ::close(err[1]);
    ::close(status[1]);
    rk.pid = pid;
    rk.running = true;
    rk.out = {out[0], 1, {}};
    rk.err = {err[0], 2, {}};
    if (const int e = exec_status(status[0]); e != 0) return stop_after_exec_failure(o, e, ranks, r, job, dumps);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = commrun::parse_args(argc, argv);
  std::string store, token;
  if (!store_address(o, store, token)) return 1;
  const DumpDir dumps = make_dump_dir();
  const int signal_fd = install_signal_pipe();
  if (signal_fd < 0) return 1;

  JobEnv job{store, token, dumps.path, {}, {}};
  job.exit_notes = make_job_dir("exits-");
  std::vector<Rank> ranks;
  if (const int code = start_ranks(o, job, dumps, ranks); code != 0) return code;

  const commrun::JobEnd end = commrun::supervise(o, job, dumps.path, ranks, signal_fd);
  remove_job_dirs(job, dumps);
  if (end.exit_code != 0)
    std::fprintf(stderr, "commrun: job failed: %s (exit code %d)\n", end.failure.c_str(), end.exit_code);
  return end.exit_code;
}
