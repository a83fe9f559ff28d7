#pragma once
// The one command-line parser of commrun, comm-bench, comm-info and the
// examples. Options are declared once, with their help text; the parser then
//   - takes `--name value`, `--name=value`, and for one-letter options
//     `-x value` and `-xvalue` (nccl-tests and getopt habits);
//   - rejects an unknown option naming it, the closest valid one and the list
//     of valid ones, and a malformed value naming the option, the value and
//     what was expected (numbers parsed without the locale, sizes with K/M/G);
//   - generates --help from the declarations.
// A later occurrence of an option replaces an earlier one, except for list
// options, which collect every occurrence.
//
// Private (src/util, part of comm_util): depends on nothing of libcomm, so
// commrun links it without the library. Errors are UsageError.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace comm::cli {

/// Bad command line: what() names the option and says what was expected.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Thrown by a value's setter: what() says what was expected ("a number
/// greater than 1"); the parser adds the option and the value given.
class BadValue : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Parser {
 public:
  /// `program` names the tool in messages; `synopsis` is the usage line.
  Parser(std::string program, std::string synopsis);

  /// Text between the usage line and the options (paragraphs, as written).
  Parser& description(std::string text);
  /// Text after the options (exit codes, examples).
  Parser& epilog(std::string text);
  /// Starts a group of options under `title` in --help.
  Parser& section(std::string title);

  // Declarations. `names` is a comma-separated list such as "-b,--minbytes"
  // or "--size"; the last name is the canonical one (used by given()). `help`
  // may hold line breaks; its continuation lines are indented to match.

  /// An option without a value: `on` runs each time it appears.
  Parser& flag(std::string_view names, std::string help, std::function<void()> on);
  Parser& flag(std::string_view names, std::string help, bool& target);
  /// An option with a value, handed to `set` as typed. `set` may throw any
  /// std::exception: it becomes a UsageError naming the option.
  Parser& option(std::string_view names, std::string value_name, std::string help,
                 std::function<void(std::string_view)> set);
  Parser& text(std::string_view names, std::string value_name, std::string help, std::string& target);
  /// Every occurrence appended, e.g. --size 8 --size 64M.
  Parser& list(std::string_view names, std::string value_name, std::string help,
               std::function<void(std::string_view)> add);
  /// An integer in [min, max].
  Parser& integer(std::string_view names, std::string value_name, std::string help, std::int64_t& target,
                  std::int64_t min, std::int64_t max);
  Parser& integer(std::string_view names, std::string value_name, std::string help, int& target, int min,
                  int max = 1 << 30);
  Parser& integer(std::string_view names, std::string value_name, std::string help, std::size_t& target,
                  std::size_t min, std::size_t max = std::size_t{1} << 62);
  /// A byte count: digits with an optional K, M, G or T suffix (1K = 1024).
  Parser& bytes(std::string_view names, std::string help, std::size_t& target);
  /// A real number greater than `bound` (e.g. 0 for a positive duration), or
  /// at least `bound` with `or_equal`.
  Parser& real(std::string_view names, std::string value_name, std::string help, double& target, double bound,
               bool or_equal = false);

  /// Positional arguments: the first one that is not an option (or whatever
  /// follows `--`) and everything after it, untouched (commrun's program and
  /// its arguments). Without this, a positional argument is an error.
  Parser& rest(std::string value_name, std::vector<std::string>& out);

  /// Parses `args` (argv without the program name). Returns false if -h or
  /// --help was given (nothing else is then checked); throws UsageError.
  bool parse(const std::vector<std::string_view>& args);
  /// For main(): --help prints help() to stdout and exits 0; a UsageError is
  /// printed as "<program>: <message> (see <program> --help)" and exits 2.
  void parse_or_exit(int argc, char** argv);
  /// Same printing and exit status 2, for checks made after parsing.
  [[noreturn]] void fail(const std::string& message) const;

  /// True if the option whose canonical name is `name` appeared.
  bool given(std::string_view name) const { return given_.count(std::string(name)) != 0; }
  std::string help() const;

 private:
  struct Spec {
    std::vector<std::string> names;
    std::string value_name;  // "" = a flag
    std::string help;
    std::string section;
    std::function<void(std::string_view)> apply;
    const std::string& canonical() const { return names.back(); }
  };
  Parser& add(std::string_view names, std::string value_name, std::string help,
              std::function<void(std::string_view)> apply);
  const Spec* find(std::string_view name) const;
  [[noreturn]] void unknown(std::string_view arg) const;
  void apply(const Spec& spec, std::string_view used_name, std::string_view value);

  std::string program_, synopsis_, description_, epilog_, section_;
  std::vector<Spec> specs_;
  std::vector<std::string>* rest_ = nullptr;
  std::string rest_name_;
  std::set<std::string> given_;
};

}  // namespace comm::cli
