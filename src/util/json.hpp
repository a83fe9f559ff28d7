#pragma once
// The one JSON module of comm: a DOM reader (RFC 8259) and a streaming writer,
// used by the tuning file, the flight recorder and its dumps, diagnostics,
// commrun's dump summary, comm-bench's results and comm-info --json.
//
// Ours rather than a dependency (nlohmann_json was the alternative): the
// reader already existed and is fuzzed by the tuning-file tests, its errors
// say "<what>: line L, column C: <problem>", it is ~400 lines, and the Conan
// recipe and the offline build need nothing more. Numbers are read and
// written with std::from_chars / std::to_chars: no locale can turn a decimal
// point into a comma. Private: never included by a public header.
//
// This file and json.cpp depend on nothing of libcomm (no comm::Error), so the
// tools can link them as the static library comm_util; libcomm compiles the
// same objects in. Callers inside the library turn ParseError into
// comm::Error(invalid_config).

#include <charconv>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace comm::json {

/// A malformed document: what() is "<what>: line L, column C: <problem>".
class ParseError : public std::runtime_error {
 public:
  ParseError(const std::string& what, std::size_t line, std::size_t column, const std::string& problem);
  std::size_t line() const noexcept { return line_; }
  std::size_t column() const noexcept { return column_; }

 private:
  std::size_t line_, column_;
};

struct Member;

/// A parsed JSON value. Object members keep their order of appearance;
/// duplicate keys are a parse error.
struct Value {
  enum class Kind { null, boolean, number, string, array, object };
  Kind kind = Kind::null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Value> array;
  std::vector<Member> object;

  /// The member `key` of an object, or nullptr (also when this is no object).
  const Value* find(std::string_view key) const;
  /// The string at `key`, or `fallback` when absent or not a string.
  std::string string_or(std::string_view key, std::string_view fallback = {}) const;
  /// The number at `key`, or `fallback` when absent or not a number.
  double number_or(std::string_view key, double fallback) const;
  /// This number as an integer, if it is a number with no fractional part
  /// that fits an int64.
  std::optional<std::int64_t> integer() const;
};

/// One member of an object (a struct, not std::pair: a pair of an incomplete
/// Value does not compile everywhere).
struct Member {
  std::string first;  ///< the key
  Value second;       ///< the value
};

/// "null", "a boolean", "a number", ... (for error messages).
std::string_view to_string(Value::Kind k) noexcept;

/// Parses a complete JSON text (one value, surrounding whitespace). Throws
/// ParseError naming `what`, the line and the column.
Value parse(std::string_view text, std::string_view what = "JSON");

/// `s` as a JSON string literal, quotes included.
std::string quote(std::string_view s);

/// `d` in the shortest form that reads back to the same double; "null" for
/// NaN and infinities (JSON has neither).
std::string number(double d);

/// A streaming writer: objects, arrays, strings, numbers, booleans, null.
/// Misuse (a value where a key is due, unbalanced ends, a second top-level
/// value) throws std::logic_error: it is a bug in the caller. Not thread safe.
class Writer {
 public:
  Writer& begin_object();
  Writer& end_object();
  Writer& begin_array();
  Writer& end_array();
  Writer& key(std::string_view k);
  Writer& value(std::string_view s);
  Writer& value(const char* s) { return value(std::string_view(s)); }
  Writer& value(const std::string& s) { return value(std::string_view(s)); }
  Writer& value(double d);
  Writer& value(bool b);
  template <std::integral T>
    requires(!std::same_as<T, bool> && !std::same_as<T, char>)
  Writer& value(T i) {
    char buf[24];
    return raw(integer_text(buf, i));
  }
  /// [[bytes, microseconds], ...]: the measured curves comm writes (tuning
  /// files, comm-info).
  Writer& value(const std::vector<std::pair<std::size_t, double>>& points) {
    begin_array();
    for (const auto& [bytes, us] : points) begin_array().value(bytes).value(us).end_array();
    return end_array();
  }
  Writer& null();
  /// A value that is already JSON text (e.g. a document made elsewhere).
  Writer& raw_value(std::string_view json) { return raw(json); }
  /// key(k).value(v) in one call.
  template <class T>
  Writer& member(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }

  /// key(k).value(v) when `present`, else key(k).null().
  template <class T>
  Writer& member_or_null(std::string_view k, bool present, const T& v) {
    key(k);
    return present ? value(v) : null();
  }

  /// Line breaks before each element of the outermost containers down to this
  /// depth (e.g. 2: one record per line); deeper containers stay on one line.
  /// 0 (the default): the whole document on one line, without spaces.
  Writer& set_break_depth(int depth) {
    break_depth_ = depth;
    return *this;
  }
  /// The document; throws std::logic_error if containers are still open.
  const std::string& str() const;

 private:
  struct Frame {
    bool object;
    bool has_elements = false;
    bool key_pending = false;
  };
  template <class T>
  static std::string_view integer_text(char (&buf)[24], T i) {
    const auto r = std::to_chars(buf, buf + sizeof buf, i);
    return std::string_view(buf, static_cast<std::size_t>(r.ptr - buf));
  }
  void before_value();
  Writer& raw(std::string_view token);
  Writer& close(bool object);
  void newline();

  std::string out_;
  std::vector<Frame> stack_;
  int break_depth_ = 0;
  bool done_ = false;
};

}  // namespace comm::json
