#pragma once
// Explains a stuck job from the ranks' flight-recorder dumps (the JSON that
// comm writes to COMM_DUMP_DIR on SIGUSR1): where each rank is, and which
// ranks are behind the others. Used by commrun on --timeout.

#include <string>
#include <vector>

namespace commrun {

// One line per rank and communicator, then a verdict. `dumps` are the JSON
// texts; `processes[r]`, when not empty, says what is wrong with rank r's
// process ("(pid 42) is stopped (SIGSTOP or a debugger)").
std::string summarize_flight_dumps(const std::vector<std::string>& dumps,
                                   const std::vector<std::string>& processes = {});

// Reads every comm-flight-*.json in `dir`.
std::vector<std::string> read_flight_dumps(const std::string& dir);

}  // namespace commrun
