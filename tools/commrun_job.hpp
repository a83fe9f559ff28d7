#pragma once
// The ranks commrun started and what their environment says about the job;
// supervise() watches them until the job is over.

#include "commrun_options.hpp"

#include <sys/types.h>

#include <string>
#include <vector>

namespace commrun {

struct Stream {
  int fd = -1;      // read end of the rank's pipe; -1 once closed
  int target = 1;   // our stdout or stderr
  std::string buf;  // a partial line
};

// One started rank: its global index, process and output pipes.
struct Rank {
  int index = 0;
  pid_t pid = -1;
  bool running = false;
  Stream out, err;
};

// What every rank's environment says about the job.
struct JobEnv {
  std::string store, token, dump_dir;
  std::string store_pid;   // COMM_STORE_PID, for ranks other than 0
  std::string exit_notes;  // COMM_EXIT_NOTES: where commrun records ranks that ended badly
};

struct JobEnd {
  int exit_code = 0;     // 0, or the code of what stopped the job
  std::string failure;   // what stopped it ("rank 3 exited with code 1", ...)
};

// Forwards the ranks' output (prefixed unless --no-prefix), reaps them, stops
// the job when one fails, on a signal read from `signal_fd` or at --timeout
// (after asking every rank for its flight recorder in `dump_dir`), escalates
// to SIGKILL after --grace, and returns once every rank has ended and its
// output is flushed. Blocks; single-threaded.
JobEnd supervise(const Options& o, const JobEnv& job, const std::string& dump_dir, std::vector<Rank>& ranks,
                 int signal_fd);

}  // namespace commrun
