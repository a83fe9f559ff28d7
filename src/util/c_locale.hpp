#pragma once
// Numbers in text independent of the program's locale. A program that calls
// std::locale::global(std::locale("de_DE.UTF-8")) also switches the C locale
// (setlocale), so strtod would stop at '.', printf("%f") would write "274,3"
// and a default-constructed stream would group digits ("1.234"). Everything
// comm parses or prints for machines (environment variables, JSON, store
// values) goes through these instead.

#include <charconv>
#include <locale>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>

namespace comm::util {

// `s` with A-Z lowered (what std::tolower does in the "C" locale, whatever
// locale the program set): for names compared case-insensitively.
inline std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

// Streams that always use the classic "C" locale.
inline std::ostringstream c_ostream() {
  std::ostringstream os;
  os.imbue(std::locale::classic());
  return os;
}
inline std::istringstream c_istream(const std::string& text) {
  std::istringstream is(text);
  is.imbue(std::locale::classic());
  return is;
}

// The whole of `text` as a decimal floating-point number ("0.5", "2", "1e-3");
// nullopt for anything else (a sign other than '-', spaces, trailing text).
inline std::optional<double> parse_double(std::string_view text) {
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, std::chars_format::general);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// `v` with `digits` digits after the '.' ("%.*f" in the C locale).
inline std::string fixed(double v, int digits) {
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, digits);
  if (ec != std::errc{}) return std::to_string(v);  // beyond 64 characters: not a number we print
  return std::string(buf, end);
}

// The shortest text that reads back as exactly `v` ("%.17g" without the noise).
inline std::string shortest(double v) {
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc{} ? std::string(buf, end) : std::string("0");
}

}  // namespace comm::util
