#include "plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <utility>

namespace comm::bench {
namespace {

constexpr double kWidth = 980, kHeight = 600;
constexpr double kLeft = 80, kRight = 280, kTop = 50, kBottom = 60;
constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                   "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
constexpr const char* kDashes[] = {"", "6,4", "2,3", "10,3,2,3"};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// "8", "1K", "64M": short power-of-two labels for the size axis.
std::string size_label(double bytes) {
  static const char* const units[] = {"", "K", "M", "G", "T"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[16];
  std::snprintf(buf, sizeof buf, "%g%s", bytes, units[u]);
  return buf;
}

std::string time_label(double us) {
  char buf[16];
  if (us >= 1e6) std::snprintf(buf, sizeof buf, "%gs", us / 1e6);
  else if (us >= 1e3) std::snprintf(buf, sizeof buf, "%gms", us / 1e3);
  else std::snprintf(buf, sizeof buf, "%gus", us);
  return buf;
}

}  // namespace

std::string render_svg(const std::vector<Result>& results, const std::string& title) {
  // Series in order of first appearance; transports keep their order too.
  std::vector<std::pair<std::string, std::vector<std::pair<double, double>>>> series;
  std::vector<std::string> transports;
  std::map<std::string, std::size_t> index;
  // Name the collective only when the results mix several.
  const bool mixed = std::any_of(results.begin(), results.end(),
                                 [&](const Result& r) { return r.coll != results.front().coll; });
  double xmin = INFINITY, xmax = 0, ymin = INFINITY, ymax = 0;
  for (const auto& r : results) {
    if (!(r.time_us > 0) || r.layout.bytes == 0) continue;
    const std::string algo = r.algo == "auto" ? "auto" : r.algo;
    const std::string key =
        r.transport + " " + (mixed ? std::string(to_string(r.coll)) + " " : std::string()) + algo;
    if (!index.count(key)) {
      index[key] = series.size();
      series.push_back({key, {}});
    }
    if (std::find(transports.begin(), transports.end(), r.transport) == transports.end())
      transports.push_back(r.transport);
    const double x = static_cast<double>(r.layout.bytes);
    series[index[key]].second.emplace_back(x, r.time_us);
    xmin = std::min(xmin, x);
    xmax = std::max(xmax, x);
    ymin = std::min(ymin, r.time_us);
    ymax = std::max(ymax, r.time_us);
  }

  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
    << "\" viewBox=\"0 0 " << kWidth << ' ' << kHeight << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << kWidth / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">" << escape(title)
    << "</text>\n";
  if (series.empty()) {
    s << "<text x=\"" << kWidth / 2 << "\" y=\"" << kHeight / 2
      << "\" text-anchor=\"middle\">no measurements to plot</text>\n</svg>\n";
    return s.str();
  }

  // Axes span whole powers of two (x) and decades (y) around the data.
  const double lx0 = std::floor(std::log2(xmin));
  const double xstep = std::max(1.0, std::ceil((std::ceil(std::log2(xmax)) - lx0) / 14));
  // The axis ends on a labelled tick.
  const double lx1 = lx0 + xstep * std::max(1.0, std::ceil((std::log2(xmax) - lx0) / xstep));
  const double ly0 = std::floor(std::log10(ymin)), ly1 = std::max(std::ceil(std::log10(ymax)), ly0 + 1);
  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  auto px = [&](double bytes) { return kLeft + (std::log2(bytes) - lx0) / (lx1 - lx0) * pw; };
  auto py = [&](double us) { return kTop + ph - (std::log10(us) - ly0) / (ly1 - ly0) * ph; };

  s << "<g stroke=\"#ddd\" stroke-width=\"1\">\n";
  for (double e = lx0; e <= lx1 + 1e-9; e += xstep)
    s << "<line x1=\"" << px(std::exp2(e)) << "\" y1=\"" << kTop << "\" x2=\"" << px(std::exp2(e)) << "\" y2=\""
      << kTop + ph << "\"/>\n";
  for (double e = ly0; e <= ly1 + 1e-9; e += 1)
    s << "<line x1=\"" << kLeft << "\" y1=\"" << py(std::pow(10, e)) << "\" x2=\"" << kLeft + pw << "\" y2=\""
      << py(std::pow(10, e)) << "\"/>\n";
  s << "</g>\n<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << pw << "\" height=\"" << ph
    << "\" fill=\"none\" stroke=\"black\"/>\n";
  for (double e = lx0; e <= lx1 + 1e-9; e += xstep)
    s << "<text x=\"" << px(std::exp2(e)) << "\" y=\"" << kTop + ph + 18 << "\" text-anchor=\"middle\">"
      << size_label(std::exp2(e)) << "</text>\n";
  for (double e = ly0; e <= ly1 + 1e-9; e += 1)
    s << "<text x=\"" << kLeft - 8 << "\" y=\"" << py(std::pow(10, e)) + 4 << "\" text-anchor=\"end\">"
      << time_label(std::pow(10, e)) << "</text>\n";
  s << "<text x=\"" << kLeft + pw / 2 << "\" y=\"" << kHeight - 18
    << "\" text-anchor=\"middle\">message size (bytes, log scale)</text>\n"
    << "<text transform=\"translate(20," << kTop + ph / 2
    << ") rotate(-90)\" text-anchor=\"middle\">time per operation (log scale)</text>\n";

  for (std::size_t i = 0; i < series.size(); ++i) {
    auto& [name, pts] = series[i];
    std::sort(pts.begin(), pts.end());
    const std::string transport = name.substr(0, name.find(' '));
    const auto t = static_cast<std::size_t>(std::find(transports.begin(), transports.end(), transport) -
                                            transports.begin());
    const char* color = kColors[i % std::size(kColors)];
    const char* dash = kDashes[t % std::size(kDashes)];
    s << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"1.8\"";
    if (*dash) s << " stroke-dasharray=\"" << dash << '"';
    s << " points=\"";
    for (const auto& [x, y] : pts) s << px(x) << ',' << py(y) << ' ';
    s << "\"/>\n";
    for (const auto& [x, y] : pts)
      s << "<circle cx=\"" << px(x) << "\" cy=\"" << py(y) << "\" r=\"2.5\" fill=\"" << color << "\"><title>"
        << escape(name) << ": " << size_label(x) << "B, " << y << " us</title></circle>\n";
    const double ly = kTop + 10 + 18 * static_cast<double>(i);
    const double lx = kLeft + pw + 20;
    s << "<line x1=\"" << lx << "\" y1=\"" << ly << "\" x2=\"" << lx + 30 << "\" y2=\"" << ly << "\" stroke=\""
      << color << "\" stroke-width=\"2\"";
    if (*dash) s << " stroke-dasharray=\"" << dash << '"';
    s << "/>\n<text x=\"" << lx + 38 << "\" y=\"" << ly + 4 << "\">" << escape(name) << "</text>\n";
  }
  s << "</svg>\n";
  return s.str();
}

}  // namespace comm::bench
