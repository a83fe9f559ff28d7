#pragma once
// Inputs and expected results of the deterministic-mode tests (unit and mp),
// computed here independently of the library: order-sensitive values and
// their rank-ordered fold, f32 and bf16 (bf16 widened to f32, added, rounded
// to nearest even after every step, as the library documents).

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace comm::test {

// Mixed signs and exponents spread over 24 binades: summing in another order
// changes many results.
inline float det_value(int rank, std::size_t i) {
  std::uint64_t h = (static_cast<std::uint64_t>(rank) + 1) * 0x9E3779B97F4A7C15ull ^ (i * 0xBF58476D1CE4E5B9ull);
  h ^= h >> 29;
  h *= 0x94D049BB133111EBull;
  h ^= h >> 32;
  const float mantissa = static_cast<float>(static_cast<int>(h % 20001) - 10000) / 7.0f;
  return std::ldexp(mantissa, static_cast<int>((h >> 20) % 24) - 12);
}

inline std::uint16_t to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1);  // round to nearest even (finite values only)
  return static_cast<std::uint16_t>(u >> 16);
}

inline float from_bf16(std::uint16_t h) {
  const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// ((x0 + x1) + x2) ... of element i over n ranks; reverse: from the last rank down.
inline std::vector<float> det_fold_f32(int n, std::size_t count, bool reverse = false) {
  std::vector<float> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    float acc = det_value(reverse ? n - 1 : 0, i);
    for (int k = 1; k < n; ++k) acc += det_value(reverse ? n - 1 - k : k, i);
    out[i] = acc;
  }
  return out;
}

inline std::vector<std::uint16_t> det_fold_bf16(int n, std::size_t count) {
  std::vector<std::uint16_t> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    std::uint16_t acc = to_bf16(det_value(0, i));
    for (int r = 1; r < n; ++r) acc = to_bf16(from_bf16(acc) + from_bf16(to_bf16(det_value(r, i))));
    out[i] = acc;
  }
  return out;
}

}  // namespace comm::test
