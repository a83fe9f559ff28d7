// commrun's explanation of a stuck job (tools/flight_summary.cpp), from
// flight-recorder dumps written by the library's own writer: strings holding
// JSON punctuation must not confuse it (the regex reader it replaced took the
// first '}' inside an error message for the end of the record).

#include "tools/flight_summary.hpp"
#include "util/json.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace {

struct Op {
  long seq;
  const char* collective;
  const char* state;
  const char* error = "";
};

std::string dump(int rank, int size, const std::vector<Op>& ops) {
  comm::json::Writer w;
  w.begin_object().member("rank", rank).member("size", size).member("communicator", 1);
  w.member("transport", "ucx \"quoted\" {braces}").member("reason", "SIGUSR1");
  w.key("operations").begin_array();
  long id = 0;
  for (const Op& o : ops) {
    w.begin_object().member("id", id++).member("seq", o.seq).member("collective", o.collective);
    w.member("steps_done", 3).member("steps_total", 8).member("algorithm", "ring").member("state", o.state);
    if (*o.error) w.member("error", o.error);
    w.end_object();
  }
  w.end_array().end_object();
  return w.str();
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("flight summary names the rank that is behind, whatever the strings hold") {
  const char* nasty = "rank 1 said: {\"seq\":99,\"collective\":\"barrier\",\"state\":\"done\"} }]";
  const std::vector<std::string> dumps = {
      dump(0, 3, {{0, "allreduce", "done"}, {1, "allreduce", "posted"}, {0, "send", "done"}}),
      dump(1, 3, {{0, "allreduce", "done", nasty}, {1, "allreduce", "posted", nasty}}),
      dump(2, 3, {{0, "allreduce", "done"}}),
  };
  const std::string s = commrun::summarize_flight_dumps(dumps);
  CAPTURE(s);
  CHECK(contains(s, "rank 0: allreduce #1 (ring) posted at step 3 of 8"));  // the send after it is skipped
  CHECK(contains(s, "rank 1: allreduce #1 (ring) posted at step 3 of 8"));
  CHECK(contains(s, "rank 2: allreduce #0 (ring) done"));
  CHECK(contains(s, "behind: rank(s) 2 have not started collective #1"));
  CHECK_FALSE(contains(s, "#99"));
  CHECK_FALSE(contains(s, "barrier"));
}

TEST_CASE("flight summary: missing and truncated dumps") {
  // A rank killed while writing leaves half a document: it counts as no dump.
  std::string whole = dump(1, 2, {{4, "allreduce", "posted"}});
  const std::vector<std::string> dumps = {dump(0, 2, {{4, "allreduce", "posted"}}), whole.substr(0, whole.size() / 2)};
  const std::string s = commrun::summarize_flight_dumps(dumps);
  CAPTURE(s);
  CHECK(contains(s, "rank 0: allreduce #4 (ring) posted"));
  CHECK(contains(s, "rank(s) 1 sent no dump"));
  CHECK(contains(commrun::summarize_flight_dumps({}), "no flight-recorder dumps arrived"));
}
