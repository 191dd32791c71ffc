#include "volt/tuner/lr_finder_result.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "loggers/detail/png_encoder.h"
#include "volt/core/error.h"
#include "volt/core/file_check.h"

namespace volt::tuner {
namespace fs = std::filesystem;

LRFinderResult::LRFinderResult(callbacks::LearningRateFinderOptions options, std::vector<double> lrs,
                               std::vector<double> losses, bool stopped_early)
    : options_(options), lrs_(std::move(lrs)), losses_(std::move(losses)), stopped_early_(stopped_early) {}

std::optional<size_t> LRFinderResult::optimal_index(int64_t skip_begin, int64_t skip_end) const {
  return callbacks::lr_finder_suggestion_index(losses_, skip_begin, skip_end);
}

std::optional<double> LRFinderResult::suggestion(int64_t skip_begin, int64_t skip_end) const {
  const auto index = optimal_index(skip_begin, skip_end);
  if (!index || *index >= lrs_.size()) {
    std::cerr << "volt: lr_find could not suggest a learning rate: " << losses_.size()
              << " losses were recorded, and fewer than 2 finite ones remain after skipping the first " << skip_begin
              << " and the last " << skip_end
              << ". Raise num_training, or give more training batches (limit_train_batches)." << std::endl;
    return std::nullopt;
  }
  return lrs_[*index];
}

namespace {

/// The plot's frame: data ranges and the pixel box they map to.
struct Frame {
  double width = 640, height = 420, left = 70, right = 20, top = 40, bottom = 50;
  double log_lo = 0, log_hi = 1, y_lo = 0, y_hi = 1;
  double x(double lr) const { return left + (std::log10(lr) - log_lo) / (log_hi - log_lo) * (width - left - right); }
  double y(double loss) const { return top + (y_hi - loss) / (y_hi - y_lo) * (height - top - bottom); }
};

struct Curve {
  std::vector<std::pair<double, double>> points;  // (lr, loss), finite only
  std::optional<std::pair<double, double>> suggestion;
  Frame frame;
};

Curve curve_of(const std::vector<double>& lrs, const std::vector<double>& losses, std::optional<size_t> best) {
  Curve c;
  for (size_t i = 0; i < lrs.size() && i < losses.size(); ++i) {
    if (std::isfinite(losses[i]) && lrs[i] > 0 && std::isfinite(lrs[i])) c.points.emplace_back(lrs[i], losses[i]);
  }
  if (best && *best < lrs.size() && std::isfinite(losses[*best])) c.suggestion = {{lrs[*best], losses[*best]}};
  if (c.points.empty()) return c;
  double lo = c.points.front().first, hi = lo, ylo = c.points.front().second, yhi = ylo;
  for (const auto& [lr, loss] : c.points) {
    lo = std::min(lo, lr);
    hi = std::max(hi, lr);
    ylo = std::min(ylo, loss);
    yhi = std::max(yhi, loss);
  }
  c.frame.log_lo = std::floor(std::log10(lo));
  c.frame.log_hi = std::max(c.frame.log_lo + 1, std::ceil(std::log10(hi)));
  const double pad = yhi > ylo ? 0.05 * (yhi - ylo) : 0.5;
  c.frame.y_lo = ylo - pad;
  c.frame.y_hi = yhi + pad;
  return c;
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

/// One file written whole or not at all: a temporary beside it, fsync, rename.
void write_atomically(const std::string& path, const std::string& bytes) {
  const fs::path target(path);
  const fs::path tmp = target.parent_path() / ("." + target.filename().string() + ".tmp");
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("lr_find could not write the plot " + quote_path(path) + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  const bool ok = done == bytes.size() && ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  if (!ok || std::rename(tmp.c_str(), target.c_str()) != 0) {
    const std::string why = std::strerror(ok ? errno : saved);
    fs::remove(tmp);
    throw Error("lr_find could not write the plot " + quote_path(path) + ": " + why);
  }
}

}  // namespace

std::string LRFinderResult::plot_svg(int64_t skip_begin, int64_t skip_end) const {
  const Curve c = curve_of(lrs_, losses_, optimal_index(skip_begin, skip_end));
  const Frame& f = c.frame;
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << f.width << "\" height=\"" << f.height
    << "\" viewBox=\"0 0 " << f.width << " " << f.height << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << f.width / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">Learning rate finder ("
    << callbacks::to_string(options_.mode) << ", " << lrs_.size() << " steps"
    << (stopped_early_ ? ", stopped: loss diverged" : "") << ")</text>\n";
  const double x0 = f.left, x1 = f.width - f.right, y0 = f.top, y1 = f.height - f.bottom;
  s << "<rect x=\"" << x0 << "\" y=\"" << y0 << "\" width=\"" << x1 - x0 << "\" height=\"" << y1 - y0
    << "\" fill=\"none\" stroke=\"black\"/>\n";
  for (double e = f.log_lo; e <= f.log_hi + 1e-9; e += 1) {
    const double x = f.x(std::pow(10.0, e));
    s << "<line x1=\"" << x << "\" y1=\"" << y0 << "\" x2=\"" << x << "\" y2=\"" << y1
      << "\" stroke=\"#ddd\"/>\n<text x=\"" << x << "\" y=\"" << y1 + 16 << "\" text-anchor=\"middle\">1e"
      << static_cast<int>(e) << "</text>\n";
  }
  for (int i = 0; i <= 4; ++i) {
    const double v = f.y_lo + (f.y_hi - f.y_lo) * i / 4.0;
    const double y = f.y(v);
    s << "<line x1=\"" << x0 << "\" y1=\"" << y << "\" x2=\"" << x1 << "\" y2=\"" << y << "\" stroke=\"#ddd\"/>\n"
      << "<text x=\"" << x0 - 6 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\">" << fmt("%.3g", v) << "</text>\n";
  }
  s << "<text x=\"" << (x0 + x1) / 2 << "\" y=\"" << f.height - 12
    << "\" text-anchor=\"middle\">Learning rate (log scale)</text>\n"
    << "<text x=\"16\" y=\"" << (y0 + y1) / 2 << "\" text-anchor=\"middle\" transform=\"rotate(-90 16 " << (y0 + y1) / 2
    << ")\">Loss (smoothed)</text>\n";
  if (!c.points.empty()) {
    s << "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"";
    for (const auto& [lr, loss] : c.points) s << fmt("%.2f", f.x(lr)) << "," << fmt("%.2f", f.y(loss)) << " ";
    s << "\"/>\n";
  }
  if (c.suggestion) {
    const double x = f.x(c.suggestion->first), y = f.y(c.suggestion->second);
    s << "<circle cx=\"" << fmt("%.2f", x) << "\" cy=\"" << fmt("%.2f", y) << "\" r=\"6\" fill=\"red\"/>\n"
      << "<text x=\"" << fmt("%.2f", x + 10) << "\" y=\"" << fmt("%.2f", y - 10) << "\" fill=\"red\">suggestion "
      << fmt("%.3g", c.suggestion->first) << "</text>\n";
  }
  s << "</svg>\n";
  return s.str();
}

std::string LRFinderResult::plot_png(int64_t skip_begin, int64_t skip_end) const {
  const Curve c = curve_of(lrs_, losses_, optimal_index(skip_begin, skip_end));
  const Frame& f = c.frame;
  const auto w = static_cast<int64_t>(f.width), h = static_cast<int64_t>(f.height);
  std::vector<uint8_t> px(static_cast<size_t>(w * h * 3), 255);
  const auto put = [&](int64_t x, int64_t y, uint8_t r, uint8_t g, uint8_t b) {
    if (x < 0 || y < 0 || x >= w || y >= h) return;
    uint8_t* p = &px[static_cast<size_t>((y * w + x) * 3)];
    p[0] = r, p[1] = g, p[2] = b;
  };
  // Lines by sampling along their length: plenty for a plot of this size.
  const auto line = [&](double ax, double ay, double bx, double by, int thick, uint8_t r, uint8_t g, uint8_t b) {
    const int steps = static_cast<int>(std::max(std::fabs(bx - ax), std::fabs(by - ay))) * 2 + 1;
    for (int i = 0; i <= steps; ++i) {
      const double t = static_cast<double>(i) / steps;
      const auto x = static_cast<int64_t>(std::lround(ax + t * (bx - ax)));
      const auto y = static_cast<int64_t>(std::lround(ay + t * (by - ay)));
      for (int dx = -(thick / 2); dx <= thick / 2; ++dx)
        for (int dy = -(thick / 2); dy <= thick / 2; ++dy) put(x + dx, y + dy, r, g, b);
    }
  };
  const double x0 = f.left, x1 = f.width - f.right, y0 = f.top, y1 = f.height - f.bottom;
  for (double e = f.log_lo; e <= f.log_hi + 1e-9; e += 1) {
    const double x = f.x(std::pow(10.0, e));
    line(x, y0, x, y1, 1, 221, 221, 221);
    line(x, y1, x, y1 + 6, 1, 0, 0, 0);  // a tick per decade
  }
  for (int i = 0; i <= 4; ++i) {
    const double y = f.y(f.y_lo + (f.y_hi - f.y_lo) * i / 4.0);
    line(x0, y, x1, y, 1, 221, 221, 221);
    line(x0 - 6, y, x0, y, 1, 0, 0, 0);
  }
  line(x0, y0, x1, y0, 1, 0, 0, 0);
  line(x0, y1, x1, y1, 1, 0, 0, 0);
  line(x0, y0, x0, y1, 1, 0, 0, 0);
  line(x1, y0, x1, y1, 1, 0, 0, 0);
  for (size_t i = 1; i < c.points.size(); ++i) {
    line(f.x(c.points[i - 1].first), f.y(c.points[i - 1].second), f.x(c.points[i].first), f.y(c.points[i].second), 2,
         31, 119, 180);
  }
  if (c.suggestion) {
    const double cx = f.x(c.suggestion->first), cy = f.y(c.suggestion->second);
    for (int dy = -6; dy <= 6; ++dy)
      for (int dx = -6; dx <= 6; ++dx)
        if (dx * dx + dy * dy <= 36) put(std::lround(cx) + dx, std::lround(cy) + dy, 220, 0, 0);
  }
  return loggers::detail::encode_png(px.data(), h, w, 3);
}

void LRFinderResult::save_plot(const std::string& path_stem, int64_t skip_begin, int64_t skip_end) const {
  const fs::path stem(path_stem);
  const fs::path dir = stem.has_parent_path() ? stem.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw ConfigError("lr_find cannot write its plot to " + quote_path(path_stem) + ".svg/.png: the folder " +
                      quote_path(dir.string()) + " does not exist. Create it or give another path.");
  }
  // Both made before either is written: a failure leaves neither half-done.
  const std::string svg = plot_svg(skip_begin, skip_end);
  const std::string png = plot_png(skip_begin, skip_end);
  write_atomically(path_stem + ".svg", svg);
  write_atomically(path_stem + ".png", png);
}

}  // namespace volt::tuner
