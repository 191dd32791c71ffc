#pragma once
// The drawing of `volt plot` as a list of shapes in pixel coordinates (origin top left), built
// from Series by layout() and turned into a PNG or an SVG by render.h. Both formats draw the
// same shapes, so what a test checks on one holds for the other.
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "plot/series.h"

namespace volt::plot {

struct Color {
  uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Color& o) const { return r == o.r && g == o.g && b == o.b; }
};

/// The colour of the n-th run (a fixed palette of 10 distinct colours, then repeating).
Color run_color(size_t n);
/// "#rrggbb".
std::string hex(const Color& c);

struct Rect {
  double x, y, w, h;
  Color fill;
};
/// A thick polyline (a single point is not drawn; markers show those).
struct Polyline {
  std::vector<std::pair<double, double>> points;
  Color color;
  double width;
};
/// A filled disc with a thin white outline.
struct Marker {
  double x, y, radius;
  Color color;
};
enum class Anchor { kStart, kMiddle, kEnd };
/// Text on the bitmap font's grid: `y` is the top of the glyph cells, each glyph pixel a
/// `scale` x `scale` square; `anchor` places x at the start, middle or end of the text.
struct Text {
  double x, y;
  std::string text;
  int scale;
  Color color;
  Anchor anchor;
};
using Shape = std::variant<Rect, Polyline, Marker, Text>;

struct Figure {
  int width = 0, height = 0;
  std::vector<Shape> shapes;         ///< drawn in order
  std::vector<std::string> metrics;  ///< one panel each, in order
};

struct FigureOptions {
  /// Panels to draw; empty: every metric with a finite value except "step" and "epoch".
  std::vector<std::string> metrics;
  std::string title;  ///< empty: "Volt: <run labels>"
  int width = 0;      ///< 0: from the number of panels
  int height = 0;
};

/// The metrics to draw: `requested` when given (each must have a finite value in some run:
/// otherwise volt::ConfigError naming it and listing the metrics the runs have), else all.
std::vector<std::string> select_metrics(const std::vector<Run>& runs, const std::vector<std::string>& requested);

/// Lays out one panel per metric (metric against step, runs overlaid in run_color order,
/// validation points as markers, gaps at non-finite values), with axes, ticks, a legend and
/// a title.
Figure layout(const std::vector<Run>& runs, const FigureOptions& options);

/// About 5 "nice" tick values (1, 2 or 5 times a power of ten apart) covering [lo, hi].
std::vector<double> nice_ticks(double lo, double hi, int target = 5, bool integers = false);
/// Tick labels with as many decimals as the spacing needs (1e5 and up, or tiny: 1.5e+06).
std::vector<std::string> tick_labels(const std::vector<double>& ticks);

}  // namespace volt::plot
