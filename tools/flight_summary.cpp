#include "flight_summary.hpp"

#include "util/json.hpp"

#include <algorithm>
#include <dirent.h>
#include <fstream>
#include <map>
#include <sstream>

namespace commrun {
namespace {

struct LastOp {
  int rank = -1;
  long communicator = 0;
  long size = 0;
  bool has_op = false;
  long seq = -1;
  std::string collective, algorithm, state;
  long steps_done = 0, steps_total = 0;
};

// A dump that is not JSON (a rank killed while writing it) counts as no dump.
LastOp parse(const std::string& dump) {
  LastOp r;
  comm::json::Value root;
  try {
    root = comm::json::parse(dump, "flight-recorder dump");
  } catch (const comm::json::ParseError&) {
    return r;
  }
  const auto integer = [](const comm::json::Value& v, std::string_view key, long fallback) {
    const comm::json::Value* n = v.find(key);
    const auto i = n ? n->integer() : std::nullopt;
    return i ? static_cast<long>(*i) : fallback;
  };
  r.rank = static_cast<int>(integer(root, "rank", -1));
  r.communicator = integer(root, "communicator", 0);
  r.size = integer(root, "size", 0);
  const comm::json::Value* ops = root.find("operations");
  if (!ops) return r;
  // The newest entry that is a collective (send/recv carry no sequence number).
  for (auto it = ops->array.rbegin(); it != ops->array.rend(); ++it) {
    const std::string coll = it->string_or("collective");
    if (coll == "send" || coll == "recv") continue;
    r.has_op = true;
    r.seq = integer(*it, "seq", -1);
    r.collective = coll;
    r.algorithm = it->string_or("algorithm");
    r.state = it->string_or("state");
    r.steps_done = integer(*it, "steps_done", 0);
    r.steps_total = integer(*it, "steps_total", 0);
    break;
  }
  return r;
}

std::string describe(const LastOp& r) {
  if (!r.has_op) return "no collective yet";
  std::string s = r.collective + " #" + std::to_string(r.seq) + " (" + r.algorithm + ") " + r.state;
  if (r.state == "posted") s += " at step " + std::to_string(r.steps_done) + " of " + std::to_string(r.steps_total);
  return s;
}

}  // namespace

std::string summarize_flight_dumps(const std::vector<std::string>& dumps, const std::vector<std::string>& processes) {
  std::map<long, std::vector<LastOp>> by_comm;
  for (const auto& d : dumps) {
    LastOp r = parse(d);
    if (r.rank >= 0) by_comm[r.communicator].push_back(r);
  }
  std::ostringstream out;
  // A process that is stopped (SIGSTOP, a debugger) or gone holds up the
  // others whatever the dumps say: name it first.
  for (std::size_t r = 0; r < processes.size(); ++r)
    if (!processes[r].empty())
      out << "commrun:   rank " << r << " " << processes[r] << ": the others wait on it\n";
  if (by_comm.empty()) {
    out << "commrun: no flight-recorder dumps arrived (no rank had a live communicator)\n";
    return out.str();
  }
  for (auto& [comm, ranks] : by_comm) {
    std::sort(ranks.begin(), ranks.end(), [](const LastOp& a, const LastOp& b) { return a.rank < b.rank; });
    out << "commrun: communicator " << comm << ":\n";
    for (const auto& r : ranks) out << "commrun:   rank " << r.rank << ": " << describe(r) << "\n";
    long newest = -1;
    for (const auto& r : ranks) newest = std::max(newest, r.has_op ? r.seq : -1L);
    // Behind the newest collective: a rank whose own latest one is finished
    // has not started it (it is where the job waits); one still inside an
    // older one is waiting too, probably on a rank that sent no dump.
    std::vector<int> not_started, still_in, reported;
    for (const auto& r : ranks) {
      reported.push_back(r.rank);
      if ((r.has_op ? r.seq : -1L) >= newest) continue;
      (r.has_op && r.state == "posted" ? still_in : not_started).push_back(r.rank);
    }
    const long expected = ranks.front().size;
    if (static_cast<long>(ranks.size()) < expected) {
      out << "commrun:   rank(s)";
      for (long q = 0; q < expected; ++q)
        if (std::find(reported.begin(), reported.end(), static_cast<int>(q)) == reported.end()) out << " " << q;
      out << " sent no dump: they are not inside this communicator (stopped, exited, or stuck outside comm)"
          << (newest >= 0 ? " and hold up collective #" + std::to_string(newest) : std::string()) << "\n";
    }
    if (!not_started.empty()) {
      out << "commrun:   behind: rank(s)";
      for (int b : not_started) out << " " << b;
      out << " have not started collective #" << newest << ", which the others are in\n";
    }
    if (!still_in.empty()) {
      out << "commrun:   rank(s)";
      for (int b : still_in) out << " " << b;
      out << " are still in an earlier collective (waiting, like the others in #" << newest << ")\n";
    }
    if (not_started.empty() && still_in.empty() && newest >= 0)
      out << "commrun:   every rank that reported is in collective #" << newest << "\n";
  }
  return out.str();
}

std::vector<std::string> read_flight_dumps(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind("comm-flight-", 0) != 0 || name.size() < 5 || name.substr(name.size() - 5) != ".json") continue;
    std::ifstream in(dir + "/" + name);
    std::stringstream ss;
    ss << in.rdbuf();
    out.push_back(ss.str());
  }
  ::closedir(d);
  return out;
}

}  // namespace commrun
