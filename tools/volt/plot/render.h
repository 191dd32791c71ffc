#pragma once
// A Figure as image bytes: a PNG through Debian's libpng, drawn by a small rasteriser (thick
// lines, discs, the bitmap font of font.h), or an SVG document (text as <text> elements).
#include <cstdint>
#include <string>
#include <vector>

#include "plot/figure.h"

namespace volt::plot {

/// An RGB image, row-major, 3 bytes per pixel.
struct Canvas {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;
  Canvas(int w, int h);
  Color at(int x, int y) const;
  void set(int x, int y, const Color& c);  ///< ignored outside the image
};

/// Draws every shape of `figure` in order.
Canvas rasterize(const Figure& figure);
/// PNG file bytes of `canvas` (8-bit RGB). Throws volt::Error if libpng fails.
std::string encode_png(const Canvas& canvas);
/// The figure as an SVG 1.1 document (UTF-8; bytes that are not UTF-8 are shown escaped).
std::string render_svg(const Figure& figure);

}  // namespace volt::plot
