#include "util/json.hpp"

#include <cmath>
#include <limits>

namespace comm::json {

ParseError::ParseError(const std::string& what, std::size_t line, std::size_t column, const std::string& problem)
    : std::runtime_error(what + ": line " + std::to_string(line) + ", column " + std::to_string(column) + ": " +
                         problem),
      line_(line),
      column_(column) {}

const Value* Value::find(std::string_view key) const {
  for (const auto& [k, v] : object)
    if (k == key) return &v;
  return nullptr;
}

std::string Value::string_or(std::string_view key, std::string_view fallback) const {
  const Value* v = find(key);
  return std::string(v && v->kind == Kind::string ? std::string_view(v->string) : fallback);
}

double Value::number_or(std::string_view key, double fallback) const {
  const Value* v = find(key);
  return v && v->kind == Kind::number ? v->number : fallback;
}

std::optional<std::int64_t> Value::integer() const {
  // 2^63 is exactly representable; anything at or above it does not fit.
  constexpr double kLimit = 9223372036854775808.0;
  if (kind != Kind::number || number != std::trunc(number) || number >= kLimit || number < -kLimit)
    return std::nullopt;
  return static_cast<std::int64_t>(number);
}

std::string_view to_string(Value::Kind k) noexcept {
  switch (k) {
    case Value::Kind::null: return "null";
    case Value::Kind::boolean: return "a boolean";
    case Value::Kind::number: return "a number";
    case Value::Kind::string: return "a string";
    case Value::Kind::array: return "an array";
    case Value::Kind::object: return "an object";
  }
  return "?";
}

namespace {

// JSON's two-character escapes: the letter after the backslash, and the
// character it stands for. '/' is read but never written escaped.
constexpr std::pair<char, char> kEscapes[] = {{'"', '"'},  {'\\', '\\'}, {'b', '\b'}, {'f', '\f'},
                                              {'n', '\n'}, {'r', '\r'},   {'t', '\t'}, {'/', '/'}};

const char* unescape(char letter) {
  for (const auto& e : kEscapes)
    if (e.first == letter) return &e.second;
  return nullptr;
}

const char* escape(char raw) {
  for (const auto& e : kEscapes)
    if (e.second == raw && raw != '/') return &e.first;
  return nullptr;
}

// Deep enough for any file we write; bounds recursion on hostile input.
constexpr int kMaxDepth = 64;

class Parser {
 public:
  Parser(std::string_view text, std::string_view what) : s_(text), what_(what) {}

  Value document() {
    Value v = value(0);
    skip_space();
    if (pos_ != s_.size()) fail("unexpected '" + std::string(1, s_[pos_]) + "' after the end of the value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& problem) const {
    std::size_t line = 1, col = 1;
    for (std::size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw ParseError(std::string(what_), line, col, problem);
  }

  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }

  bool eat(char c) {
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void expect(char c, const char* context) {
    if (!eat(c)) {
      if (pos_ >= s_.size()) fail(std::string("unexpected end of input, expected '") + c + "' " + context);
      fail(std::string("expected '") + c + "' " + context + ", found '" + s_[pos_] + "'");
    }
  }

  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Value value(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    skip_space();
    if (pos_ >= s_.size()) fail("unexpected end of input, expected a value");
    Value v;
    const char c = s_[pos_];
    if (c == '{') {
      ++pos_;
      v.kind = Value::Kind::object;
      if (eat('}')) return v;
      do {
        skip_space();
        if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a string as object key");
        std::string key = string_body();
        for (const auto& [k, unused] : v.object)
          if (k == key) fail("duplicate key " + quote(key));
        expect(':', "after an object key");
        v.object.push_back(Member{std::move(key), value(depth + 1)});
      } while (eat(','));
      expect('}', "to close the object");
    } else if (c == '[') {
      ++pos_;
      v.kind = Value::Kind::array;
      if (eat(']')) return v;
      do v.array.push_back(value(depth + 1));
      while (eat(','));
      expect(']', "to close the array");
    } else if (c == '"') {
      v.kind = Value::Kind::string;
      v.string = string_body();
    } else if (literal("true")) {
      v.kind = Value::Kind::boolean;
      v.boolean = true;
    } else if (literal("false")) {
      v.kind = Value::Kind::boolean;
    } else if (literal("null")) {
      v.kind = Value::Kind::null;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = Value::Kind::number;
      v.number = number();
    } else {
      fail(std::string("unexpected '") + c + "', expected a value");
    }
    return v;
  }

  double number() {
    const std::size_t start = pos_;
    auto digits = [&] {
      const std::size_t from = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ - from;
    };
    if (s_[pos_] == '-') ++pos_;
    if (pos_ < s_.size() && s_[pos_] == '0') ++pos_;
    else if (digits() == 0) fail("malformed number");
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      if (digits() == 0) fail("malformed number: digits expected after '.'");
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (digits() == 0) fail("malformed number: digits expected in the exponent");
    }
    // The grammar above already validated the text; from_chars reads it
    // without consulting the locale.
    double d = 0;
    const auto [end, ec] = std::from_chars(s_.data() + start, s_.data() + pos_, d);
    if (ec == std::errc::result_out_of_range || !std::isfinite(d))
      fail("number " + std::string(s_.substr(start, pos_ - start)) + " is out of range");
    if (ec != std::errc{} || end != s_.data() + pos_) fail("malformed number");
    return d;
  }

  unsigned hex4() {
    if (pos_ + 4 > s_.size()) fail("truncated \\u escape");
    unsigned u = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = s_[pos_++];
      u <<= 4;
      if (h >= '0' && h <= '9') u |= static_cast<unsigned>(h - '0');
      else if (h >= 'a' && h <= 'f') u |= static_cast<unsigned>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') u |= static_cast<unsigned>(h - 'A' + 10);
      else fail("bad hex digit in \\u escape");
    }
    return u;
  }

  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // At the opening quote; returns the decoded string and leaves pos_ after the closing quote.
  std::string string_body() {
    ++pos_;
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) fail("unterminated string");
      const char c = s_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character inside a string (escape it)");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) fail("unterminated escape");
      const char e = s_[pos_++];
      if (const char* raw = unescape(e)) {
        out += *raw;
        continue;
      }
      switch (e) {
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00) {
            if (!literal("\\u")) fail("unpaired UTF-16 surrogate in \\u escape");
            const unsigned lo = hex4();
            if (lo < 0xDC00 || lo >= 0xE000) fail("invalid low surrogate in \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            fail("unpaired UTF-16 surrogate in \\u escape");
          }
          append_utf8(out, cp);
          break;
        }
        default: fail(std::string("unknown escape '\\") + e + "'");
      }
    }
  }

  std::string_view s_;
  std::string_view what_;
  std::size_t pos_ = 0;
};

}  // namespace

