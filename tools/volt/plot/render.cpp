#include "plot/render.h"

#include <png.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "plot/font.h"
#include "volt/core/error.h"
#include "volt/core/printable.h"

namespace volt::plot {
namespace {

int to_px(double v) {
  return static_cast<int>(std::lround(v));
}

void fill_rect(Canvas& c, const Rect& r) {
  const int x0 = std::max(0, to_px(r.x)), y0 = std::max(0, to_px(r.y));
  const int x1 = std::min(c.width, to_px(r.x + r.w)), y1 = std::min(c.height, to_px(r.y + r.h));
  for (int y = y0; y < y1; ++y) {
    for (int x = x0; x < x1; ++x) c.set(x, y, r.fill);
  }
}

void disc(Canvas& c, double cx, double cy, double radius, const Color& color) {
  const int r = static_cast<int>(std::ceil(radius));
  const int x0 = to_px(cx), y0 = to_px(cy);
  const double r2 = radius * radius + 0.25;
  for (int dy = -r; dy <= r; ++dy) {
    for (int dx = -r; dx <= r; ++dx) {
      if (dx * dx + dy * dy <= r2) c.set(x0 + dx, y0 + dy, color);
    }
  }
}

// Bresenham's line; a width above 1 stamps a disc at every pixel of it.
void line(Canvas& c, double ax, double ay, double bx, double by, double width, const Color& color) {
  int x0 = to_px(ax), y0 = to_px(ay);
  const int x1 = to_px(bx), y1 = to_px(by);
  const int dx = std::abs(x1 - x0), sx = x0 < x1 ? 1 : -1;
  const int dy = -std::abs(y1 - y0), sy = y0 < y1 ? 1 : -1;
  int err = dx + dy;
  const double radius = width / 2.0;
  for (;;) {
    if (width <= 1.0) {
      c.set(x0, y0, color);
    } else {
      disc(c, x0, y0, radius, color);
    }
    if (x0 == x1 && y0 == y1) break;
    const int e2 = 2 * err;
    if (e2 >= dy) {
      err += dy;
      x0 += sx;
    }
    if (e2 <= dx) {
      err += dx;
      y0 += sy;
    }
  }
}

void text(Canvas& c, const Text& t) {
  const int w = text_width(t.text, t.scale);
  double x = t.x;
  if (t.anchor == Anchor::kMiddle) x -= w / 2.0;
  if (t.anchor == Anchor::kEnd) x -= w;
  const int left = to_px(x), top = to_px(t.y);
  for (size_t i = 0; i < t.text.size(); ++i) {
    const auto& rows = glyph(t.text[i]);
    const int gx = left + static_cast<int>(i) * kGlyphAdvance * t.scale;
    for (int row = 0; row < kGlyphHeight; ++row) {
      for (int col = 0; col < kGlyphWidth; ++col) {
        if (!(rows[static_cast<size_t>(row)] & (1 << (4 - col)))) continue;
        for (int sy = 0; sy < t.scale; ++sy) {
          for (int sx = 0; sx < t.scale; ++sx) c.set(gx + col * t.scale + sx, top + row * t.scale + sy, t.color);
        }
      }
    }
  }
}

struct PngSink {
  std::string* out;
};

void png_write_to_string(png_structp png, png_bytep data, png_size_t length) {
  auto* sink = static_cast<PngSink*>(png_get_io_ptr(png));
  sink->out->append(reinterpret_cast<const char*>(data), length);
}

void png_flush_nothing(png_structp) {}

// libpng reports errors by longjmp: nothing with a destructor may live in this frame.
bool write_png(const Canvas& canvas, png_bytep* rows, PngSink* sink, char* error, size_t error_size) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  if (!png) {
    std::snprintf(error, error_size, "png_create_write_struct failed");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_write_struct(&png, nullptr);
    std::snprintf(error, error_size, "png_create_info_struct failed");
    return false;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    std::snprintf(error, error_size, "libpng could not encode the image");
    return false;
  }
  png_set_write_fn(png, sink, png_write_to_string, png_flush_nothing);
  png_set_IHDR(png, info, static_cast<png_uint_32>(canvas.width), static_cast<png_uint_32>(canvas.height), 8,
               PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_set_compression_level(png, 6);
  png_write_info(png, info);
  png_write_image(png, rows);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return true;
}

std::string xml_text(const std::string& s) {
  const std::string p = printable(s);  // valid UTF-8, no control characters
  std::string out;
  for (char c : p) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", v);
  std::string s = buf;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  if (s == "-0") s = "0";
  return s;
}

}  // namespace

Canvas::Canvas(int w, int h) : width(w), height(h), rgb(static_cast<size_t>(w) * static_cast<size_t>(h) * 3, 0) {}

Color Canvas::at(int x, int y) const {
  const size_t i = (static_cast<size_t>(y) * static_cast<size_t>(width) + static_cast<size_t>(x)) * 3;
  return {rgb[i], rgb[i + 1], rgb[i + 2]};
}

void Canvas::set(int x, int y, const Color& c) {
  if (x < 0 || y < 0 || x >= width || y >= height) return;
  const size_t i = (static_cast<size_t>(y) * static_cast<size_t>(width) + static_cast<size_t>(x)) * 3;
  rgb[i] = c.r;
  rgb[i + 1] = c.g;
  rgb[i + 2] = c.b;
}

Canvas rasterize(const Figure& figure) {
  Canvas c(figure.width, figure.height);
  for (const Shape& shape : figure.shapes) {
    if (const auto* r = std::get_if<Rect>(&shape)) {
      fill_rect(c, *r);
    } else if (const auto* p = std::get_if<Polyline>(&shape)) {
      for (size_t i = 1; i < p->points.size(); ++i) {
        line(c, p->points[i - 1].first, p->points[i - 1].second, p->points[i].first, p->points[i].second, p->width,
             p->color);
      }
    } else if (const auto* m = std::get_if<Marker>(&shape)) {
      disc(c, m->x, m->y, m->radius + 1.0, {0xff, 0xff, 0xff});
      disc(c, m->x, m->y, m->radius, m->color);
    } else if (const auto* t = std::get_if<Text>(&shape)) {
      text(c, *t);
    }
  }
  return c;
}

std::string encode_png(const Canvas& canvas) {
  if (canvas.width <= 0 || canvas.height <= 0) throw Error("volt plot: cannot encode an empty image as PNG.");
  std::vector<png_bytep> rows(static_cast<size_t>(canvas.height));
  for (int y = 0; y < canvas.height; ++y) {
    rows[static_cast<size_t>(y)] =
        const_cast<png_bytep>(canvas.rgb.data() + static_cast<size_t>(y) * static_cast<size_t>(canvas.width) * 3);
  }
  std::string out;
  PngSink sink{&out};
  char error[128] = {};
  if (!write_png(canvas, rows.data(), &sink, error, sizeof(error)))
    throw Error(std::string("volt plot: ") + error + ".");
  return out;
}

std::string render_svg(const Figure& figure) {
  std::ostringstream s;
  s << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" << figure.width << "\" height=\""
    << figure.height << "\" viewBox=\"0 0 " << figure.width << " " << figure.height << "\">\n";
  for (const Shape& shape : figure.shapes) {
    if (const auto* r = std::get_if<Rect>(&shape)) {
      s << "<rect x=\"" << num(r->x) << "\" y=\"" << num(r->y) << "\" width=\"" << num(r->w) << "\" height=\""
        << num(r->h) << "\" fill=\"" << hex(r->fill) << "\"/>\n";
    } else if (const auto* p = std::get_if<Polyline>(&shape)) {
      s << "<polyline fill=\"none\" stroke=\"" << hex(p->color) << "\" stroke-width=\"" << num(p->width)
        << "\" stroke-linejoin=\"round\" stroke-linecap=\"round\" points=\"";
      for (size_t i = 0; i < p->points.size(); ++i) {
        s << (i ? " " : "") << num(p->points[i].first) << "," << num(p->points[i].second);
      }
      s << "\"/>\n";
    } else if (const auto* m = std::get_if<Marker>(&shape)) {
      s << "<circle cx=\"" << num(m->x) << "\" cy=\"" << num(m->y) << "\" r=\"" << num(m->radius) << "\" fill=\""
        << hex(m->color) << "\" stroke=\"#ffffff\" stroke-width=\"1\"/>\n";
    } else if (const auto* t = std::get_if<Text>(&shape)) {
      // A monospace face at 10 px per scale unit advances about 6 px per character and has
      // capitals about 7 px tall: the bitmap font's metrics, so the layout holds.
      const char* anchor = t->anchor == Anchor::kStart ? "start" : t->anchor == Anchor::kMiddle ? "middle" : "end";
      s << "<text x=\"" << num(t->x) << "\" y=\"" << num(t->y + kCapHeight * t->scale)
        << "\" font-family=\"monospace\" font-size=\"" << 10 * t->scale << "\" text-anchor=\"" << anchor << "\" fill=\""
        << hex(t->color) << "\">" << xml_text(t->text) << "</text>\n";
    }
  }
  s << "</svg>\n";
  return s.str();
}

}  // namespace volt::plot
