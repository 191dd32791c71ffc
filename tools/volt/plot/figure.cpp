#include "plot/figure.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>

#include "plot/font.h"
#include "volt/core/error.h"
#include "volt/core/printable.h"

namespace volt::plot {
namespace {

// Chosen to be told apart on white and from each other; none is a grey, so the axes, grid and
// text (greys) never share a colour with a curve.
constexpr Color kPalette[] = {{0x1b, 0x6a, 0xc9}, {0xe4, 0x57, 0x2e}, {0x2e, 0x9e, 0x4f}, {0x9b, 0x4d, 0xca},
                              {0xd4, 0xa0, 0x17}, {0x17, 0xa2, 0xb8}, {0xd6, 0x33, 0x84}, {0x8a, 0x5a, 0x2b},
                              {0x5a, 0x6b, 0x00}, {0x00, 0x00, 0x80}};
constexpr Color kBackground{0xff, 0xff, 0xff};
constexpr Color kGrid{0xe8, 0xe8, 0xe8};
constexpr Color kAxis{0x44, 0x44, 0x44};
constexpr Color kInk{0x22, 0x22, 0x22};

constexpr int kMargin = 16;
constexpr int kPanelWidth = 540;
constexpr int kPanelHeight = 330;
constexpr int kMinPanelWidth = 200;
constexpr int kMinPanelHeight = 150;
constexpr int kMaxImageSide = 10000;
constexpr int kTitleScale = 3;
constexpr int kLabelScale = 2;
constexpr int kLabelHeight = kGlyphHeight * kLabelScale;
constexpr int kLabelCap = kCapHeight * kLabelScale;  // digits and capitals
constexpr double kLineWidth = 2.0;
constexpr double kMarkerRadius = 4.0;

// Keeps the end of a label (a run's version folder says most) when it is wider than `max_px`.
std::string fit(const std::string& s, int max_px, int scale) {
  const int max_chars = std::max(4, (max_px / scale + 1) / kGlyphAdvance);
  if (static_cast<int>(s.size()) <= max_chars) return s;
  return "..." + s.substr(s.size() - static_cast<size_t>(max_chars - 3));
}

bool is_hidden_by_default(const std::string& metric) {
  return metric == "step" || metric == "epoch";
}

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return lo > hi; }
};

// Widens a range to show a constant series (or a single step) in the middle of its panel.
Range widened(Range r, double pad_fraction) {
  if (r.empty()) return {0, 1};
  if (r.lo == r.hi) {
    const double d = r.lo == 0 ? 1.0 : std::fabs(r.lo) * 0.1;
    return {r.lo - d, r.hi + d};
  }
  // Halves keep the width finite for values near the largest doubles.
  const double pad = (r.hi / 2 - r.lo / 2) * 2 * pad_fraction;
  const double max = std::numeric_limits<double>::max();
  return {std::max(-max, r.lo - pad), std::min(max, r.hi + pad)};
}

// Consecutive points that fall in one pixel column become its first, lowest, highest and last
// point: the same pixels, and an SVG of a 200000-step run stays small.
std::vector<std::pair<double, double>> thin_out(const std::vector<std::pair<double, double>>& points) {
  std::vector<std::pair<double, double>> out;
  size_t i = 0;
  while (i < points.size()) {
    const double column = std::floor(points[i].first);
    size_t j = i, lo = i, hi = i;
    while (j < points.size() && std::floor(points[j].first) == column) {
      if (points[j].second < points[lo].second) lo = j;
      if (points[j].second > points[hi].second) hi = j;
      ++j;
    }
    size_t keep[] = {i, std::min(lo, hi), std::max(lo, hi), j - 1};
    for (size_t k = 0; k < 4; ++k) {
      if (k == 0 || keep[k] != keep[k - 1]) out.push_back(points[keep[k]]);
    }
    i = j;
  }
  return out;
}

}  // namespace

Color run_color(size_t n) {
  return kPalette[n % (sizeof(kPalette) / sizeof(kPalette[0]))];
}

std::string hex(const Color& c) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "#%02x%02x%02x", c.r, c.g, c.b);
  return buf;
}

