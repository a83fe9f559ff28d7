#include "select/tuning_file.hpp"
#include "util/c_locale.hpp"

#include <comm/error.hpp>
#include <comm/types.hpp>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <unistd.h>

namespace comm {
namespace json {

const Value* Value::find(std::string_view key) const {
  for (const auto& [k, v] : object)
    if (k == key) return &v;
  return nullptr;
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
    throw Error(ErrorCode::invalid_config, std::string(what_) + ": line " + std::to_string(line) + ", column " +
                                               std::to_string(col) + ": " + problem);
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
        v.object.emplace_back(std::move(key), value(depth + 1));
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
    // The grammar above already validated it; from_chars ignores the locale.
    const std::string text(s_.substr(start, pos_ - start));
    const std::optional<double> d = util::parse_double(text);
    if (!d || !std::isfinite(*d)) fail("number " + text + " is out of range");
    return *d;
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
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
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

}  // namespace json

namespace {

[[noreturn]] void bad_file(const std::string& path, const std::string& problem) {
  throw Error(ErrorCode::invalid_config,
              "tuning file '" + path + "': " + problem +
                  " (fix or delete the file; COMM_CALIBRATE=1 measures the machine and writes a new one)");
}

[[noreturn]] void unwritable(const std::string& path, const std::string& problem) {
  throw Error(ErrorCode::invalid_config, "tuning file '" + path + "' cannot be written: " + problem +
                                             " (point COMM_TUNING_FILE at a writable location)");
}

// A finite number at `key` of `obj` within (min, max]; nullopt if absent.
std::optional<double> number_at(const std::string& path, const json::Value& obj, std::string_view where,
                                std::string_view key, double min_exclusive, bool allow_min = false) {
  const json::Value* v = obj.find(key);
  if (!v) return std::nullopt;
  const std::string name = std::string(where) + "." + std::string(key);
  if (v->kind != json::Value::Kind::number)
    bad_file(path, name + " must be a number, not " + std::string(json::to_string(v->kind)));
  if (v->number < min_exclusive || (!allow_min && v->number == min_exclusive)) {
    std::ostringstream os = util::c_ostream();
    os << name << " = " << v->number << " is out of range (must be " << (allow_min ? ">= " : "> ") << min_exclusive
       << ")";
    bad_file(path, os.str());
  }
  return v->number;
}

void only_keys(const std::string& path, const json::Value& obj, std::string_view where,
               std::initializer_list<std::string_view> allowed) {
  for (const auto& [k, unused] : obj.object) {
    bool ok = false;
    std::string list;
    for (auto a : allowed) {
      ok = ok || k == a;
      list += (list.empty() ? "" : ", ") + std::string(a);
    }
    if (!ok) bad_file(path, "unknown key " + json::quote(k) + " in " + std::string(where) + " (expected " + list + ")");
  }
}

const json::Value& object_at(const std::string& path, const json::Value& v, std::string_view where) {
  if (v.kind != json::Value::Kind::object)
    bad_file(path, std::string(where) + " must be an object, not " + std::string(json::to_string(v.kind)));
  return v;
}

}  // namespace

namespace {

// The file's text, or nullopt if it does not exist; throws if it cannot be read.
std::optional<std::string> read_tuning_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return std::nullopt;
    bad_file(path, std::string("cannot be opened: ") + std::strerror(errno));
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) bad_file(path, "read error");
  return buf.str();
}

}  // namespace

bool load_tuning(const std::string& path, LinkMatrix& links, ComputeParams& compute) {
  const auto text = read_tuning_file(path);
  if (!text) return false;
  apply_tuning(*text, path, links, compute);
  return true;
}

bool load_tuning_agreed(const std::string& path, Store& store, int rank, LinkMatrix& links, ComputeParams& compute,
                        std::chrono::milliseconds timeout) {
  const std::string key = "tuning_file/text";
  if (rank == 0) {
    std::string message;
    try {
      const auto text = read_tuning_file(path);
      message = text ? "text:" + *text : "missing:";
    } catch (const Error& e) {
      message = std::string("error:") + e.what();
    }
    store.set(key + "/origin", path);
    store.set(key, message);
  }
  const std::string message = store.get(key, timeout);
  // Errors name rank 0's file: the one whose contents every rank applies.
  const std::string origin = store.get(key + "/origin", timeout);
  if (message.starts_with("missing:")) return false;
  if (message.starts_with("error:")) throw Error(ErrorCode::invalid_config, message.substr(6));
  if (!message.starts_with("text:"))
    throw Error(ErrorCode::store_failure, "tuning file '" + origin + "': malformed value at store key '" + key + "'");
  apply_tuning(message.substr(5), origin, links, compute);
  return true;
}

