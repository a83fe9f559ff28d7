// commrun's supervision loop: output forwarding, reaping, stopping the job.
#include "commrun_job.hpp"

#include "flight_summary.hpp"
#include "util/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

namespace commrun {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr std::size_t kMaxLine = 64 * 1024;  // longer lines are split, not buffered forever
constexpr auto kDumpWait = 2s;               // for flight-recorder dumps after SIGUSR1 on --timeout
constexpr auto kDrainAfterExit = 1s;         // grandchildren may hold a pipe open; don't wait on them

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return (abbrev ? std::string("SIG") + abbrev + " (" : "signal (") + std::to_string(sig) + ")";
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

// Writes the complete lines in s.buf (all of it at EOF) to our output, each
// prefixed with [r<rank>] when `prefix`.
void emit(const Rank& r, Stream& s, bool at_eof, bool prefix) {
  const std::string tag = prefix ? "[r" + std::to_string(r.index) + "] " : std::string();
  std::size_t start = 0;
  for (;;) {
    const std::size_t nl = s.buf.find('\n', start);
    if (nl == std::string::npos) break;
    write_all(s.target, tag + s.buf.substr(start, nl - start + 1));
    start = nl + 1;
  }
  s.buf.erase(0, start);
  if (!s.buf.empty() && (at_eof || s.buf.size() >= kMaxLine)) {
    write_all(s.target, tag + s.buf + "\n");
    s.buf.clear();
  }
}

// Reads what is available; false once the pipe is closed.
bool pump(const Rank& r, Stream& s, bool prefix) {
  char buf[16384];
  const ssize_t n = ::read(s.fd, buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) {
    emit(r, s, true, prefix);
    ::close(s.fd);
    s.fd = -1;
    return false;
  }
  s.buf.append(buf, static_cast<std::size_t>(n));
  emit(r, s, false, prefix);
  return true;
}

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

// Watches the running job: forwards the ranks' output, reaps them, stops the
// job when one fails, on a signal or at --timeout (after asking every rank
// for its flight recorder), and escalates to SIGKILL after --grace.
class Supervisor {
 public:
  Supervisor(const Options& o, const JobEnv& job, const std::string& dump_dir, std::vector<Rank>& ranks,
             int signal_fd)
      : o_(o), job_(job), dump_dir_(dump_dir), ranks_(ranks), signal_fd_(signal_fd) {
    if (o.timeout_s > 0)
      job_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.timeout_s));
  }

  // Runs until every rank has ended and its output is drained; returns the
  // exit code of the job (0, or that of what stopped it: see failure()).
  int run() {
    while (step()) {
    }
    return exit_code_;
  }
  const std::string& failure() const { return failure_; }

 private:
  static constexpr Clock::time_point kNever = Clock::time_point::max();

  int running() const {
    return static_cast<int>(std::count_if(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running; }));
  }
  bool dumps_requested() const { return dump_deadline_ != kNever; }

  // One round of the loop: false once the job is over.
  bool step() {
    const auto now = Clock::now();
    // Every rank died of the SIGUSR1 that asked for dumps: still a timeout.
    if (running() == 0 && !stopping_ && dumps_requested()) finish_timeout();
    if (running() == 0 && drain_deadline_ == kNever) drain_deadline_ = now + kDrainAfterExit;
    collect_fds();
    if (running() == 0 && (streams_.empty() || now >= drain_deadline_)) return false;
    const int rc = ::poll(fds_.data(), fds_.size(), poll_timeout_ms(now));
    if (rc < 0 && errno != EINTR) {
      std::perror("commrun: poll");
      return false;
    }
    if (rc > 0 && (fds_[0].revents & POLLIN)) on_signals();
    for (std::size_t i = 0; rc > 0 && i < streams_.size(); ++i)
      if (fds_[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) pump(*owners_[i], *streams_[i], o_.prefix);
    check_deadlines(Clock::now());
    return true;
  }

  // The signal pipe first, then every rank's open output pipe.
  void collect_fds() {
    fds_.clear();
    streams_.clear();
    owners_.clear();
    fds_.push_back({signal_fd_, POLLIN, 0});
    for (Rank& r : ranks_)
      for (Stream* s : {&r.out, &r.err})
        if (s->fd >= 0) {
          fds_.push_back({s->fd, POLLIN, 0});
          streams_.push_back(s);
          owners_.push_back(&r);
        }
  }

  int poll_timeout_ms(Clock::time_point now) const {
    const auto next = std::min({dumps_requested() ? dump_deadline_ : job_deadline_, kill_deadline_, drain_deadline_});
    if (next == kNever) return -1;
    const long long wait_ms = std::max<long long>(0, std::chrono::ceil<std::chrono::milliseconds>(next - now).count());
    return static_cast<int>(std::min<long long>(wait_ms, 1 << 30));
  }

  void on_signals() {
    unsigned char sigs[64];
    const ssize_t n = ::read(signal_fd_, sigs, sizeof sigs);
    for (ssize_t i = 0; i < n; ++i) {
      if (sigs[i] == SIGCHLD) continue;
      if (stopping_ && running() > 0) {
        // A second Ctrl-C: the user does not want to wait for the grace period.
        std::fprintf(stderr, "commrun: received %s again; sending SIGKILL\n", signal_name(sigs[i]).c_str());
        kill_all();
      }
      stop_all("received " + signal_name(sigs[i]), 128 + sigs[i], false);
    }
    reap();
  }

  void check_deadlines(Clock::time_point after) {
    if (!stopping_ && after >= job_deadline_ && !dumps_requested() && !dump_dir_.empty()) {
      // Ask every rank for its flight recorder before stopping the job.
      states_at_timeout_ = process_states();
      for (Rank& r : ranks_)
        if (r.running) ::kill(r.pid, SIGUSR1);
      dump_deadline_ = after + kDumpWait;
    }
    if (!stopping_ && after >= job_deadline_ && (dump_dir_.empty() || after >= dump_deadline_)) finish_timeout();
    if (stopping_ && after >= kill_deadline_ && running() > 0) {
      std::fprintf(stderr, "commrun: %d rank%s still running %g s after SIGTERM; sending SIGKILL\n", running(),
                   running() == 1 ? "" : "s", o_.grace_s);
      kill_all();
    }
  }

  // `others`: the trigger is a rank that failed, so the count excludes it.
  void stop_all(const std::string& why, int code, bool others) {
    if (stopping_) return;
    stopping_ = true;
    exit_code_ = code;
    failure_ = why;
    const int n = running();
    if (n > 0)
      std::fprintf(stderr, "commrun: %s; stopping %s%d rank%s\n", why.c_str(), others ? "the other " : "", n,
                   n == 1 ? "" : "s");
    else std::fprintf(stderr, "commrun: %s\n", why.c_str());
    for (Rank& r : ranks_)
      if (r.running) ::kill(-r.pid, SIGTERM);
    kill_deadline_ =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.grace_s));
  }

  void kill_all() {
    for (Rank& r : ranks_)
      if (r.running) ::kill(-r.pid, SIGKILL);
    kill_deadline_ = kNever;
  }

  // What is wrong with each rank's process, for the timeout summary.
  std::vector<std::string> process_states() const {
    std::vector<std::string> states;
    for (const Rank& r : ranks_) {
      const auto st = comm::detail::read_process_stat(r.pid);
      const std::string pid = "(pid " + std::to_string(r.pid) + ")";
      if (r.running && st && (st->state == 'T' || st->state == 't'))
        states.push_back(pid + " is stopped (SIGSTOP or a debugger)");
      else
        states.emplace_back();
    }
    return states;
  }

  void finish_timeout() {
    if (states_at_timeout_.empty()) states_at_timeout_ = process_states();
    if (!dump_dir_.empty())
      std::fputs(commrun::summarize_flight_dumps(commrun::read_flight_dumps(dump_dir_), states_at_timeout_).c_str(),
                 stderr);
    char secs[32];
    std::snprintf(secs, sizeof secs, "%g", o_.timeout_s);
    stop_all(std::string("job timed out after ") + secs + " s (--timeout)", 124, false);
  }

  void reap() {
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
      auto it = std::find_if(ranks_.begin(), ranks_.end(), [&](const Rank& r) { return r.pid == pid; });
      if (it != ranks_.end()) on_rank_end(*it, status);
    }
  }

  void on_rank_end(Rank& rank, int status) {
    rank.running = false;
    // A rank killed inside a shared-memory transport leaves its segments
    // in /dev/shm (16 MiB each for libfabric's shm): nobody else removes them.
    if (const auto n = comm::detail::remove_shm_files_of(rank.pid))
      std::fprintf(stderr, "commrun: removed %zu shared-memory file(s) rank %d left in /dev/shm\n", n, rank.index);
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (ok) return;
    // A program without a comm communicator dies of the SIGUSR1 we sent to
    // ask for its flight recorder; that is part of the timeout, not a failure.
    if (dumps_requested() && WIFSIGNALED(status) && WTERMSIG(status) == SIGUSR1) return;
    const std::string how = WIFEXITED(status) ? "exited with code " + std::to_string(WEXITSTATUS(status))
                                              : "was killed by signal " + signal_name(WTERMSIG(status));
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    const std::string what = "rank " + std::to_string(rank.index) + " " + how;
    if (!stopping_) write_exit_note(job_.exit_notes, rank.index, what);
    if (o_.allow_fail.count(rank.index)) {
      std::fprintf(stderr, "commrun: %s (allowed by --allow-fail)\n", what.c_str());
    } else if (!stopping_) {
      stop_all(what, code, true);
    }
  }

  const Options& o_;
  const JobEnv& job_;
  const std::string& dump_dir_;
  std::vector<Rank>& ranks_;
  const int signal_fd_;
  Clock::time_point job_deadline_ = kNever;
  Clock::time_point kill_deadline_ = kNever;
  Clock::time_point drain_deadline_ = kNever;
  Clock::time_point dump_deadline_ = kNever;
  int exit_code_ = 0;
  bool stopping_ = false;
  std::string failure_;
  std::vector<std::string> states_at_timeout_;  // taken before SIGUSR1 (which kills programs without comm)
  std::vector<pollfd> fds_;
  std::vector<Stream*> streams_;
  std::vector<Rank*> owners_;
};

// What the ranks wrote last without a newline.
void flush_output(std::vector<Rank>& ranks, bool prefix) {
  for (Rank& r : ranks)
    for (Stream* s : {&r.out, &r.err})
      if (s->fd >= 0) {
        emit(r, *s, true, prefix);
        ::close(s->fd);
      }
}

}  // namespace

JobEnd supervise(const Options& o, const JobEnv& job, const std::string& dump_dir, std::vector<Rank>& ranks,
                 int signal_fd) {
  Supervisor supervisor(o, job, dump_dir, ranks, signal_fd);
  JobEnd end;
  end.exit_code = supervisor.run();
  end.failure = supervisor.failure();
  flush_output(ranks, o.prefix);
  return end;
}

}  // namespace commrun
