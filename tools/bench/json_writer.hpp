#pragma once
// A minimal streaming JSON writer (no dependencies): objects, arrays, strings,
// numbers (shortest round-trip form; NaN/inf become null), booleans, null.
// Misuse (a value where a key is due, unbalanced ends) throws
// comm::Error(internal): it is a bug in the caller.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace comm::bench {

class JsonWriter {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view k);
  JsonWriter& value(std::string_view s);
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(double d);
  JsonWriter& value(std::int64_t i);
  JsonWriter& value(int i) { return value(static_cast<std::int64_t>(i)); }
  JsonWriter& value(std::size_t u);
  JsonWriter& value(bool b);
  JsonWriter& null();

  // Line breaks before each element of the outermost containers to this depth
  // (records one per line); deeper containers stay on one line.
  void set_break_depth(int depth) { break_depth_ = depth; }
  // The document; throws if containers are still open.
  const std::string& str() const;

 private:
  struct Frame {
    bool object;
    bool has_elements = false;
    bool key_pending = false;
  };
  void before_value();
  void raw(std::string_view token);

  std::string out_;
  std::vector<Frame> stack_;
  int break_depth_ = 2;
  bool done_ = false;
};

// `s` as a JSON string literal, quotes included.
std::string json_quote(std::string_view s);

}  // namespace comm::bench
