// commrun: starts N local ranks of a program, wired to meet through a TCP
// store, prefixes their output with the rank, and stops the job as soon as one
// rank fails.
//
// Rank 0 hosts the store (COMM_STORE=host:port; Config/make_store make rank 0
// the server), so a job under commrun bootstraps exactly like one under
// torchrun or Slurm, and commrun needs nothing from the library. commrun only
// picks a free port; the short window between that and rank 0 binding it is
// reported clearly by rank 0 if another process takes the port.

#include "flight_summary.hpp"
#include "util/cli.hpp"
#include "util/process.hpp"
#include "util/transport_name.hpp"
#include "util/units.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr std::size_t kMaxLine = 64 * 1024;  // longer lines are split, not buffered forever
constexpr auto kDumpWait = 2s;               // for flight-recorder dumps after SIGUSR1 on --timeout
constexpr auto kDrainAfterExit = 1s;         // grandchildren may hold a pipe open; don't wait on them

// Multi-node launch in torchrun's terms (see parse_multinode): this commrun
// starts `nranks` local ranks whose global ranks are rank_offset + i, in a
// job of world_size ranks that meets at `master` (node 0's rank 0 hosts the store).
struct MultiNode {
  int nnodes = 1;
  int node_rank = 0;
  int rank_offset = -1;  // -1: node_rank * nranks
  int world_size = -1;   // -1: nnodes * nranks
  std::string master;    // HOST:PORT; "" = single node (commrun picks a port)
};

struct Options {
  int nranks = 0;
  MultiNode multi;
  std::string transport;
  double timeout_s = 0;
  double grace_s = 5;
  std::string host = "127.0.0.1";
  std::string bind = "auto";  // core, none; auto = core when ranks <= cores
  bool prefix = true;
  std::set<int> allow_fail;
  std::vector<std::string> program;  // program and its arguments
};

constexpr const char* kDescription = R"(Starts N ranks of `program` on this host. Each gets COMM_RANK, COMM_WORLD_SIZE,
COMM_LOCAL_RANK, COMM_STORE=H:<free port> (rank 0 hosts the store), a fresh
COMM_STORE_TOKEN and, with --transport, COMM_TRANSPORT. Output lines are
prefixed with [r<rank>]. When a rank fails the others get SIGTERM, then SIGKILL
after --grace seconds; commrun exits with the first failing rank's code
(128+signal for a signal), 124 on --timeout, 128+signal if interrupted.

Several hosts (torchrun's terms; run one commrun per host):
  commrun --nnodes N --node-rank K --master HOST:PORT -n LOCAL [--rank-offset O]
          [--world-size W] [--] program [args...]
starts LOCAL ranks with global ranks O+0 .. O+LOCAL-1 (default O = K*LOCAL) of a
job of W ranks (default N*LOCAL); COMM_LOCAL_RANK is 0..LOCAL-1. Node 0's first
rank (global rank 0) hosts the store at HOST:PORT, so HOST must be an address of
node 0 that the others reach. Hosts with different rank counts: give each commrun
its --rank-offset and the same --world-size. The store token is COMM_STORE_TOKEN
from the environment (give every node the same one), or none.)";

[[noreturn]] void multinode_error(const std::string& what) {
  std::fprintf(stderr, "commrun: %s (see commrun --help)\n", what.c_str());
  std::exit(2);
}