Value parse(std::string_view text, std::string_view what) { return Parser(text, what).document(); }

std::string quote(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && c != '"' && c != '\\') {
      out += c;
    } else if (const char* letter = escape(c)) {
      out += '\\';
      out += *letter;
    } else {
      out += "\\u00";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  out += '"';
  return out;
}

std::string number(double d) {
  if (!std::isfinite(d)) return "null";
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, d);
  return std::string(buf, static_cast<std::size_t>(r.ptr - buf));
}

// ---- Writer

void Writer::newline() {
  out_ += '\n';
  out_.append(2 * stack_.size(), ' ');
}

void Writer::before_value() {
  if (done_) throw std::logic_error("json::Writer: a second value after the document was complete");
  if (stack_.empty()) return;
  Frame& f = stack_.back();
  if (f.object) {
    if (!f.key_pending) throw std::logic_error("json::Writer: a value inside an object needs a key first");
    f.key_pending = false;
    return;
  }
  const bool broken = static_cast<int>(stack_.size()) <= break_depth_;
  if (f.has_elements) out_ += broken || break_depth_ == 0 ? "," : ", ";
  if (broken) newline();
  f.has_elements = true;
}

Writer& Writer::raw(std::string_view token) {
  before_value();
  out_ += token;
  if (stack_.empty()) done_ = true;
  return *this;
}

Writer& Writer::begin_object() {
  before_value();
  out_ += '{';
  stack_.push_back({true});
  return *this;
}

Writer& Writer::begin_array() {
  before_value();
  out_ += '[';
  stack_.push_back({false});
  return *this;
}

Writer& Writer::close(bool object) {
  if (stack_.empty() || stack_.back().object != object || stack_.back().key_pending)
    throw std::logic_error(object ? "json::Writer: end_object without a matching begin_object (or after a bare key)"
                                  : "json::Writer: end_array without a matching begin_array");
  const bool broke = stack_.back().has_elements && static_cast<int>(stack_.size()) <= break_depth_;
  stack_.pop_back();
  if (broke) newline();
  out_ += object ? '}' : ']';
  if (stack_.empty()) done_ = true;
  return *this;
}

Writer& Writer::end_object() { return close(true); }
Writer& Writer::end_array() { return close(false); }

Writer& Writer::key(std::string_view k) {
  if (stack_.empty() || !stack_.back().object || stack_.back().key_pending)
    throw std::logic_error("json::Writer: key '" + std::string(k) + "' outside an object or after a key");
  Frame& f = stack_.back();
  if (f.has_elements) out_ += ',';
  // Compact documents (break depth 0) have no spaces; laid-out ones read
  // like hand-written JSON.
  const bool spaced = break_depth_ > 0;
  if (static_cast<int>(stack_.size()) <= break_depth_) newline();
  else if (f.has_elements && spaced) out_ += ' ';
  f.has_elements = true;
  f.key_pending = true;
  out_ += quote(k);
  out_ += spaced ? ": " : ":";
  return *this;
}

Writer& Writer::value(std::string_view s) { return raw(quote(s)); }
Writer& Writer::value(double d) { return raw(number(d)); }
Writer& Writer::value(bool b) { return raw(b ? "true" : "false"); }
Writer& Writer::null() { return raw("null"); }

const std::string& Writer::str() const {
  if (!stack_.empty())
    throw std::logic_error("json::Writer: " + std::to_string(stack_.size()) + " container(s) still open");
  return out_;
}

}  // namespace comm::json
