#include "plot.hpp"

#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <utility>

namespace comm::bench {
namespace {

// Panel geometry: per transport a row of two panels (time, bus bandwidth),
// then one panel of pick/best; the legend on the right.
constexpr double kPanelW = 420, kPanelH = 260, kGapX = 90, kGapY = 70, kLeft = 80, kTop = 60;
constexpr double kLegendW = 250;
// Colour-blind-safe (Okabe-Ito, then Tableau) and a dash per slot, so no two
// algorithms look alike in colour or in grey.
constexpr const char* kColors[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00",
                                   "#56B4E9", "#8c564b", "#7f7f7f", "#bcbd22", "#17becf"};
constexpr const char* kDashes[] = {"", "7,4", "2,3", "10,3,2,3", "4,2,1,2"};
constexpr const char* kAutoColor = "#000000";
constexpr const char* kBestColor = "#F0C000";

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

std::string value_label(double v, const char* unit) {
  char buf[24];
  if (std::string(unit) == "us") {
    if (v >= 1e6) std::snprintf(buf, sizeof buf, "%gs", v / 1e6);
    else if (v >= 1e3) std::snprintf(buf, sizeof buf, "%gms", v / 1e3);
    else std::snprintf(buf, sizeof buf, "%gus", v);
  } else {
    std::snprintf(buf, sizeof buf, "%g", v);
  }
  return buf;
}

struct Point {
  double x = 0, y = 0, lo = 0, hi = 0;  // y and its p10..p90 band
};

// One plotting area: log2 x (bytes); y log10 or linear.
struct Panel {
  double x0 = 0, y0 = 0;          // top-left corner
  double lx0 = 0, lx1 = 1;        // log2 bytes range
  double vy0 = 0, vy1 = 1;        // log10 values (log) or values (linear)
  bool log_y = true;
  double px(double bytes) const { return x0 + (std::log2(bytes) - lx0) / (lx1 - lx0) * kPanelW; }
  double py(double v) const {
    const double t = log_y ? std::log10(std::max(v, 1e-12)) : v;
    return y0 + kPanelH - (std::clamp(t, vy0, vy1) - vy0) / (vy1 - vy0) * kPanelH;
  }
};

void draw_frame(std::ostringstream& s, const Panel& p, const std::string& title, const std::string& ylabel,
                const char* unit, double xstep) {
  s << "<g stroke=\"#e3e3e3\" stroke-width=\"1\">\n";
  for (double e = p.lx0; e <= p.lx1 + 1e-9; e += xstep)
    s << "<line x1=\"" << p.px(std::exp2(e)) << "\" y1=\"" << p.y0 << "\" x2=\"" << p.px(std::exp2(e)) << "\" y2=\""
      << p.y0 + kPanelH << "\"/>\n";
  std::vector<double> ticks;
  if (p.log_y)
    for (double e = p.vy0; e <= p.vy1 + 1e-9; e += 1) ticks.push_back(std::pow(10, e));
  else {
    const double range = p.vy1 - p.vy0, step = range <= 1.5 ? 0.1 : range <= 3 ? 0.25 : range <= 6 ? 0.5 : 1;
    for (double v = std::ceil(p.vy0 / step) * step; v <= p.vy1 + 1e-9; v += step) ticks.push_back(v);
  }
  for (double v : ticks)
    s << "<line x1=\"" << p.x0 << "\" y1=\"" << p.py(v) << "\" x2=\"" << p.x0 + kPanelW << "\" y2=\"" << p.py(v)
      << "\"/>\n";
  s << "</g>\n<rect x=\"" << p.x0 << "\" y=\"" << p.y0 << "\" width=\"" << kPanelW << "\" height=\"" << kPanelH
    << "\" fill=\"none\" stroke=\"black\"/>\n";
  for (double e = p.lx0; e <= p.lx1 + 1e-9; e += xstep)
    s << "<text x=\"" << p.px(std::exp2(e)) << "\" y=\"" << p.y0 + kPanelH + 16 << "\" text-anchor=\"middle\">"
      << size_label(std::exp2(e)) << "</text>\n";
  for (double v : ticks)
    s << "<text x=\"" << p.x0 - 6 << "\" y=\"" << p.py(v) + 4 << "\" text-anchor=\"end\">"
      << value_label(v, unit) << "</text>\n";
  s << "<text x=\"" << p.x0 + kPanelW / 2 << "\" y=\"" << p.y0 - 8 << "\" text-anchor=\"middle\" font-size=\"13\">"
    << escape(title) << "</text>\n<text transform=\"translate(" << p.x0 - 62 << "," << p.y0 + kPanelH / 2
    << ") rotate(-90)\" text-anchor=\"middle\">" << escape(ylabel) << "</text>\n";
}

void draw_series(std::ostringstream& s, const Panel& p, const std::vector<Point>& pts, const char* color,
                 const char* dash, double width, bool band, const std::string& name) {
  if (pts.empty()) return;
  if (band && pts.size() > 1) {
    s << "<polygon fill=\"" << color << "\" fill-opacity=\"0.12\" stroke=\"none\" points=\"";
    for (const auto& q : pts) s << p.px(q.x) << ',' << p.py(q.hi) << ' ';
    for (auto it = pts.rbegin(); it != pts.rend(); ++it) s << p.px(it->x) << ',' << p.py(it->lo) << ' ';
    s << "\"/>\n";
  }
  s << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"" << width << "\"";
  if (*dash) s << " stroke-dasharray=\"" << dash << '"';
  s << " points=\"";
  for (const auto& q : pts) s << p.px(q.x) << ',' << p.py(q.y) << ' ';
  s << "\"/>\n";
  for (const auto& q : pts)
    s << "<circle cx=\"" << p.px(q.x) << "\" cy=\"" << p.py(q.y) << "\" r=\"2.2\" fill=\"" << color << "\"><title>"
      << escape(name) << ": " << size_label(q.x) << "B, " << q.y << " (p10 " << q.lo << ", p90 " << q.hi
      << ")</title></circle>\n";
}

struct TransportData {
  std::string name;
  std::map<std::string, std::vector<Point>> time, busbw;  // algorithm -> points
  std::vector<Point> best_time, best_busbw;                // the fastest named algorithm per size
  std::vector<Point> ratio;                                // pick/best per size
};

double busbw_at(const Result& r, double us) { return r.time_us > 0 && us > 0 ? r.busbw_gbps * r.time_us / us : 0; }

std::vector<TransportData> collect(const std::vector<Result>& results, std::vector<std::string>& algos) {
  std::vector<TransportData> out;
  for (const auto& r : results) {
    if (!(r.time_us > 0) || r.layout.bytes == 0) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const TransportData& t) { return t.name == r.transport; });
    if (it == out.end()) it = out.insert(out.end(), TransportData{r.transport, {}, {}, {}, {}, {}});
    const auto x = static_cast<double>(r.layout.bytes);
    it->time[r.algo].push_back({x, r.time_us, r.p10_us, r.p90_us});
    // Bandwidth's band: the same iterations (p90 time = p10 bandwidth).
    it->busbw[r.algo].push_back({x, r.busbw_gbps, busbw_at(r, r.p90_us), busbw_at(r, r.p10_us)});
    if (r.algo != "auto" && std::find(algos.begin(), algos.end(), r.algo) == algos.end()) algos.push_back(r.algo);
  }
  for (auto& t : out) {
    std::map<double, std::pair<Point, Point>> best;  // size -> (time, busbw) of the fastest
    for (const auto& [algo, pts] : t.time) {
      if (algo == "auto") continue;
      for (std::size_t i = 0; i < pts.size(); ++i) {
        auto [b, fresh] = best.try_emplace(pts[i].x, pts[i], t.busbw[algo][i]);
        if (!fresh && pts[i].y < b->second.first.y) b->second = {pts[i], t.busbw[algo][i]};
      }
    }
    for (const auto& [x, pb] : best) {
      t.best_time.push_back(pb.first);
      t.best_busbw.push_back(pb.second);
    }
    for (const BenchColl c : kAllBenchColls)
      for (const auto& row : summarize(results, t.name, c))
        if (row.ratio() > 0) t.ratio.push_back({static_cast<double>(row.bytes), row.ratio(), row.ratio(), row.ratio()});
    std::sort(t.ratio.begin(), t.ratio.end(), [](const Point& a, const Point& b) { return a.x < b.x; });
    for (auto& [algo, pts] : t.time) std::sort(pts.begin(), pts.end(), [](auto& a, auto& b) { return a.x < b.x; });
    for (auto& [algo, pts] : t.busbw) std::sort(pts.begin(), pts.end(), [](auto& a, auto& b) { return a.x < b.x; });
  }
  return out;
}

