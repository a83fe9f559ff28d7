// libFuzzer target: the COMM_ALGO override parser must either return rules
// that never cover one size of a collective twice, or throw
// comm::Error(invalid_config) — never crash, hang or throw anything else.

#include "select/override_parser.hpp"

#include <comm/error.hpp>

#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto rules = comm::parse_override(text);
    for (const auto& rule : rules)
      if (rule.algorithm.empty() || rule.max_bytes <= rule.min_bytes) std::abort();
    // No size of a collective is covered by two rules.
    for (std::size_t j = 0; j < rules.size(); ++j)
      for (std::size_t i = 0; i < j; ++i)
        if (rules[i].collective == rules[j].collective && rules[i].min_bytes < rules[j].max_bytes &&
            rules[j].min_bytes < rules[i].max_bytes)
          std::abort();
  } catch (const comm::Error& e) {
    if (e.code() != comm::ErrorCode::invalid_config) std::abort();
  }
  return 0;
}
