#include "util/cli.hpp"

#include "util/units.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace comm::cli {
namespace {

std::vector<std::string> split_names(std::string_view names) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= names.size()) {
    const std::size_t end = std::min(names.find(',', start), names.size());
    const std::string_view n = names.substr(start, end - start);
    if (n.size() < 2 || n[0] != '-')
      throw std::logic_error("cli::Parser: option name '" + std::string(n) + "' must start with '-'");
    out.emplace_back(n);
    start = end + 1;
  }
  return out;
}

// Edit distance, for "did you mean": typos are one or two keystrokes.
std::size_t distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string join(const std::vector<std::string>& names, std::string_view sep) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : std::string(sep)) + n;
  return out;
}

std::string range_text(std::int64_t min, std::int64_t max, std::int64_t unbounded) {
  if (max >= unbounded) return "an integer >= " + std::to_string(min);
  return "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
}

}  // namespace

Parser::Parser(std::string program, std::string synopsis)
    : program_(std::move(program)), synopsis_(std::move(synopsis)) {}

Parser& Parser::description(std::string text) {
  description_ = std::move(text);
  return *this;
}

Parser& Parser::epilog(std::string text) {
  epilog_ = std::move(text);
  return *this;
}

Parser& Parser::section(std::string title) {
  section_ = std::move(title);
  return *this;
}

Parser& Parser::add(std::string_view names, std::string value_name, std::string help,
                    std::function<void(std::string_view)> apply) {
  Spec s{split_names(names), std::move(value_name), std::move(help), section_, std::move(apply)};
  for (const auto& n : s.names)
    if (n == "-h" || n == "--help" || find(n))
      throw std::logic_error("cli::Parser: option " + n + " declared twice");
  specs_.push_back(std::move(s));
  return *this;
}

Parser& Parser::flag(std::string_view names, std::string help, std::function<void()> on) {
  return add(names, "", std::move(help), [on = std::move(on)](std::string_view) { on(); });
}

Parser& Parser::flag(std::string_view names, std::string help, bool& target) {
  return flag(names, std::move(help), [&target] { target = true; });
}

Parser& Parser::option(std::string_view names, std::string value_name, std::string help,
                       std::function<void(std::string_view)> set) {
  if (value_name.empty()) throw std::logic_error("cli::Parser: option " + std::string(names) + " needs a value name");
  return add(names, std::move(value_name), std::move(help), std::move(set));
}

Parser& Parser::text(std::string_view names, std::string value_name, std::string help, std::string& target) {
  return option(names, std::move(value_name), std::move(help), [&target](std::string_view v) { target = v; });
}

Parser& Parser::list(std::string_view names, std::string value_name, std::string help,
                     std::function<void(std::string_view)> add_one) {
  return option(names, std::move(value_name), std::move(help), std::move(add_one));
}

Parser& Parser::integer(std::string_view names, std::string value_name, std::string help, std::int64_t& target,
                        std::int64_t min, std::int64_t max) {
  return option(names, std::move(value_name), std::move(help), [&target, min, max](std::string_view v) {
    const auto i = util::parse_integer(v);
    if (!i || *i < min || *i > max) throw BadValue(range_text(min, max, std::int64_t{1} << 62));
    target = *i;
  });
}

Parser& Parser::integer(std::string_view names, std::string value_name, std::string help, int& target, int min,
                        int max) {
  return option(names, std::move(value_name), std::move(help), [&target, min, max](std::string_view v) {
    const auto i = util::parse_integer(v);
    if (!i || *i < min || *i > max) throw BadValue(range_text(min, max, 1 << 30));
    target = static_cast<int>(*i);
  });
}

Parser& Parser::integer(std::string_view names, std::string value_name, std::string help, std::size_t& target,
                        std::size_t min, std::size_t max) {
  return option(names, std::move(value_name), std::move(help), [&target, min, max](std::string_view v) {
    const auto i = util::parse_integer(v);
    if (!i || *i < 0 || static_cast<std::size_t>(*i) < min || static_cast<std::size_t>(*i) > max)
      throw BadValue(range_text(static_cast<std::int64_t>(min), static_cast<std::int64_t>(max), std::int64_t{1} << 62));
    target = static_cast<std::size_t>(*i);
  });
}

Parser& Parser::bytes(std::string_view names, std::string help, std::size_t& target) {
  return option(names, "SIZE", std::move(help), [&target](std::string_view v) {
    const auto b = util::parse_bytes(v);
    if (!b) throw BadValue("a byte count with an optional K, M, G or T suffix, e.g. 8, 64K, 1M");
    target = *b;
  });
}

Parser& Parser::real(std::string_view names, std::string value_name, std::string help, double& target,
                     double bound, bool or_equal) {
  return option(names, std::move(value_name), std::move(help), [&target, bound, or_equal](std::string_view v) {
    const auto d = util::parse_real(v);
    if (!d || *d < bound || (*d == bound && !or_equal)) {
      char text[32];
      std::snprintf(text, sizeof text, "%g", bound);
      throw BadValue(std::string(or_equal ? "a number >= " : "a number greater than ") + text);
    }
    target = *d;
  });
}