std::vector<double> nice_ticks(double lo, double hi, int target, bool integers) {
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi)) return {lo};
  const double raw = hi / std::max(1, target) - lo / std::max(1, target);
  const int exponent = static_cast<int>(std::floor(std::log10(raw)));
  const double mag = std::pow(10.0, exponent);
  const double norm = raw / mag;
  double unit = norm < 1.5 ? 1.0 : norm < 3.0 ? 2.0 : norm < 7.0 ? 5.0 : 10.0;
  double step = unit * mag;
  // k * unit / 10^-e is the correctly rounded decimal (0.3, not 3 * 0.1 = 0.30000000000000004).
  double divisor = exponent < 0 ? std::pow(10.0, -exponent) : 1.0;
  double factor = exponent < 0 ? 1.0 : mag;
  if (integers && step < 1.0) {
    step = unit = factor = divisor = 1.0;
  }
  std::vector<double> ticks;
  const double first = std::ceil(lo / step - 1e-9);
  for (double k = first; ticks.size() < 100; k += 1.0) {
    double v = k * unit * factor / divisor;
    if (v > hi + step * 1e-9) break;
    if (std::fabs(v) < step * 1e-9) v = 0.0;
    ticks.push_back(v);
  }
  return ticks;
}

std::vector<std::string> tick_labels(const std::vector<double>& ticks) {
  std::vector<std::string> out;
  if (ticks.empty()) return out;
  double max_abs = 0;
  for (double t : ticks) max_abs = std::max(max_abs, std::fabs(t));
  const double spacing = ticks.size() > 1 ? ticks[1] - ticks[0] : (max_abs > 0 ? max_abs : 1.0);
  const bool exponent = max_abs >= 1e6 || (max_abs > 0 && max_abs < 1e-3);
  int decimals = 0;
  if (!exponent && spacing < 1) decimals = std::min(8, static_cast<int>(std::ceil(-std::log10(spacing) - 1e-9)));
  for (double t : ticks) {
    char buf[64];
    if (exponent) {
      std::snprintf(buf, sizeof(buf), "%.3g", t);
    } else {
      std::snprintf(buf, sizeof(buf), "%.*f", decimals, t);
    }
    std::string s = buf;
    if (s.find_first_not_of("-0.") == std::string::npos && s[0] == '-') s = s.substr(1);  // "-0.00"
    out.push_back(s);
  }
  return out;
}

std::vector<std::string> select_metrics(const std::vector<Run>& runs, const std::vector<std::string>& requested) {
  // Every metric of the runs, in first-seen order, and which have a finite value somewhere.
  std::vector<std::string> all;
  std::set<std::string> with_values;
  for (const Run& run : runs) {
    for (const Series& s : run.series) {
      if (std::find(all.begin(), all.end(), s.metric) == all.end()) all.push_back(s.metric);
      if (s.has_finite()) with_values.insert(s.metric);
    }
  }
  auto listing = [&] {
    std::string names;
    for (const auto& m : all) {
      if (with_values.count(m)) names += (names.empty() ? "" : ", ") + printable(m);
    }
    return names.empty() ? std::string("none: no run has logged a finite value") : names;
  };
  const std::string where = runs.size() == 1 ? in_quotes(runs[0].source) : std::to_string(runs.size()) + " runs";
  if (requested.empty()) {
    std::vector<std::string> out;
    for (const auto& m : all) {
      if (with_values.count(m) && !is_hidden_by_default(m)) out.push_back(m);
    }
    if (out.empty()) {
      throw ConfigError(where + " has no metric to plot (metrics with values: " + listing() +
                        "). Train with a logger that writes metrics.csv, or name a metric with --metrics.");
    }
    return out;
  }
  for (const auto& m : requested) {
    if (std::find(all.begin(), all.end(), m) == all.end()) {
      throw ConfigError("--metrics names " + in_quotes(m) + ", which " + where +
                        " did not log. Metrics there: " + listing() + ".");
    }
    if (!with_values.count(m)) {
      throw ConfigError("--metrics names " + in_quotes(m) + ", which has no finite value in " + where +
                        " (its cells are empty, nan or inf). Metrics with values: " + listing() + ".");
    }
  }
  return requested;
}

