// libFuzzer target: the COMM_ALGO override parser must either return rules
// or throw comm::Error(invalid_config) — never crash, hang or throw anything else.

#include "select/override_parser.hpp"

#include <comm/error.hpp>

#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    for (const auto& rule : comm::parse_override(text))
      if (rule.algorithm.empty() || rule.max_bytes <= rule.min_bytes) std::abort();
  } catch (const comm::Error& e) {
    if (e.code() != comm::ErrorCode::invalid_config) std::abort();
  }
  return 0;
}
