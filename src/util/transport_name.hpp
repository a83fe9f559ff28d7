#pragma once
// What a transport name may look like. Names become part of a file name
// (libcomm_<name>.so, loaded with dlopen), so only plain names are accepted:
// lowercase ASCII letters, digits and '_' (no '/', '.', '-' or spaces).
// Header-only so that commrun, which links nothing of comm, checks the same.

#include <string_view>

namespace comm::util {

inline bool is_plain_transport_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

// The rule, for error messages.
inline constexpr std::string_view kTransportNameRule =
    "a transport name (lowercase letters, digits and '_', at most 64)";

}  // namespace comm::util
