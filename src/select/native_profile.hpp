#pragma once
// Measured times of a transport's own collectives (the algorithms its
// NativeCollectives offers, e.g. Gloo's "native"), from start-up calibration
// or the tuning file. The selector predicts a native algorithm from these
// points, so automatic selection can choose it, or not, on evidence; without
// a curve it falls back to the transport's own predict_us (usually none).

#include <comm/types.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace comm {

struct NativeCurve {
  Collective collective = Collective::allreduce;
  std::string algorithm;
  std::vector<std::pair<std::size_t, double>> points;  ///< (message bytes, µs), increasing bytes
};

struct NativeProfile {
  std::vector<NativeCurve> curves;

  const NativeCurve* find(Collective c, std::string_view algorithm) const;
  /// Adds or replaces the curve for (c, algorithm); sorts its points.
  void set(Collective c, std::string algorithm, std::vector<std::pair<std::size_t, double>> points);
  /// Predicted µs at `bytes`, negative without a curve. Between points the
  /// time is interpolated linearly in bytes (exact for alpha + bytes/beta);
  /// below the first point it is the first point's; beyond the last it grows
  /// with the last segment's time per byte (a transport's own algorithm that
  /// would be chosen at the last size comm times, 32 MiB, is timed there too:
  /// core/algorithm_timing.cpp time_native_choice). That segment (1-4 MiB from
  /// calibration) already runs at the from-memory rate: Gloo's two allreduce
  /// algorithms, extrapolated from it to 8-64 MiB, came within 0.79-1.24x of
  /// their measured time (tools/selection-check.sh, 2 of 3 runs; the third
  /// calibrated in a slow spell), where slowing the extension down further by
  /// the link's in-cache / from-memory rate ratio put them at 1.2-2.5x.
  double predict(Collective c, std::string_view algorithm, std::size_t bytes) const;
};

}  // namespace comm