// Completes and checks the multi-node flags: defaults in torchrun's terms
// (equal ranks per node), explicit offsets for uneven nodes, and every
// global rank this node starts inside the job.
void check_multinode(Options& o) {
  MultiNode& m = o.multi;
  const bool multi = m.nnodes > 1 || !m.master.empty() || m.rank_offset >= 0 || m.world_size >= 0;
  if (!multi) return;
  if (m.master.empty()) multinode_error("--nnodes/--node-rank/--rank-offset/--world-size need --master HOST:PORT");
  const std::size_t colon = m.master.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == m.master.size() ||
      m.master.find_first_not_of("0123456789", colon + 1) != std::string::npos)
    multinode_error("--master '" + m.master + "' is not HOST:PORT");
  const long port = std::strtol(m.master.c_str() + colon + 1, nullptr, 10);
  if (port < 1 || port > 65535) multinode_error("--master '" + m.master + "': port must be in [1, 65535]");
  if (m.node_rank >= m.nnodes)
    multinode_error("--node-rank " + std::to_string(m.node_rank) + " is not below --nnodes " +
                    std::to_string(m.nnodes));
  if (m.rank_offset < 0) m.rank_offset = m.node_rank * o.nranks;
  if (m.world_size < 0) m.world_size = m.nnodes * o.nranks;
  if (m.rank_offset + o.nranks > m.world_size)
    multinode_error("node " + std::to_string(m.node_rank) + " would start global ranks " +
                    std::to_string(m.rank_offset) + ".." + std::to_string(m.rank_offset + o.nranks - 1) +
                    " but the job has " + std::to_string(m.world_size) +
                    " (--world-size); nodes with different -n need --rank-offset and --world-size");
  if (m.node_rank == 0 && m.rank_offset != 0)
    multinode_error("--node-rank 0 must start global rank 0, which hosts the store (--rank-offset is " +
                    std::to_string(m.rank_offset) + ")");
  if (m.node_rank != 0 && m.rank_offset == 0)
    multinode_error("--node-rank " + std::to_string(m.node_rank) +
                    " starts global rank 0, which must run on node 0 (give --rank-offset)");
}

Options parse_args(int argc, char** argv) {
  Options o;
  std::vector<std::string> program;
  comm::cli::Parser p("commrun", "commrun -n N [options] [--] program [args...]");
  p.description(kDescription);
  p.integer("-n,-np,--np", "N", "number of ranks (required)", o.nranks, 1, 1 << 20);
  p.text("--transport", "T", "sets COMM_TRANSPORT for every rank", o.transport);
  p.real("--timeout", "S", "stop the job after S seconds, first asking every rank for\nits flight recorder (then exit 124)",
         o.timeout_s, 0);
  p.real("--grace", "S", "seconds between SIGTERM and SIGKILL when stopping (default 5)", o.grace_s, 0);
  p.text("--host", "H", "address of the store rank 0 hosts (default 127.0.0.1)", o.host);
  p.list("--allow-fail", "R[,R...]",
         "rank R may fail without stopping the job or affecting the exit\ncode (fault-injection tests)",
         [&o](std::string_view list) {
           for (std::size_t pos = 0; pos <= list.size();) {
             const std::size_t comma = std::min(list.find(',', pos), list.size());
             const auto r = comm::util::parse_integer(list.substr(pos, comma - pos));
             if (!r || *r < 0 || *r >= (1 << 20)) throw comm::cli::BadValue("rank numbers >= 0 separated by commas");
             o.allow_fail.insert(static_cast<int>(*r));
             pos = comma + 1;
           }
         });
  p.text("--bind", "core|none",
         "core: rank r on the r-th core this process may use (all its hardware\n"
         "threads), the default when ranks <= cores, as mpirun; none: the scheduler\n"
         "places the ranks (the default when ranks > cores). COMM_LOG=info prints it",
         o.bind);
  p.section("several hosts");
  p.integer("--nnodes", "N", "hosts in the job, one commrun each (default 1)", o.multi.nnodes, 1, 1 << 20);
  p.integer("--node-rank", "K", "this host's index, 0..N-1 (default 0)", o.multi.node_rank, 0, 1 << 20);
  p.text("--master", "HOST:PORT", "the store: an address of node 0 every host reaches", o.multi.master);
  p.integer("--rank-offset", "O", "global rank of this host's first rank (default K*LOCAL)", o.multi.rank_offset,
            0, 1 << 20);
  p.integer("--world-size", "W", "ranks in the job (default N*LOCAL)", o.multi.world_size, 1, 1 << 20);
  bool no_prefix = false;
  p.flag("--no-prefix", "print the ranks' lines as they are, without [r<rank>]", no_prefix);
  p.rest("program [args...]", program);
  p.parse_or_exit(argc, argv);
  if (o.nranks <= 0) p.fail("-n N (number of ranks) is required");
  if (program.empty()) p.fail("no program given");
  if (!o.transport.empty() && !comm::util::is_plain_transport_name(o.transport))
    p.fail("--transport '" + o.transport + "' is not valid: expected " + std::string(comm::util::kTransportNameRule) +
           "; this build has: " + COMM_BUILT_TRANSPORTS);
  if (o.bind != "auto" && o.bind != "core" && o.bind != "none")
    p.fail("--bind '" + o.bind + "' is not valid: expected core or none");
  o.prefix = !no_prefix;
  o.program = std::move(program);
  check_multinode(o);
  return o;
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return (abbrev ? std::string("SIG") + abbrev + " (" : "signal (") + std::to_string(sig) + ")";
}