// The y range of a log panel: whole decades around every point's band.
void fit_log_y(Panel& p, const std::vector<const std::vector<Point>*>& all) {
  double lo = INFINITY, hi = 0;
  for (const auto* pts : all)
    for (const auto& q : *pts) {
      if (q.lo > 0) lo = std::min(lo, q.lo);
      if (q.y > 0) lo = std::min(lo, q.y);
      hi = std::max({hi, q.hi, q.y});
    }
  if (!(lo < INFINITY) || hi <= 0) lo = 1, hi = 10;
  p.vy0 = std::floor(std::log10(lo));
  p.vy1 = std::max(std::ceil(std::log10(hi)), p.vy0 + 1);
}

}  // namespace

std::string render_svg(const std::vector<Result>& results, const std::string& title) {
  std::vector<std::string> algos;
  const std::vector<TransportData> data = collect(results, algos);
  const bool any_ratio = std::any_of(data.begin(), data.end(), [](const TransportData& t) { return !t.ratio.empty(); });
  const double rows = static_cast<double>(data.size()) + (any_ratio ? 1 : 0);
  const double width = kLeft + 2 * kPanelW + kGapX + 40 + kLegendW;
  const double height = kTop + std::max(1.0, rows) * (kPanelH + kGapY) + 20;

  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
    << "\" viewBox=\"0 0 " << width << ' ' << height << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"" << (width - kLegendW) / 2
    << "\" y=\"26\" text-anchor=\"middle\" font-size=\"15\">" << escape(title) << "</text>\n";
  if (data.empty()) {
    s << "<text x=\"" << width / 2 << "\" y=\"" << height / 2
      << "\" text-anchor=\"middle\">no measurements to plot</text>\n</svg>\n";
    return s.str();
  }
  double xmin = INFINITY, xmax = 0;
  for (const auto& t : data)
    for (const auto& [a, pts] : t.time)
      for (const auto& q : pts) xmin = std::min(xmin, q.x), xmax = std::max(xmax, q.x);
  const double lx0 = std::floor(std::log2(xmin));
  const double xstep = std::max(1.0, std::ceil((std::ceil(std::log2(xmax)) - lx0) / 8));
  const double lx1 = lx0 + xstep * std::max(1.0, std::ceil((std::log2(xmax) - lx0) / xstep));
  auto style = [&](const std::string& algo, std::size_t& slot) {
    slot = static_cast<std::size_t>(std::find(algos.begin(), algos.end(), algo) - algos.begin());
  };

  for (std::size_t row = 0; row < data.size(); ++row) {
    const TransportData& t = data[row];
    for (int which = 0; which < 2; ++which) {
      const auto& series = which == 0 ? t.time : t.busbw;
      const auto& best = which == 0 ? t.best_time : t.best_busbw;
      Panel p;
      p.x0 = kLeft + which * (kPanelW + kGapX);
      p.y0 = kTop + static_cast<double>(row) * (kPanelH + kGapY);
      p.lx0 = lx0;
      p.lx1 = lx1;
      std::vector<const std::vector<Point>*> all;
      for (const auto& [a, pts] : series) all.push_back(&pts);
      fit_log_y(p, all);
      draw_frame(s, p, t.name + (which == 0 ? ": time per operation" : ": bus bandwidth"),
                 which == 0 ? "time (log)" : "busbw GB/s (log)", which == 0 ? "us" : "GB/s", xstep);
      // The best fixed algorithm per size under everything, auto on top.
      draw_series(s, p, best, kBestColor, "", 7, false, "best fixed algorithm");
      for (const auto& [algo, pts] : series) {
        if (algo == "auto") continue;
        std::size_t slot = 0;
        style(algo, slot);
        draw_series(s, p, pts, kColors[slot % std::size(kColors)], kDashes[slot % std::size(kDashes)], 1.6, true,
                    algo);
      }
      if (auto it = series.find("auto"); it != series.end())
        draw_series(s, p, it->second, kAutoColor, "", 2.6, true, "auto");
    }
  }
  if (any_ratio) {
    Panel p;
    p.x0 = kLeft;
    p.y0 = kTop + static_cast<double>(data.size()) * (kPanelH + kGapY);
    p.lx0 = lx0;
    p.lx1 = lx1;
    p.log_y = false;
    double worst = 1.5;
    for (const auto& t : data)
      for (const auto& q : t.ratio) worst = std::max(worst, q.y);
    p.vy0 = 0.9;
    p.vy1 = std::ceil(std::min(worst, 5.0) * 2) / 2;
    draw_frame(s, p, "automatic pick / best fixed algorithm (1.10 dashed)", "pick / best", "", xstep);
    s << "<line x1=\"" << p.x0 << "\" y1=\"" << p.py(1.1) << "\" x2=\"" << p.x0 + kPanelW << "\" y2=\"" << p.py(1.1)
      << "\" stroke=\"#c00\" stroke-dasharray=\"5,4\"/>\n";
    for (std::size_t i = 0; i < data.size(); ++i)
      draw_series(s, p, data[i].ratio, kColors[i % std::size(kColors)], kDashes[i % std::size(kDashes)], 2, false,
                  data[i].name + " pick/best");
    for (std::size_t i = 0; i < data.size(); ++i) {
      const double ly = p.y0 + 16 + 16 * static_cast<double>(i), lx = p.x0 + kPanelW + kGapX;
      s << "<line x1=\"" << lx << "\" y1=\"" << ly << "\" x2=\"" << lx + 30 << "\" y2=\"" << ly << "\" stroke=\""
        << kColors[i % std::size(kColors)] << "\" stroke-width=\"2\" stroke-dasharray=\""
        << kDashes[i % std::size(kDashes)] << "\"/>\n<text x=\"" << lx + 38 << "\" y=\"" << ly + 4 << "\">"
        << escape(data[i].name) << "</text>\n";
    }
  }
  // Legend: every algorithm, auto, the best-fixed highlight and the band.
  const double lx = kLeft + 2 * kPanelW + kGapX + 30;
  double ly = kTop + 10;
  auto legend = [&](const char* color, const char* dash, double w, const std::string& name) {
    s << "<line x1=\"" << lx << "\" y1=\"" << ly << "\" x2=\"" << lx + 34 << "\" y2=\"" << ly << "\" stroke=\"" << color
      << "\" stroke-width=\"" << w << "\"";
    if (*dash) s << " stroke-dasharray=\"" << dash << '"';
    s << "/>\n<text x=\"" << lx + 42 << "\" y=\"" << ly + 4 << "\">" << escape(name) << "</text>\n";
    ly += 18;
  };
  for (std::size_t i = 0; i < algos.size(); ++i)
    legend(kColors[i % std::size(kColors)], kDashes[i % std::size(kDashes)], 2, algos[i]);
  legend(kAutoColor, "", 2.6, "auto (automatic selection)");
  legend(kBestColor, "", 7, "best fixed algorithm per size");
  s << "<rect x=\"" << lx << "\" y=\"" << ly - 6 << "\" width=\"34\" height=\"12\" fill=\"#0072B2\" fill-opacity=\"0.12\"/>"
    << "<text x=\"" << lx + 42 << "\" y=\"" << ly + 4 << "\">p10-p90 of the iterations</text>\n";
  s << "</svg>\n";
  return s.str();
}

}  // namespace comm::bench
