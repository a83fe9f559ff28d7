#include "json_writer.hpp"

#include <comm/error.hpp>

#include <charconv>
#include <cmath>
#include <cstdio>

namespace comm::bench {

std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

void JsonWriter::before_value() {
  if (done_) throw Error(ErrorCode::internal, "JsonWriter: a second value after the document was complete");
  if (stack_.empty()) return;
  Frame& f = stack_.back();
  if (f.object) {
    if (!f.key_pending) throw Error(ErrorCode::internal, "JsonWriter: a value inside an object needs a key first");
    f.key_pending = false;
    return;
  }
  if (f.has_elements) out_ += ',';
  if (static_cast<int>(stack_.size()) <= break_depth_) out_ += "\n" + std::string(2 * stack_.size(), ' ');
  f.has_elements = true;
}

void JsonWriter::raw(std::string_view token) {
  before_value();
  out_ += token;
  if (stack_.empty()) done_ = true;
}

JsonWriter& JsonWriter::begin_object() {
  before_value();
  out_ += '{';
  stack_.push_back({true});
  return *this;
}

JsonWriter& JsonWriter::begin_array() {
  before_value();
  out_ += '[';
  stack_.push_back({false});
  return *this;
}

JsonWriter& JsonWriter::end_object() {
  if (stack_.empty() || !stack_.back().object || stack_.back().key_pending)
    throw Error(ErrorCode::internal, "JsonWriter: end_object without a matching begin_object (or after a bare key)");
  const bool broke = stack_.back().has_elements && static_cast<int>(stack_.size()) <= break_depth_;
  stack_.pop_back();
  if (broke) out_ += "\n" + std::string(2 * stack_.size(), ' ');
  out_ += '}';
  if (stack_.empty()) done_ = true;
  return *this;
}

JsonWriter& JsonWriter::end_array() {
  if (stack_.empty() || stack_.back().object)
    throw Error(ErrorCode::internal, "JsonWriter: end_array without a matching begin_array");
  const bool broke = stack_.back().has_elements && static_cast<int>(stack_.size()) <= break_depth_;
  stack_.pop_back();
  if (broke) out_ += "\n" + std::string(2 * stack_.size(), ' ');
  out_ += ']';
  if (stack_.empty()) done_ = true;
  return *this;
}

JsonWriter& JsonWriter::key(std::string_view k) {
  if (stack_.empty() || !stack_.back().object || stack_.back().key_pending)
    throw Error(ErrorCode::internal, "JsonWriter: key '" + std::string(k) + "' outside an object or after a key");
  Frame& f = stack_.back();
  if (f.has_elements) out_ += ',';
  if (static_cast<int>(stack_.size()) <= break_depth_) out_ += "\n" + std::string(2 * stack_.size(), ' ');
  else if (f.has_elements) out_ += ' ';
  f.has_elements = true;
  f.key_pending = true;
  out_ += json_quote(k);
  out_ += ": ";
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view s) {
  raw(json_quote(s));
  return *this;
}

JsonWriter& JsonWriter::value(double d) {
  if (!std::isfinite(d)) return null();
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
  raw(std::string_view(buf, ec == std::errc{} ? static_cast<std::size_t>(end - buf) : 0));
  return *this;
}

JsonWriter& JsonWriter::value(std::int64_t i) {
  raw(std::to_string(i));
  return *this;
}

JsonWriter& JsonWriter::value(std::size_t u) {
  raw(std::to_string(u));
  return *this;
}

JsonWriter& JsonWriter::value(bool b) {
  raw(b ? "true" : "false");
  return *this;
}

JsonWriter& JsonWriter::null() {
  raw("null");
  return *this;
}

const std::string& JsonWriter::str() const {
  if (!stack_.empty())
    throw Error(ErrorCode::internal, "JsonWriter: " + std::to_string(stack_.size()) + " container(s) still open");
  return out_;
}

}  // namespace comm::bench