// Asks the kernel for a free port on `host` by binding port 0.
int pick_port(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  if (int rc = getaddrinfo(host.c_str(), "0", &hints, &list); rc != 0) {
    std::fprintf(stderr, "commrun: cannot resolve --host '%s': %s\n", host.c_str(), gai_strerror(rc));
    return -1;
  }
  int port = -1;
  for (addrinfo* a = list; a && port < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0)
      port = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    ::close(fd);
  }
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

void write_all(int fd, const std::string& s) {
  std::size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // our own output is gone (closed pipe); nothing better to do
    off += static_cast<std::size_t>(n);
  }
}

int g_signal_pipe = -1;

extern "C" void on_signal(int sig) {
  const int saved = errno;
  const unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = ::write(g_signal_pipe, &b, 1);
  errno = saved;
}

struct Stream {
  int fd = -1;      // read end of the rank's pipe; -1 once closed
  int target = 1;   // our stdout or stderr
  std::string buf;  // a partial line
};

struct Rank {
  int index = 0;
  pid_t pid = -1;
  bool running = false;
  Stream out, err;
};

bool g_prefix = true;  // --no-prefix clears it

void emit(const Rank& r, Stream& s, bool at_eof) {
  const std::string prefix = g_prefix ? "[r" + std::to_string(r.index) + "] " : std::string();
  std::size_t start = 0;
  for (;;) {
    const std::size_t nl = s.buf.find('\n', start);
    if (nl == std::string::npos) break;
    write_all(s.target, prefix + s.buf.substr(start, nl - start + 1));
    start = nl + 1;
  }
  s.buf.erase(0, start);
  if (!s.buf.empty() && (at_eof || s.buf.size() >= kMaxLine)) {
    write_all(s.target, prefix + s.buf + "\n");
    s.buf.clear();
  }
}

// Reads what is available; false once the pipe is closed.
bool pump(const Rank& r, Stream& s) {
  char buf[16384];
  const ssize_t n = ::read(s.fd, buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) {
    emit(r, s, true);
    ::close(s.fd);
    s.fd = -1;
    return false;
  }
  s.buf.append(buf, static_cast<std::size_t>(n));
  emit(r, s, false);
  return true;
}

// COMM_STORE_PID for ranks other than 0: which process hosts the store, so a
// rank that cannot reach it stops waiting once that process is gone
// (src/bootstrap/store_factory.cpp reads it).
std::string store_process(pid_t rank0) {
  const auto st = comm::detail::read_process_stat(rank0);
  return std::to_string(rank0) + ":" + std::to_string(st ? st->start_ticks : 0) + ":" + comm::detail::boot_id() +
         ":" + comm::detail::pid_namespace();
}

