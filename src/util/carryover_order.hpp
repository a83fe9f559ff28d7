#pragma once
// The order in which round `round` of a repeated comparison runs its n
// contenders, so that each contender follows every other one equally often
// (a Williams design, from crossover trials): what one contender's turn costs
// can depend on what the turn before it left behind (caches, the window lines
// a direct-memory algorithm reuses), and with one fixed order, or the same
// order rotated, the same contender always follows the same one. Balanced
// over every n rounds (n even) or 2n rounds (n odd).

#include <cstddef>

namespace comm::util {

// The contender at `position` (0..n-1) of round `round`.
constexpr std::size_t carryover_order(std::size_t n, std::size_t round, std::size_t position) noexcept {
  if (n < 2) return 0;
  const std::size_t period = n % 2 == 0 ? n : 2 * n;
  const std::size_t row = round % period;
  const bool mirrored = row >= n;  // n odd: the second n rounds run the first n backwards
  const std::size_t j = mirrored ? n - 1 - position : position;
  // First row 0, 1, n-1, 2, n-2, ...; row r adds r to every entry (mod n).
  const std::size_t first = j == 0 ? 0 : j % 2 == 1 ? (j + 1) / 2 : n - j / 2;
  return (first + row % n) % n;
}

}  // namespace comm::util
