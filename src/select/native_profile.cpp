#include "select/native_profile.hpp"

#include <algorithm>

namespace comm {

const NativeCurve* NativeProfile::find(Collective c, std::string_view algorithm) const {
  for (const auto& curve : curves)
    if (curve.collective == c && curve.algorithm == algorithm) return &curve;
  return nullptr;
}

void NativeProfile::set(Collective c, std::string algorithm, std::vector<std::pair<std::size_t, double>> points) {
  std::sort(points.begin(), points.end());
  for (auto& curve : curves)
    if (curve.collective == c && curve.algorithm == algorithm) {
      curve.points = std::move(points);
      return;
    }
  curves.push_back({c, std::move(algorithm), std::move(points)});
}

double NativeProfile::predict(Collective c, std::string_view algorithm, std::size_t bytes) const {
  const NativeCurve* curve = find(c, algorithm);
  if (!curve || curve->points.empty()) return -1.0;
  const auto& p = curve->points;
  if (bytes <= p.front().first) return p.front().second;
  const auto x = static_cast<double>(bytes);
  for (std::size_t i = 1; i < p.size(); ++i)
    if (bytes <= p[i].first) {
      const double x0 = static_cast<double>(p[i - 1].first), x1 = static_cast<double>(p[i].first);
      return p[i - 1].second + (p[i].second - p[i - 1].second) * (x - x0) / (x1 - x0);
    }
  // Beyond the last point: the last segment's time per byte (never negative).
  const auto& last = p.back();
  const double slope =
      p.size() < 2 ? 0.0
                   : std::max(0.0, (last.second - p[p.size() - 2].second) /
                                       static_cast<double>(last.first - p[p.size() - 2].first));
  return last.second + slope * (x - static_cast<double>(last.first));
}

}  // namespace comm