// What every rank's environment says about the job.
struct JobEnv {
  std::string store, token, dump_dir;
  std::string store_pid;   // COMM_STORE_PID, for ranks other than 0
  std::string exit_notes;  // COMM_EXIT_NOTES: where commrun records ranks that ended badly
};

// A rank that ends badly (non-zero exit, a signal) gets a note <dir>/<rank>,
// "<n> <how>" with n counting such ends from 1, so that ranks still waiting
// for it during start-up name it at once (core/watchful_store.cpp reads
// COMM_EXIT_NOTES), even when it died before it ever reached the store, and
// blame the first to end rather than one that gave up after it.
void write_exit_note(const std::string& dir, int rank, const std::string& what) {
  static int ended = 0;
  if (dir.empty()) return;
  const std::string path = dir + "/" + std::to_string(rank), tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  write_all(fd, std::to_string(++ended) + " " + what);
  ::close(fd);
  ::rename(tmp.c_str(), path.c_str());  // readers never see half a note
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

bool multinode(const Options& o) { return !o.multi.master.empty(); }
int global_rank(const Options& o, int local) { return multinode(o) ? o.multi.rank_offset + local : local; }
int world_size(const Options& o) { return multinode(o) ? o.multi.world_size : o.nranks; }

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

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse_args(argc, argv);
  g_prefix = o.prefix;
  std::string store, token;
  if (!store_address(o, store, token)) return 1;
  // Flight-recorder dumps land here (ours, unless the user chose a place), so
  // that on --timeout we can say which rank is behind and where.
  std::string dump_dir;
  bool own_dump_dir = false;
  if (const char* d = std::getenv("COMM_DUMP_DIR"); d && *d) {
    dump_dir = d;
  } else {
    char tmpl[] = "/tmp/commrun-XXXXXX";
    if (::mkdtemp(tmpl)) {
      dump_dir = tmpl;
      own_dump_dir = true;
    }
  }

  int sp[2];
  if (::pipe2(sp, O_CLOEXEC | O_NONBLOCK) != 0) {
    std::perror("commrun: pipe");
    return 1;
  }
  g_signal_pipe = sp[1];
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) ::sigaction(sig, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  JobEnv job{store, token, dump_dir, {}, {}};
  char exits_tmpl[] = "/tmp/commrun-exits-XXXXXX";
  if (::mkdtemp(exits_tmpl)) job.exit_notes = exits_tmpl;
  const std::vector<cpu_set_t> binding = plan_binding(o);
  std::vector<Rank> ranks(static_cast<std::size_t>(o.nranks));
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
    if (const int e = exec_status(status[0]); e != 0) {
      // Every rank would fail alike: say it once, stop what started, exit like a shell.
      const bool searched = std::strchr(o.program[0].c_str(), '/') == nullptr;
      std::fprintf(stderr, "commrun: cannot run '%s': %s (%s)%s\n", o.program[0].c_str(), std::strerror(e),
                   strerrorname_np(e) ? strerrorname_np(e) : "?",
                   e == ENOENT && searched ? "; it is not a file in any PATH directory" : "");
      for (int q = 0; q <= r; ++q) ::kill(-ranks[static_cast<std::size_t>(q)].pid, SIGKILL);
      for (int q = 0; q <= r; ++q) ::waitpid(ranks[static_cast<std::size_t>(q)].pid, nullptr, 0);
      if (own_dump_dir) remove_dir(dump_dir, "comm-flight-");
      if (!job.exit_notes.empty()) remove_dir(job.exit_notes, "");
      return e == ENOENT ? 127 : 126;
    }
  }

  const auto job_deadline = o.timeout_s > 0 ? Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                          std::chrono::duration<double>(o.timeout_s))
                                            : Clock::time_point::max();
  Clock::time_point kill_deadline = Clock::time_point::max();
  Clock::time_point drain_deadline = Clock::time_point::max();
  Clock::time_point dump_deadline = Clock::time_point::max();
  int exit_code = 0;
  bool stopping = false;
  std::string failure;

  auto running = [&] {
    return static_cast<int>(std::count_if(ranks.begin(), ranks.end(), [](const Rank& r) { return r.running; }));
  };
  // `others`: the trigger is a rank that failed, so the count excludes it.
  auto stop_all = [&](const std::string& why, int code, bool others) {
    if (stopping) return;
    stopping = true;
    exit_code = code;
    failure = why;
    const int n = running();
    if (n > 0)
      std::fprintf(stderr, "commrun: %s; stopping %s%d rank%s\n", why.c_str(), others ? "the other " : "", n,
                   n == 1 ? "" : "s");
    else std::fprintf(stderr, "commrun: %s\n", why.c_str());
    for (Rank& r : ranks)
      if (r.running) ::kill(-r.pid, SIGTERM);
    kill_deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.grace_s));
  };

  auto kill_all = [&] {
    for (Rank& r : ranks)
      if (r.running) ::kill(-r.pid, SIGKILL);
    kill_deadline = Clock::time_point::max();
  };

  // What is wrong with each rank's process, for the timeout summary.
  auto process_states = [&] {
    std::vector<std::string> states;
    for (const Rank& r : ranks) {
      const auto st = comm::detail::read_process_stat(r.pid);
      const std::string pid = "(pid " + std::to_string(r.pid) + ")";
      if (r.running && st && (st->state == 'T' || st->state == 't'))
        states.push_back(pid + " is stopped (SIGSTOP or a debugger)");
      else
        states.emplace_back();
    }
    return states;
  };
  std::vector<std::string> states_at_timeout;  // taken before SIGUSR1 (which kills programs without comm)
  auto finish_timeout = [&] {
    if (states_at_timeout.empty()) states_at_timeout = process_states();
    if (!dump_dir.empty())
      std::fputs(commrun::summarize_flight_dumps(commrun::read_flight_dumps(dump_dir), states_at_timeout).c_str(),
                 stderr);
    char secs[32];
    std::snprintf(secs, sizeof secs, "%g", o.timeout_s);
    stop_all(std::string("job timed out after ") + secs + " s (--timeout)", 124, false);
  };

  auto reap = [&] {
    for (;;) {
      // Peek first: while the exited rank is an unreaped zombie its process
      // group id cannot be reused, so killing the group cannot hit a stranger.
      siginfo_t info{};
      if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) break;
      const pid_t pid = info.si_pid;
      // Grandchildren left in the rank's group would keep its pipes open.
      ::kill(-pid, SIGKILL);
      int status = 0;
      if (::waitpid(pid, &status, 0) != pid) break;
      auto it = std::find_if(ranks.begin(), ranks.end(), [&](const Rank& r) { return r.pid == pid; });
      if (it == ranks.end()) continue;
      it->running = false;
      // A rank killed inside a shared-memory transport leaves its segments
      // in /dev/shm (16 MiB each for libfabric's shm): nobody else removes them.
      if (const auto n = comm::detail::remove_shm_files_of(pid))
        std::fprintf(stderr, "commrun: removed %zu shared-memory file(s) rank %d left in /dev/shm\n", n, it->index);
      const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (ok) continue;
      // A program without a comm communicator dies of the SIGUSR1 we sent to
      // ask for its flight recorder; that is part of the timeout, not a failure.
      const bool asked_to_dump = dump_deadline != Clock::time_point::max();
      if (asked_to_dump && WIFSIGNALED(status) && WTERMSIG(status) == SIGUSR1) continue;
      const std::string how = WIFEXITED(status) ? "exited with code " + std::to_string(WEXITSTATUS(status))
                                                : "was killed by signal " + signal_name(WTERMSIG(status));
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      const std::string what = "rank " + std::to_string(it->index) + " " + how;
      if (!stopping) write_exit_note(job.exit_notes, it->index, what);
      if (o.allow_fail.count(it->index)) {
        std::fprintf(stderr, "commrun: %s (allowed by --allow-fail)\n", what.c_str());
      } else if (!stopping) {
        stop_all(what, code, true);
      }
    }
  };

  std::vector<pollfd> fds;
  std::vector<Stream*> streams;
  std::vector<Rank*> owners;
  for (;;) {
    const auto now = Clock::now();
    // Every rank died of the SIGUSR1 that asked for dumps: still a timeout.
    if (running() == 0 && !stopping && dump_deadline != Clock::time_point::max()) finish_timeout();
    if (running() == 0 && drain_deadline == Clock::time_point::max()) drain_deadline = now + kDrainAfterExit;
    fds.clear();
    streams.clear();
    owners.clear();
    fds.push_back({sp[0], POLLIN, 0});
    for (Rank& r : ranks)
      for (Stream* s : {&r.out, &r.err})
        if (s->fd >= 0) {
          fds.push_back({s->fd, POLLIN, 0});
          streams.push_back(s);
          owners.push_back(&r);
        }
    if (running() == 0 && (streams.empty() || now >= drain_deadline)) break;

    const auto next = std::min({dump_deadline == Clock::time_point::max() ? job_deadline : dump_deadline,
                                kill_deadline, drain_deadline});
    long long wait_ms = -1;
    if (next != Clock::time_point::max())
      wait_ms = std::max<long long>(0, std::chrono::ceil<std::chrono::milliseconds>(next - now).count());
    const int rc = ::poll(fds.data(), fds.size(), wait_ms < 0 ? -1 : static_cast<int>(std::min<long long>(wait_ms, 1 << 30)));
    if (rc < 0 && errno != EINTR) {
      std::perror("commrun: poll");
      break;
    }
    if (rc > 0 && (fds[0].revents & POLLIN)) {
      unsigned char sigs[64];
      const ssize_t n = ::read(sp[0], sigs, sizeof sigs);
      for (ssize_t i = 0; i < n; ++i) {
        if (sigs[i] == SIGCHLD) continue;
        if (stopping && running() > 0) {
          // A second Ctrl-C: the user does not want to wait for the grace period.
          std::fprintf(stderr, "commrun: received %s again; sending SIGKILL\n", signal_name(sigs[i]).c_str());
          kill_all();
        }
        stop_all("received " + signal_name(sigs[i]), 128 + sigs[i], false);
      }
      reap();
    }
    for (std::size_t i = 0; rc > 0 && i < streams.size(); ++i)
      if (fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) pump(*owners[i], *streams[i]);

    const auto after = Clock::now();
    if (!stopping && after >= job_deadline && dump_deadline == Clock::time_point::max() && !dump_dir.empty()) {
      // Ask every rank for its flight recorder before stopping the job.
      states_at_timeout = process_states();
      for (Rank& r : ranks)
        if (r.running) ::kill(r.pid, SIGUSR1);
      dump_deadline = after + kDumpWait;
    }
    if (!stopping && after >= job_deadline && (dump_dir.empty() || after >= dump_deadline)) finish_timeout();
    if (stopping && after >= kill_deadline && running() > 0) {
      std::fprintf(stderr, "commrun: %d rank%s still running %g s after SIGTERM; sending SIGKILL\n", running(),
                   running() == 1 ? "" : "s", o.grace_s);
      kill_all();
    }
  }
  for (Rank& r : ranks)
    for (Stream* s : {&r.out, &r.err})
      if (s->fd >= 0) {
        emit(r, *s, true);
        ::close(s->fd);
      }
  if (own_dump_dir) remove_dir(dump_dir, "comm-flight-");
  if (!job.exit_notes.empty()) remove_dir(job.exit_notes, "");
  if (exit_code != 0) std::fprintf(stderr, "commrun: job failed: %s (exit code %d)\n", failure.c_str(), exit_code);
  return exit_code;
}
