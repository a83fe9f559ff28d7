#include "select/override_parser.hpp"

#include <comm/error.hpp>

#include <algorithm>
#include <cctype>
#include <utility>

namespace comm {
namespace {

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  std::vector<OverrideRule> parse() {
    std::vector<OverrideRule> out;
    skip_space();
    if (pos_ == text_.size()) return out;
    for (;;) {
      entry(out);
      skip_space();
      if (pos_ == text_.size()) break;
      expect(';');
      skip_space();
      if (pos_ == text_.size()) break;  // a trailing ';' is harmless
    }
    check_overlaps(out);
    return out;
  }

 private:
  // Two rules for one collective that cover a common size would make the
  // order of the string decide silently; each size gets at most one rule.
  void check_overlaps(const std::vector<OverrideRule>& rules) {
    for (std::size_t j = 1; j < rules.size(); ++j)
      for (std::size_t i = 0; i < j; ++i) {
        const OverrideRule &a = rules[i], &b = rules[j];
        if (a.collective != b.collective) continue;
        const std::size_t lo = std::max(a.min_bytes, b.min_bytes), hi = std::min(a.max_bytes, b.max_bytes);
        if (lo >= hi) continue;
        pos_ = starts_[j];
        fail("the rule '" + rule_text(j) + "' for " + std::string(to_string(b.collective)) +
             " overlaps the rule '" + rule_text(i) + "' at position " + std::to_string(starts_[i]) + " (both cover " +
             range_text(lo, hi) + "); give every size range of a collective one rule");
      }
  }

  std::string rule_text(std::size_t k) const { return std::string(text_.substr(starts_[k], ends_[k] - starts_[k])); }

  static std::string bytes_text(std::size_t b) {
    for (const auto& [shift, unit] : {std::pair{30, "G"}, std::pair{20, "M"}, std::pair{10, "K"}})
      if (b && b % (std::size_t{1} << shift) == 0) return std::to_string(b >> shift) + unit;
    return std::to_string(b);
  }
  static std::string range_text(std::size_t lo, std::size_t hi) {
    if (lo == 0 && hi == std::numeric_limits<std::size_t>::max()) return "every size";
    return "sizes " + bytes_text(lo) + "-" +
           (hi == std::numeric_limits<std::size_t>::max() ? std::string() : bytes_text(hi));
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ErrorCode::invalid_config, "COMM_ALGO \"" + std::string(text_) + "\": at position " +
                                               std::to_string(pos_) + ": " + what +
                                               " (expected e.g. \"allreduce=direct:0-64K,ring:64K-;alltoall=pairwise\")");
  }

  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }

  void expect(char c) {
    skip_space();
    if (pos_ >= text_.size() || text_[pos_] != c)
      fail(std::string("expected '") + c + "' but found " +
           (pos_ >= text_.size() ? std::string("the end") : "'" + std::string(1, text_[pos_]) + "'"));
    ++pos_;
  }

  std::string_view name() {
    skip_space();
    const std::size_t start = pos_;
    while (pos_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_'))
      ++pos_;
    if (pos_ == start) fail("expected a name");
    return text_.substr(start, pos_ - start);
  }

  std::size_t size() {
    skip_space();
    const std::size_t start = pos_;
    std::size_t v = 0;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      const std::size_t d = static_cast<std::size_t>(text_[pos_] - '0');
      if (v > (std::numeric_limits<std::size_t>::max() - d) / 10) fail("size is too large");
      v = v * 10 + d;
      ++pos_;
    }
    if (pos_ == start) fail("expected a size in bytes (digits with an optional K, M or G)");
    if (pos_ < text_.size()) {
      int shift = 0;
      switch (std::toupper(static_cast<unsigned char>(text_[pos_]))) {
        case 'K': shift = 10; break;
        case 'M': shift = 20; break;
        case 'G': shift = 30; break;
        default: break;
      }
      if (shift) {
        ++pos_;
        if (pos_ < text_.size() && (text_[pos_] == 'B' || text_[pos_] == 'b')) ++pos_;
        if (v > (std::numeric_limits<std::size_t>::max() >> shift)) fail("size is too large");
        v <<= shift;
      }
    }
    return v;
  }

  void entry(std::vector<OverrideRule>& out) {
    const std::size_t at = pos_;
    const std::string_view coll_name = name();
    Collective coll;
    try {
      coll = parse_collective(coll_name);
    } catch (const Error& e) {
      pos_ = at;
      fail(e.what());
    }
    expect('=');
    for (;;) {
      skip_space();
      starts_.push_back(pos_);
      OverrideRule r{coll, std::string(name())};
      skip_space();
      if (pos_ < text_.size() && text_[pos_] == ':') {
        ++pos_;
        skip_space();
        if (pos_ == text_.size()) fail("expected a size range after ':' (e.g. 0-64K or 64K-)");
        if (text_[pos_] != '-') r.min_bytes = size();
        expect('-');
        skip_space();
        if (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) r.max_bytes = size();
        if (r.max_bytes <= r.min_bytes) fail("empty size range (the upper bound must exceed the lower)");
      }
      out.push_back(std::move(r));
      ends_.push_back(pos_);
      skip_space();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      break;
    }
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  std::vector<std::size_t> starts_, ends_;  // where each rule's text begins and ends
};

}  // namespace

std::vector<OverrideRule> parse_override(std::string_view text) { return Parser(text).parse(); }

}  // namespace comm