Figure layout(const std::vector<Run>& runs, const FigureOptions& options) {
  Figure fig;
  fig.metrics = select_metrics(runs, options.metrics);
  const int n = static_cast<int>(fig.metrics.size());
  const int cols = n == 1 ? 1 : n <= 4 ? 2 : 3;
  const int rows = (n + cols - 1) / cols;

  bool any_validation = false;
  for (const Run& run : runs) {
    for (const Series& s : run.series) {
      if (std::find(fig.metrics.begin(), fig.metrics.end(), s.metric) == fig.metrics.end()) continue;
      for (const Point& p : s.points) any_validation = any_validation || (p.validation && std::isfinite(p.value));
    }
  }

  // Legend entries: a swatch and the run's label; then what a marker means.
  const int width = options.width > 0 ? options.width : cols * kPanelWidth + 2 * kMargin;
  const int legend_room = width - 2 * kMargin;
  struct Entry {
    std::string label;
    Color color;
    bool line;
  };
  std::vector<Entry> entries;
  for (size_t r = 0; r < runs.size(); ++r)
    entries.push_back({fit(runs[r].label, legend_room - 60, kLabelScale), run_color(r), true});
  if (any_validation) entries.push_back({"validation", kAxis, false});
  constexpr int kSwatch = 28, kGap = 8, kSpacing = 28;
  auto entry_width = [&](const Entry& e) { return kSwatch + kGap + text_width(e.label, kLabelScale); };
  std::vector<std::vector<size_t>> legend_lines(1);
  int line_w = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const int w = entry_width(entries[i]);
    if (!legend_lines.back().empty() && line_w + kSpacing + w > legend_room) {
      legend_lines.emplace_back();
      line_w = 0;
    }
    line_w += (legend_lines.back().empty() ? 0 : kSpacing) + w;
    legend_lines.back().push_back(i);
  }
  const int title_y = 12;
  const int legend_y = title_y + kGlyphHeight * kTitleScale + 12;
  const int line_h = kLabelHeight + 10;
  const int header = legend_y + static_cast<int>(legend_lines.size()) * line_h + 6;

  const int height = options.height > 0 ? options.height : header + rows * kPanelHeight + kMargin;
  if (height > kMaxImageSide || width > kMaxImageSide) {
    throw ConfigError(std::to_string(n) + " panels make a " + std::to_string(width) + "x" + std::to_string(height) +
                      " image, more than " + std::to_string(kMaxImageSide) +
                      " pixels a side. Choose the metrics to draw with --metrics a,b.");
  }
  const int panel_w = (width - 2 * kMargin) / cols;
  const int panel_h = (height - header - kMargin) / rows;
  if (panel_w < kMinPanelWidth || panel_h < kMinPanelHeight) {
    throw ConfigError("a " + std::to_string(width) + "x" + std::to_string(height) + " image is too small for " +
                      std::to_string(n) + " panel" + (n == 1 ? "" : "s") + " (" + std::to_string(cols) + " by " +
                      std::to_string(rows) + ", each at least " + std::to_string(kMinPanelWidth) + "x" +
                      std::to_string(kMinPanelHeight) +
                      " pixels). Give a larger --width/--height, or fewer "
                      "--metrics.");
  }
  fig.width = width;
  fig.height = height;
  auto& out = fig.shapes;
  out.emplace_back(Rect{0, 0, double(width), double(height), kBackground});

  // Title and legend.
  std::string title = options.title;
  if (title.empty())
    title = runs.size() == 1 ? "Training curves: " + runs[0].label
                             : "Training curves: " + std::to_string(runs.size()) + " runs";
  out.emplace_back(Text{width / 2.0, double(title_y), fit(title, width - 2 * kMargin, kTitleScale), kTitleScale, kInk,
                        Anchor::kMiddle});
  for (size_t l = 0; l < legend_lines.size(); ++l) {
    int total = 0;
    for (size_t k = 0; k < legend_lines[l].size(); ++k)
      total += (k ? kSpacing : 0) + entry_width(entries[legend_lines[l][k]]);
    double x = (width - total) / 2.0;
    const double y = legend_y + static_cast<double>(l) * line_h;
    const double mid = y + kLabelCap / 2.0;
    for (size_t idx : legend_lines[l]) {
      const Entry& e = entries[idx];
      if (e.line) out.emplace_back(Polyline{{{x, mid}, {x + kSwatch, mid}}, e.color, kLineWidth + 1});
      out.emplace_back(Marker{x + kSwatch / 2.0, mid, kMarkerRadius, e.color});
      out.emplace_back(Text{x + kSwatch + kGap, y, e.label, kLabelScale, kInk, Anchor::kStart});
      x += entry_width(e) + kSpacing;
    }
  }

  for (int i = 0; i < n; ++i) {
    const std::string& metric = fig.metrics[static_cast<size_t>(i)];
    const double px = kMargin + (i % cols) * panel_w;
    const double py = header + (i / cols) * panel_h;

    // Data ranges over every run's finite values of this metric.
    Range xs, ys;
    for (const Run& run : runs) {
      for (const Series& s : run.series) {
        if (s.metric != metric) continue;
        for (const Point& p : s.points) {
          if (!std::isfinite(p.value)) continue;
          xs.add(static_cast<double>(p.step));
          ys.add(p.value);
        }
      }
    }
    const Range xr = widened(xs, 0.0);
    const Range yr = widened(ys, 0.06);
    const std::vector<double> xt = nice_ticks(xr.lo, xr.hi, std::max(2, (panel_w - 100) / 90), true);
    std::vector<double> yt = nice_ticks(yr.lo, yr.hi, std::max(2, (panel_h - 80) / 50));
    const std::vector<std::string> xl = tick_labels(xt);
    const std::vector<std::string> yl = tick_labels(yt);
    int y_label_w = 0;
    for (const auto& s : yl) y_label_w = std::max(y_label_w, text_width(s, kLabelScale));

    const double left = px + 8 + y_label_w + 10;
    const double right = px + panel_w - 14;
    const double top = py + 8 + kLabelHeight + 8;
    const double bottom = py + panel_h - (6 + kLabelHeight + 6 + kLabelHeight + 10);
    const double inset = 6;  // keeps end points and markers off the frame
    // (v - lo) / (hi - lo) in halves: finite for every finite v, lo and hi.
    auto frac = [](double v, const Range& r) { return (v / 2 - r.lo / 2) / (r.hi / 2 - r.lo / 2); };
    auto X = [&](double v) { return left + inset + frac(v, xr) * (right - left - 2 * inset); };
    auto Y = [&](double v) { return bottom - frac(v, yr) * (bottom - top); };

    out.emplace_back(
        Text{(left + right) / 2, py + 8, fit(metric, panel_w - 20, kLabelScale), kLabelScale, kInk, Anchor::kMiddle});
    // Grid, frame, ticks and their numbers.
    for (size_t k = 0; k < xt.size(); ++k) {
      const double x = std::round(X(xt[k]));
      if (x < left || x > right) continue;
      out.emplace_back(Polyline{{{x, top}, {x, bottom}}, kGrid, 1});
      out.emplace_back(Polyline{{{x, bottom}, {x, bottom + 5}}, kAxis, 1});
      out.emplace_back(Text{x, bottom + 8, xl[k], kLabelScale, kInk, Anchor::kMiddle});
    }
    for (size_t k = 0; k < yt.size(); ++k) {
      const double y = std::round(Y(yt[k]));
      if (y < top || y > bottom) continue;
      out.emplace_back(Polyline{{{left, y}, {right, y}}, kGrid, 1});
      out.emplace_back(Polyline{{{left - 5, y}, {left, y}}, kAxis, 1});
      out.emplace_back(Text{left - 8, y - kLabelCap / 2.0, yl[k], kLabelScale, kInk, Anchor::kEnd});
    }
    out.emplace_back(Polyline{{{left, top}, {right, top}, {right, bottom}, {left, bottom}, {left, top}}, kAxis, 1});
    out.emplace_back(
        Text{(left + right) / 2, bottom + 8 + kLabelHeight + 6, "step", kLabelScale, kAxis, Anchor::kMiddle});

    // Curves: a polyline per run of consecutive finite values (non-finite ones leave a gap), a
    // marker at every validation point and at any point that stands alone.
    for (size_t r = 0; r < runs.size(); ++r) {
      const Color color = run_color(r);
      for (const Series& s : runs[r].series) {
        if (s.metric != metric) continue;
        std::vector<std::pair<double, double>> segment;
        std::vector<Marker> markers;
        auto flush = [&] {
          if (segment.size() == 1) markers.push_back({segment[0].first, segment[0].second, kMarkerRadius, color});
          if (segment.size() > 1) out.emplace_back(Polyline{thin_out(segment), color, kLineWidth});
          segment.clear();
        };
        for (const Point& p : s.points) {
          if (!std::isfinite(p.value)) {
            flush();
            continue;
          }
          const double x = X(static_cast<double>(p.step)), y = Y(p.value);
          segment.emplace_back(x, y);
          if (p.validation) markers.push_back({x, y, kMarkerRadius, color});
        }
        flush();
        for (const Marker& m : markers) out.emplace_back(m);
      }
    }
  }
  return fig;
}

}  // namespace volt::plot