void apply_tuning(const std::string& text, const std::string& path, LinkMatrix& links, ComputeParams& compute) {
  const json::Value root = json::parse(text, "tuning file '" + path + "'");

  object_at(path, root, "the top level");
  only_keys(path, root, "the top level", {"comm_tuning_version", "links", "compute"});
  const auto version = number_at(path, root, "$", "comm_tuning_version", 0);
  if (!version) bad_file(path, "missing \"comm_tuning_version\" (this file was not written by comm)");
  // Version 1 lacks the rendezvous, large-data and per-operation fields; those keep their current values.
  if (*version != 1 && *version != kTuningFileVersion) {
    std::ostringstream os = util::c_ostream();
    os << "comm_tuning_version " << *version << " is not supported (this build reads versions 1 to "
       << kTuningFileVersion << ")";
    bad_file(path, os.str());
  }

  // Validate everything before changing anything.
  struct KindValues {
    LinkKind kind;
    std::optional<double> alpha, beta, threshold, extra, beta_large;
    std::optional<bool> receiver_copies;
  };
  std::vector<KindValues> kinds;
  if (const json::Value* l = root.find("links")) {
    object_at(path, *l, "links");
    for (const auto& [name, entry] : l->object) {
      LinkKind kind{};
      try {
        kind = parse_link_kind(name);
      } catch (const Error& e) {
        bad_file(path, "links: " + std::string(e.what()));
      }
      const std::string where = "links." + name;
      object_at(path, entry, where);
      only_keys(path, entry, where,
                {"alpha_us", "beta_gbps", "rndv_threshold_bytes", "rndv_extra_us", "beta_large_gbps",
                 "receiver_copies"});
      kinds.push_back({kind, number_at(path, entry, where, "alpha_us", 0, true),
                       number_at(path, entry, where, "beta_gbps", 0),
                       number_at(path, entry, where, "rndv_threshold_bytes", 0, true),
                       number_at(path, entry, where, "rndv_extra_us", 0, true),
                       number_at(path, entry, where, "beta_large_gbps", 0), std::nullopt});
      if (const json::Value* rc = entry.find("receiver_copies")) {
        if (rc->kind != json::Value::Kind::boolean)
          bad_file(path, where + ".receiver_copies must be a boolean, not " + std::string(json::to_string(rc->kind)));
        kinds.back().receiver_copies = rc->boolean;
      }
    }
  }
  ComputeParams c = compute;
  if (const json::Value* cv = root.find("compute")) {
    object_at(path, *cv, "compute");
    only_keys(path, *cv, "compute",
              {"reduce_gbps", "copy_gbps", "step_overhead_us", "op_overhead_us", "cache_bytes", "reduce_large_gbps",
               "copy_large_gbps"});
    if (auto v = number_at(path, *cv, "compute", "reduce_gbps", 0)) c.reduce_gbps = *v;
    if (auto v = number_at(path, *cv, "compute", "copy_gbps", 0)) c.copy_gbps = *v;
    if (auto v = number_at(path, *cv, "compute", "step_overhead_us", 0, true)) c.step_overhead_us = *v;
    if (auto v = number_at(path, *cv, "compute", "op_overhead_us", 0, true)) c.op_overhead_us = *v;
    if (auto v = number_at(path, *cv, "compute", "cache_bytes", 0, true)) c.cache_bytes = static_cast<std::size_t>(*v);
    if (auto v = number_at(path, *cv, "compute", "reduce_large_gbps", 0)) c.reduce_large_gbps = *v;
    if (auto v = number_at(path, *cv, "compute", "copy_large_gbps", 0)) c.copy_large_gbps = *v;
  }

  for (const auto& k : kinds)
    for (auto& link : links.links)
      if (link.kind == k.kind) {
        if (k.alpha) link.alpha_us = *k.alpha;
        if (k.beta) link.beta_gbps = *k.beta;
        if (k.threshold) link.rndv_threshold_bytes = static_cast<std::size_t>(*k.threshold);
        if (k.extra) link.rndv_extra_us = *k.extra;
        if (k.beta_large) link.beta_large_gbps = *k.beta_large;
        if (k.receiver_copies) link.receiver_copies = *k.receiver_copies;
        // comm-info shows the link's source next to its figures.
        if (link.detail.find("tuning file") == std::string::npos)
          link.detail += (link.detail.empty() ? "" : ", ") + std::string("from tuning file");
      }
  compute = c;
}

void save_tuning(const std::string& path, const LinkMatrix& links, const ComputeParams& compute) {
  std::ostringstream os = util::c_ostream();
  os.precision(6);
  os << "{\n  \"comm_tuning_version\": " << kTuningFileVersion << ",\n  \"links\": {";
  bool first = true;
  for (LinkKind kind : kAllLinkKinds) {
    if (kind == LinkKind::self) continue;
    for (int a = 0; a < links.n; ++a) {
      const LinkInfo* found = nullptr;
      for (int b = 0; b < links.n && !found; ++b)
        if (a != b && links.at(a, b).kind == kind) found = &links.at(a, b);
      if (!found) continue;
      os << (first ? "\n" : ",\n") << "    " << json::quote(to_string(kind)) << ": {\"alpha_us\": " << found->alpha_us
         << ", \"beta_gbps\": " << found->beta_gbps;
      // No threshold (every message eager) is the absence of the key.
      if (found->rndv_threshold_bytes != std::numeric_limits<std::size_t>::max())
        os << ", \"rndv_threshold_bytes\": " << found->rndv_threshold_bytes;
      os << ", \"rndv_extra_us\": " << found->rndv_extra_us;
      if (found->beta_large_gbps > 0) os << ", \"beta_large_gbps\": " << found->beta_large_gbps;
      os << ", \"receiver_copies\": " << (found->receiver_copies ? "true" : "false");
      os << "}";
      first = false;
      break;
    }
  }
  os << (first ? "},\n" : "\n  },\n");
  os << "  \"compute\": {\"reduce_gbps\": " << compute.reduce_gbps << ", \"copy_gbps\": " << compute.copy_gbps
     << ", \"step_overhead_us\": " << compute.step_overhead_us << ", \"op_overhead_us\": " << compute.op_overhead_us
     << ", \"cache_bytes\": " << compute.cache_bytes;
  if (compute.reduce_large_gbps > 0) os << ", \"reduce_large_gbps\": " << compute.reduce_large_gbps;
  if (compute.copy_large_gbps > 0) os << ", \"copy_large_gbps\": " << compute.copy_large_gbps;
  os << "}\n}\n";

  // Rename makes the update atomic for concurrent readers (other jobs loading it).
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) unwritable(path, tmp + ": " + std::strerror(errno));
    out << os.str();
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      unwritable(path, "write error on " + tmp);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    unwritable(path, "rename from " + tmp + ": " + why);
  }
}

}  // namespace comm