Parser& Parser::rest(std::string value_name, std::vector<std::string>& out) {
  rest_name_ = std::move(value_name);
  rest_ = &out;
  return *this;
}

const Parser::Spec* Parser::find(std::string_view name) const {
  for (const auto& s : specs_)
    if (std::find(s.names.begin(), s.names.end(), name) != s.names.end()) return &s;
  return nullptr;
}

void Parser::unknown(std::string_view arg) const {
  const std::string_view name = arg.substr(0, arg.find('='));
  std::vector<std::string> valid;
  std::string closest;
  std::size_t best = std::max<std::size_t>(2, name.size() / 3) + 1;
  for (const auto& s : specs_) {
    valid.push_back(join(s.names, "/"));
    for (const auto& n : s.names)
      if (const std::size_t d = distance(name, n); d < best) {
        best = d;
        closest = n;
      }
  }
  valid.push_back("-h/--help");
  throw UsageError("unknown option '" + std::string(name) + "'" +
                   (closest.empty() ? "" : " (did you mean " + closest + "?)") + "; valid options: " +
                   join(valid, ", "));
}

void Parser::apply(const Spec& spec, std::string_view used, std::string_view value) {
  if (!spec.value_name.empty() && value.empty())
    throw UsageError(std::string(used) + " needs a value (" + spec.value_name + ")");
  try {
    spec.apply(value);
  } catch (const BadValue& e) {
    throw UsageError(std::string(used) + " '" + std::string(value) + "' is not valid: expected " + e.what());
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    throw UsageError(std::string(used) + ": " + e.what());
  }
  given_.insert(spec.canonical());
}

bool Parser::parse(const std::vector<std::string_view>& args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (a == "-h" || a == "--help") return false;
    const bool positional = a.size() < 2 || a[0] != '-' || a == "--";
    if (positional) {
      const std::size_t from = a == "--" ? i + 1 : i;
      if (!rest_ && from < args.size())
        throw UsageError("unexpected argument '" + std::string(args[from]) + "' (" + program_ +
                         " takes options only)");
      if (rest_) rest_->assign(args.begin() + static_cast<std::ptrdiff_t>(from), args.end());
      return true;
    }
    if (const Spec* s = find(a)) {
      if (s->value_name.empty()) {
        apply(*s, a, {});
        continue;
      }
      if (i + 1 >= args.size()) throw UsageError(std::string(a) + " needs a value (" + s->value_name + ")");
      apply(*s, a, args[++i]);
      continue;
    }
    if (a.starts_with("--") && a.find('=') != std::string_view::npos) {  // --name=value
      const std::string_view name = a.substr(0, a.find('='));
      const Spec* s = find(name);
      if (!s) unknown(a);
      if (s->value_name.empty()) throw UsageError(std::string(name) + " takes no value (got '" + std::string(a) + "')");
      apply(*s, name, a.substr(name.size() + 1));
      continue;
    }
    if (a[1] != '-' && a.size() > 2)  // -xVALUE
      if (const Spec* s = find(a.substr(0, 2)); s && !s->value_name.empty()) {
        apply(*s, a.substr(0, 2), a.substr(2));
        continue;
      }
    unknown(a);
  }
  if (rest_) rest_->clear();
  return true;
}

void Parser::fail(const std::string& message) const {
  std::fprintf(stderr, "%s: %s (see %s --help)\n", program_.c_str(), message.c_str(), program_.c_str());
  std::exit(2);
}

void Parser::parse_or_exit(int argc, char** argv) {
  const std::vector<std::string_view> args(argv + std::min(argc, 1), argv + argc);
  bool proceed = false;
  try {
    proceed = parse(args);
  } catch (const UsageError& e) {
    fail(e.what());
  }
  if (!proceed) {
    std::fputs(help().c_str(), stdout);
    std::exit(0);
  }
}

std::string Parser::help() const {
  constexpr std::size_t kColumn = 26;
  std::string out = "usage: " + synopsis_ + "\n";
  if (!description_.empty()) out += "\n" + description_ + (description_.ends_with('\n') ? "" : "\n");
  const auto line = [&](const std::string& left, const std::string& help) {
    std::string l = "  " + left;
    l += l.size() + 2 > kColumn ? "\n" + std::string(kColumn, ' ') : std::string(kColumn - l.size(), ' ');
    for (char c : help) l += c == '\n' ? "\n" + std::string(kColumn, ' ') : std::string(1, c);
    out += l + "\n";
  };
  std::string section = "\x01";  // no section seen yet
  for (const auto& s : specs_) {
    if (s.section != section) {
      section = s.section;
      out += "\n" + (section.empty() ? std::string("options") : section) + "\n";
    }
    line(join(s.names, ", ") + (s.value_name.empty() ? "" : " " + s.value_name), s.help);
  }
  if (specs_.empty()) out += "\noptions\n";
  line("-h, --help", "this text");
  if (!epilog_.empty()) out += "\n" + epilog_ + (epilog_.ends_with('\n') ? "" : "\n");
  return out;
}

}  // namespace comm::cli
