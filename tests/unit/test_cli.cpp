// The one command-line parser (util/cli.hpp) of commrun, comm-bench,
// comm-info and the examples.

#include "util/cli.hpp"

#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

using comm::cli::Parser;
using comm::cli::UsageError;

namespace {

struct Opts {
  std::string name = "none";
  int n = 1;
  std::size_t bytes = 0;
  double seconds = 0;
  bool quiet = false;
  std::vector<std::string> sizes;
  std::vector<std::string> rest;
};

Parser make(Opts& o, bool with_rest = false) {
  Parser p("tool", "tool [options]");
  p.description("Does things.");
  p.text("--name", "NAME", "a name", o.name);
  p.section("numbers");
  p.integer("-n,--count", "N", "how many\nsecond line", o.n, 1, 100);
  p.bytes("-b,--bytes", "a size", o.bytes);
  p.real("--timeout", "S", "seconds", o.seconds, 0);
  p.list("--size", "SIZE", "repeatable", [&o](std::string_view v) { o.sizes.emplace_back(v); });
  p.flag("-q,--quiet", "say less", o.quiet);
  p.option("--dtype", "T", "a type", [](std::string_view v) {
    if (v != "f32") throw std::runtime_error("unknown dtype '" + std::string(v) + "'");
  });
  if (with_rest) p.rest("program", o.rest);
  return p;
}

std::string error_of(std::vector<std::string_view> args, bool with_rest = false) {
  Opts o;
  Parser p = make(o, with_rest);
  try {
    p.parse(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  FAIL("expected a UsageError for the arguments");
  return {};
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("cli: both value forms, short attached values, flags, lists, last one wins") {
  Opts o;
  Parser p = make(o);
  CHECK(p.parse({"--name", "a", "--name=b", "-n", "7", "-b64K", "--timeout=0.5", "--size", "8", "--size=1M", "-q",
                 "--dtype", "f32"}));
  CHECK(o.name == "b");
  CHECK(o.n == 7);
  CHECK(o.bytes == 64 * 1024);
  CHECK(o.seconds == 0.5);
  CHECK(o.sizes == std::vector<std::string>{"8", "1M"});
  CHECK(o.quiet);
  CHECK(p.given("--count"));
  CHECK(p.given("--name"));
  CHECK(p.given("--bytes"));
  Opts d;
  Parser q = make(d);
  CHECK(q.parse({}));
  CHECK_FALSE(q.given("--count"));
  CHECK(d.n == 1);  // defaults stay
  CHECK(d.name == "none");
}

TEST_CASE("cli: errors name the option, the value and what was expected") {
  CHECK(contains(error_of({"--nmae", "x"}), "unknown option '--nmae' (did you mean --name?)"));
  CHECK(contains(error_of({"--frobnicate"}), "valid options: --name, -n/--count, -b/--bytes, --timeout, --size"));
  CHECK_FALSE(contains(error_of({"--frobnicate"}), "did you mean"));
  CHECK(contains(error_of({"--count", "0"}), "--count '0' is not valid: expected an integer in [1, 100]"));
  CHECK(contains(error_of({"-n", "3x"}), "-n '3x' is not valid"));
  CHECK(contains(error_of({"-b", "12X"}), "-b '12X' is not valid: expected a byte count"));
  CHECK(contains(error_of({"--timeout", "-1"}), "expected a number greater than 0"));
  CHECK(contains(error_of({"--timeout", "1,5"}), "--timeout '1,5' is not valid"));  // no locale decimal comma
  CHECK(contains(error_of({"--name"}), "--name needs a value (NAME)"));
  CHECK(contains(error_of({"--name="}), "--name needs a value"));
  CHECK(contains(error_of({"--quiet=1"}), "--quiet takes no value"));
  CHECK(contains(error_of({"--dtype", "f17"}), "--dtype: unknown dtype 'f17'"));  // a setter's own error
  CHECK(contains(error_of({"stray"}), "unexpected argument 'stray'"));
  CHECK(contains(error_of({"--", "x"}), "unexpected argument 'x'"));
}

TEST_CASE("cli: the rest of the command line after the first positional argument or --") {
  Opts o;
  Parser p = make(o, true);
  CHECK(p.parse({"-n", "2", "prog", "--name", "x", "-q"}));
  CHECK(o.rest == std::vector<std::string>{"prog", "--name", "x", "-q"});
  CHECK(o.name == "none");  // belongs to the program
  CHECK_FALSE(o.quiet);
  Opts o2;
  Parser p2 = make(o2, true);
  CHECK(p2.parse({"--", "-q", "--help"}));
  CHECK(o2.rest == std::vector<std::string>{"-q", "--help"});
  Opts o3;
  Parser p3 = make(o3, true);
  CHECK(p3.parse({"-n", "2"}));
  CHECK(o3.rest.empty());
}

TEST_CASE("cli: --help is generated from the declarations") {
  Opts o;
  Parser p = make(o);
  CHECK_FALSE(p.parse({"-n", "5", "--help", "--bogus"}));  // nothing after --help is checked
  const std::string h = p.help();
  CAPTURE(h);
  CHECK(h.starts_with("usage: tool [options]\n\nDoes things.\n"));
  CHECK(contains(h, "\noptions\n  --name NAME             a name\n"));
  CHECK(contains(h, "\nnumbers\n  -n, --count N           how many\n                          second line\n"));
  CHECK(contains(h, "  -q, --quiet             say less\n"));
  CHECK(contains(h, "  -h, --help              this text\n"));
}

TEST_CASE("cli: declaring an option twice is a bug in the tool") {
  Parser p("tool", "tool");
  bool b = false;
  p.flag("--x", "x", b);
  CHECK_THROWS_AS(p.flag("-y,--x", "again", b), std::logic_error);
  CHECK_THROWS_AS(p.flag("--help", "reserved", b), std::logic_error);
  CHECK_THROWS_AS(p.flag("x", "no dash", b), std::logic_error);
}
