// comm inside a program that switched to a comma-decimal locale
// (std::locale::global(std::locale("de_DE.UTF-8")), which also switches the C
// locale): configuration parsing, the tuning file, the flight recorder's JSON,
// the selector's notes and the link exchange must read and write numbers the
// same way as under "C". Exit 77 (ctest: skipped) when the locale is not
// installed here (tools/install-deps.sh generates it).

#define DOCTEST_CONFIG_IMPLEMENT
#include "local_group.hpp"
#include "select_fixtures.hpp"

#include "select/tuning_file.hpp"

#include <comm/comm.hpp>
#include <doctest/doctest.h>

#include <chrono>
#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <locale>
#include <mutex>
#include <regex>
#include <sstream>
#include <string>
#include <unistd.h>

using namespace comm;
using namespace std::chrono_literals;

namespace {

const char* const kCommaLocales[] = {"de_DE.UTF-8", "de_DE.utf8", "de_DE"};

// Installs a comma-decimal locale as the global one for the lifetime of the
// object (and restores "C"). The name that worked, or "" if none is installed.
std::string comma_locale() {
  for (const char* name : kCommaLocales) {
    try {
      std::locale l(name);
      return name;
    } catch (const std::runtime_error&) {
    }
  }
  return "";
}

class CommaLocale {
 public:
  CommaLocale() { std::locale::global(std::locale(comma_locale())); }
  ~CommaLocale() { std::locale::global(std::locale::classic()); }
};

class EnvVar {
 public:
  EnvVar(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~EnvVar() {
    if (old_.empty()) ::unsetenv(name_);
    else ::setenv(name_, old_.c_str(), 1);
  }

 private:
  const char* name_;
  std::string old_;
};

}  // namespace

TEST_CASE("locale: the comma-decimal locale is really in effect for the C and C++ libraries") {
  CommaLocale de;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", 274.3);
  CHECK(std::string(buf) == "274,3");  // what comm must not write
  std::ostringstream os;
  os << 0.5;
  CHECK(os.str() == "0,5");
}

TEST_CASE("locale: COMM_TIMEOUT and other numbers in the environment parse as in C") {
  CommaLocale de;
  {
    EnvVar t("COMM_TIMEOUT", "0.5");
    CHECK(Config::from_env().timeout == 500ms);
  }
  {
    EnvVar t("COMM_TIMEOUT", "0,5");  // the locale's spelling is not ours
    CHECK_THROWS_AS(Config::from_env(), Error);
  }
  EnvVar c("COMM_CHUNK", "64K");
  CHECK(Config::from_env().chunk_bytes == 64 * 1024);
}

TEST_CASE("locale: the tuning file is written with '.' and reads back exactly") {
  CommaLocale de;
  const std::string path =
      (std::filesystem::temp_directory_path() / ("comm-locale-" + std::to_string(::getpid()) + ".json")).string();
  LinkMatrix m;
  m.n = 2;
  m.links.resize(4);
  for (auto& l : m.links) {
    l.kind = LinkKind::tcp;
    l.alpha_us = 12.25;
    l.beta_gbps = 2.75;
    l.rndv_threshold_bytes = 1234567;
    l.rndv_extra_us = 3.5;
  }
  m.links[0].kind = m.links[3].kind = LinkKind::self;
  ComputeParams saved;
  saved.reduce_gbps = 6.125;
  saved.step_overhead_us = 0.0625;
  save_tuning(path, m, saved);
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text.find("12.25") != std::string::npos);
  CHECK(text.find("1234567") != std::string::npos);  // no digit grouping ("1.234.567")
  CHECK(text.find("12,25") == std::string::npos);
  LinkMatrix back = m;
  for (auto& l : back.links) l.alpha_us = l.beta_gbps = l.rndv_extra_us = 0, l.rndv_threshold_bytes = 0;
  ComputeParams c;
  REQUIRE(load_tuning(path, back, c));
  test::check_link_figures(back.at(0, 1), 12.25, 2.75, 1234567, 3.5);
  CHECK(c.reduce_gbps == 6.125);
  CHECK(c.step_overhead_us == 0.0625);
  std::filesystem::remove(path);
}

TEST_CASE("locale: flight recorder JSON, selector notes and the link exchange") {
  // The link matrix as a C-locale job sees it, to compare with.
  double alpha_c = 0, beta_c = 0;
  test::run_local(2, [&](Communicator& c) {
    if (c.rank() == 0) alpha_c = c.link(1, 0).alpha_us, beta_c = c.link(1, 0).beta_gbps;
  });
  CommaLocale de;
  // The texts are checked on this thread: std::regex under a non-classic
  // global locale shares libstdc++'s ctype cache between threads (a race
  // TSan reports in the library, not in comm).
  std::vector<std::string> jsons(2), notes;
  std::mutex mu;
  test::run_local(2, [&](Communicator& c) {
    std::vector<float> v(1000, 1.0f);
    c.allreduce(view(v), ReduceOp::sum);
    c.barrier();
    jsons[static_cast<std::size_t>(c.rank())] = c.flight_recorder_json();
    for (const CandidateCost& cc : c.candidates(Collective::allreduce, 1 << 20))
      if (cc.note.find("the best prediction") != std::string::npos) {
        std::lock_guard lk(mu);
        notes.push_back(cc.note);
      }
    CHECK(c.link(1, 0).alpha_us == alpha_c);
    CHECK(c.link(1, 0).beta_gbps == beta_c);
  });
  for (const std::string& json : jsons) {
    CAPTURE(json);
    // Stamps come from the coarse clock: whole microseconds print without a fraction.
    CHECK(std::regex_search(json, std::regex("\"start_us\":[0-9]+(\\.[0-9])?,")));
    CHECK(std::regex_search(json, std::regex("\"end_us\":[0-9]+(\\.[0-9])?,")));
    CHECK_FALSE(std::regex_search(json, std::regex("_us\":[0-9]+,[0-9]")));
  }
  for (const std::string& note : notes)
    CHECK_MESSAGE(std::regex_search(note, std::regex("^[0-9]+\\.[0-9]{2}x the best prediction$")), note);
}

int main(int argc, char** argv) {
  if (comma_locale().empty()) {
    std::printf("SKIPPED: no comma-decimal locale is installed (tried de_DE.UTF-8, de_DE.utf8, de_DE); "
                "run tools/install-deps.sh\n");
    return 77;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
