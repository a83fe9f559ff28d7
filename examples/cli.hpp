#pragma once
// A small command-line reader shared by the examples, so that each example
// file shows communication code rather than argument parsing. Options are
// `--name value` or `--name` (a flag); values never start with "--".
// Unknown options and malformed numbers end the program with the usage text,
// because a silently ignored typo in a benchmark flag produces wrong numbers.

#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>

namespace example {

class Args {
 public:
  Args(int argc, char** argv, std::string usage) : usage_(std::move(usage)) {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "-h" || a == "--help") {
        std::printf("%s", usage_.c_str());
        std::exit(0);
      }
      if (a.rfind("--", 0) != 0 || a.size() == 2) fail("unexpected argument '" + a + "'");
      std::string value;
      if (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) value = argv[++i];
      values_[a.substr(2)] = value;
    }
  }

  std::string str(const std::string& name, const std::string& fallback) {
    used_.insert(name);
    const auto it = values_.find(name);
    if (it == values_.end()) return fallback;
    if (it->second.empty()) fail("--" + name + " needs a value");
    return it->second;
  }

  long long integer(const std::string& name, long long fallback, long long min) {
    const std::string s = str(name, std::to_string(fallback));
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (end == s.c_str() || *end != '\0' || v < min)
      fail("--" + name + " '" + s + "' is not an integer >= " + std::to_string(min));
    return v;
  }

  double real(const std::string& name, double fallback) {
    const std::string s = str(name, "");
    if (s.empty()) return fallback;
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (end == s.c_str() || *end != '\0' || !(v >= 0)) fail("--" + name + " '" + s + "' is not a number >= 0");
    return v;
  }

  bool flag(const std::string& name) {
    used_.insert(name);
    const auto it = values_.find(name);
    if (it == values_.end()) return false;
    if (!it->second.empty()) fail("--" + name + " takes no value (got '" + it->second + "')");
    return true;
  }

  bool given(const std::string& name) const { return values_.count(name) != 0; }

  /// Call after reading every option: rejects the ones nobody asked for.
  void finish() {
    for (const auto& [name, value] : values_)
      if (!used_.count(name)) fail("unknown option --" + name);
  }

  [[noreturn]] void fail(const std::string& why) const {
    std::fprintf(stderr, "error: %s\n\n%s", why.c_str(), usage_.c_str());
    std::exit(2);
  }

 private:
  std::string usage_;
  std::map<std::string, std::string> values_;
  std::set<std::string> used_;
};

}  // namespace example
