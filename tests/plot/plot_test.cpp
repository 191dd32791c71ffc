// volt plot's parts: reading metrics.csv, choosing panels, the layout, and the PNG decoded back
// with libpng's own reader (so the pixels checked are the ones a viewer shows).
#include <png.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "plot/figure.h"
#include "plot/font.h"
#include "plot/render.h"
#include "plot/series.h"
#include "volt/core/error.h"

namespace vp = volt::plot;

namespace {

struct Decoded {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;
  size_t count(const vp::Color& c) const {
    size_t n = 0;
    for (size_t i = 0; i + 2 < rgb.size(); i += 3) n += rgb[i] == c.r && rgb[i + 1] == c.g && rgb[i + 2] == c.b;
    return n;
  }
};

Decoded decode_png(const std::string& bytes) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, bytes.data(), bytes.size())) {
    ADD_FAILURE() << "libpng cannot read the PNG: " << image.message;
    return {};
  }
  image.format = PNG_FORMAT_RGB;
  Decoded d;
  d.width = static_cast<int>(image.width);
  d.height = static_cast<int>(image.height);
  d.rgb.resize(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, d.rgb.data(), 0, nullptr)) {
    ADD_FAILURE() << "libpng cannot decode the PNG: " << image.message;
    return {};
  }
  return d;
}

Decoded draw(const std::vector<vp::Run>& runs, const vp::FigureOptions& options = {}) {
  return decode_png(vp::encode_png(vp::rasterize(vp::layout(runs, options))));
}

vp::Run csv(const std::string& text, const std::string& label = "run") {
  return vp::parse_metrics_csv(text, label + "/metrics.csv", label);
}

// A run in the CSV logger's layout: a training loss every 10 steps and a validation row per epoch.
std::string training_csv(double scale, int steps = 100) {
  std::string out = "epoch,step,train_loss,val_loss\n";
  for (int s = 9; s < steps; s += 10) {
    out += std::to_string(s / 50) + "," + std::to_string(s) + "," + std::to_string(scale / (1.0 + s * 0.05)) + ",\n";
    if ((s + 1) % 50 == 0) {
      out += std::to_string(s / 50) + "," + std::to_string(s) + ",," + std::to_string(scale * 0.9 / (1.0 + s * 0.04)) +
             "\n";
    }
  }
  return out;
}

size_t count_polylines(const vp::Figure& fig, const vp::Color& color) {
  return static_cast<size_t>(std::count_if(fig.shapes.begin(), fig.shapes.end(), [&](const vp::Shape& s) {
    const auto* p = std::get_if<vp::Polyline>(&s);
    return p && p->color == color;
  }));
}

size_t count_markers(const vp::Figure& fig, const vp::Color& color) {
  return static_cast<size_t>(std::count_if(fig.shapes.begin(), fig.shapes.end(), [&](const vp::Shape& s) {
    const auto* m = std::get_if<vp::Marker>(&s);
    return m && m->color == color;
  }));
}

}  // namespace

TEST(PlotSeries, ReadsTheCsvLoggerLayoutWithValidationRowsMarked) {
  const vp::Run run = csv(training_csv(1.0));
  ASSERT_EQ(run.series.size(), 3u);  // epoch, train_loss, val_loss (step is the axis)
  EXPECT_EQ(run.rows, 12);
  const auto& train = run.series[1];
  const auto& val = run.series[2];
  EXPECT_EQ(train.metric, "train_loss");
  ASSERT_EQ(train.points.size(), 10u);
  EXPECT_EQ(train.points[0].step, 9);
  EXPECT_FALSE(train.points[0].validation);
  ASSERT_EQ(val.points.size(), 2u);
  EXPECT_EQ(val.points[1].step, 99);
  EXPECT_TRUE(val.points[0].validation);
  // The epoch column of a validation row is a validation point too.
  const auto& epoch = run.series[0];
  EXPECT_EQ(std::count_if(epoch.points.begin(), epoch.points.end(), [](const vp::Point& p) { return p.validation; }),
            2);
}

TEST(PlotSeries, ReadsQuotedFieldsCrlfNanAndInf) {
  const vp::Run run = csv("\"step\",\"a,b\",c\r\n0,1.5,nan\r\n1,\"2\",inf\r\n2,-inf,3e-2\r\n");
  ASSERT_EQ(run.series.size(), 2u);
  EXPECT_EQ(run.series[0].metric, "a,b");
  EXPECT_EQ(run.series[0].points[1].value, 2.0);
  EXPECT_TRUE(std::isnan(run.series[1].points[0].value));
  EXPECT_TRUE(std::isinf(run.series[1].points[1].value));
  EXPECT_DOUBLE_EQ(run.series[1].points[2].value, 0.03);
}

TEST(PlotSeries, RaggedRowIsADataErrorNamingFileAndLine) {
  try {
    csv("step,loss\n0,1\n1,2,3\n", "bad");
    FAIL() << "a row with three fields under a two-column header was accepted";
  } catch (const volt::DataError& e) {
    EXPECT_NE(std::string(e.what()).find("bad/metrics.csv' line 3 has 3 fields"), std::string::npos) << e.what();
  }
}

TEST(PlotSeries, UnfinishedLastLineOfARunStillTrainingIsLeftOut) {
  const vp::Run run = csv("step,loss,acc\n0,1,2\n1,0.5");
  EXPECT_EQ(run.rows, 1);
  EXPECT_EQ(run.series[0].points.size(), 1u);
  // A finished line without a line break is a row.
  EXPECT_EQ(csv("step,loss,acc\n0,1,2\n1,0.5,3").rows, 2);
}

TEST(PlotSeries, CellThatIsNotANumberIsRefusedWithItsColumn) {
  try {
    csv("step,loss\n0,abc\n");
    FAIL() << "a text cell was accepted";
  } catch (const volt::DataError& e) {
    EXPECT_NE(std::string(e.what()).find("column 'loss': 'abc' is not a number"), std::string::npos) << e.what();
  }
}

TEST(PlotSeries, FileWithoutStepColumnOrEmptyIsRefused) {
  EXPECT_THROW(csv("epoch,loss\n0,1\n"), volt::DataError);
  EXPECT_THROW(csv(""), volt::DataError);
  EXPECT_THROW(csv("step,loss\n1.5,1\n"), volt::DataError);
}

TEST(PlotMetrics, MissingMetricIsAnErrorNamingItAndListingTheMetricsThere) {
  const std::vector<vp::Run> runs{csv(training_csv(1.0))};
  try {
    vp::select_metrics(runs, {"val_acc"});
    FAIL() << "a metric the run does not have was accepted";
  } catch (const volt::ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'val_acc'"), std::string::npos) << what;
    EXPECT_NE(what.find("epoch, train_loss, val_loss"), std::string::npos) << what;
  }
}

TEST(PlotMetrics, MetricWithOnlyNanValuesIsAnError) {
  const std::vector<vp::Run> runs{csv("step,loss,acc\n0,nan,1\n1,nan,2\n")};
  try {
    vp::select_metrics(runs, {"loss"});
    FAIL() << "an all-nan metric was accepted";
  } catch (const volt::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'loss', which has no finite value"), std::string::npos) << e.what();
  }
  // By default it is left out; step and epoch are the axes, not panels.
  EXPECT_EQ(vp::select_metrics(runs, {}), std::vector<std::string>{"acc"});
}

TEST(PlotTicks, NiceTicksAreRoundAndCoverTheRange) {
  EXPECT_EQ(vp::nice_ticks(0, 100, 5), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  EXPECT_EQ(vp::nice_ticks(0.13, 0.61, 5), (std::vector<double>{0.2, 0.3, 0.4, 0.5, 0.6}));
  EXPECT_EQ(vp::tick_labels({0.2, 0.3, 0.4}), (std::vector<std::string>{"0.2", "0.3", "0.4"}));
  EXPECT_EQ(vp::tick_labels({-0.0, 5e6}), (std::vector<std::string>{"0", "5e+06"}));
  EXPECT_EQ(vp::nice_ticks(0, 3, 10, true), (std::vector<double>{0, 1, 2, 3}));  // steps: whole numbers
}

TEST(PlotFont, EveryPrintableCharacterHasItsOwnGlyph) {
  const auto& question = vp::glyph('?');
  for (int c = 33; c <= 126; ++c) {
    const auto& g = vp::glyph(static_cast<char>(c));
    EXPECT_TRUE(std::any_of(g.begin(), g.end(), [](uint8_t row) { return row != 0; })) << "no pixels for " << char(c);
    if (c != '?') {
      EXPECT_NE(&g, &question) << char(c) << " falls back to '?'";
    }
  }
  EXPECT_EQ(&vp::glyph('\x01'), &question);
}

TEST(PlotPng, ImageHasTheLayoutsSizeOrTheOneAskedFor) {
  const std::vector<vp::Run> runs{csv(training_csv(1.0))};
  const vp::Figure fig = vp::layout(runs, {});
  const Decoded d = decode_png(vp::encode_png(vp::rasterize(fig)));
  EXPECT_EQ(d.width, fig.width);
  EXPECT_EQ(d.height, fig.height);
  EXPECT_EQ(fig.metrics, (std::vector<std::string>{"train_loss", "val_loss"}));
  vp::FigureOptions sized;
  sized.width = 640;
  sized.height = 480;
  const Decoded s = draw(runs, sized);
  EXPECT_EQ(s.width, 640);
  EXPECT_EQ(s.height, 480);
}

TEST(PlotPng, TooSmallForItsPanelsIsAConfigError) {
  vp::FigureOptions tiny;
  tiny.width = 200;
  tiny.height = 200;
  EXPECT_THROW(vp::layout({csv(training_csv(1.0))}, tiny), volt::ConfigError);
}

TEST(PlotPng, SoManyPanelsThatTheImageWouldExceedTenThousandPixelsIsAConfigError) {
  std::string header = "step", row = "0";
  for (int i = 0; i < 120; ++i) {
    header += ",m" + std::to_string(i);
    row += ",1";
  }
  try {
    vp::layout({csv(header + "\n" + row + "\n")}, {});
    FAIL() << "120 panels were laid out";
  } catch (const volt::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("120 panels make a"), std::string::npos) << e.what();
  }
}

TEST(PlotPng, EveryRunsColourIsInThePixels) {
  const std::vector<vp::Run> runs{csv(training_csv(1.0), "a"), csv(training_csv(2.0), "b"),
                                  csv(training_csv(0.5), "c")};
  const Decoded d = draw(runs);
  for (size_t r = 0; r < runs.size(); ++r) {
    // Two panels of curves, markers and a legend swatch: hundreds of pixels each.
    EXPECT_GT(d.count(vp::run_color(r)), 300u) << "run " << r << " colour " << vp::hex(vp::run_color(r));
  }
  EXPECT_EQ(d.count(vp::run_color(3)), 0u) << "a fourth colour with three runs";
  // The colours are distinct, and none is the background.
  for (size_t a = 0; a < 10; ++a) {
    EXPECT_FALSE(vp::run_color(a) == (vp::Color{255, 255, 255}));
    for (size_t b = a + 1; b < 10; ++b) EXPECT_FALSE(vp::run_color(a) == vp::run_color(b));
  }
}

TEST(PlotPng, NanAndInfValuesLeaveGapsWithoutBreakingTheDrawing) {
  const std::vector<vp::Run> runs{csv("step,loss\n0,1.0\n1,0.8\n2,nan\n3,0.6\n4,0.5\n5,inf\n6,-inf\n7,0.3\n")};
  const vp::Figure fig = vp::layout(runs, {});
  // Segments 0-1 and 3-4 are lines; 7 stands alone and gets a marker.
  EXPECT_EQ(count_polylines(fig, vp::run_color(0)), 2u + 1u);  // + the legend swatch
  EXPECT_EQ(count_markers(fig, vp::run_color(0)), 1u + 1u);    // + the legend marker
  for (const auto& shape : fig.shapes) {
    if (const auto* p = std::get_if<vp::Polyline>(&shape)) {
      for (const auto& [x, y] : p->points) EXPECT_TRUE(std::isfinite(x) && std::isfinite(y));
    }
  }
  const Decoded d = decode_png(vp::encode_png(vp::rasterize(fig)));
  EXPECT_GT(d.count(vp::run_color(0)), 100u);
}

TEST(PlotSvg, ALongRunIsThinnedToAFewPointsPerPixelColumn) {
  std::string text = "step,loss\n";
  for (int s = 0; s < 50000; ++s) text += std::to_string(s) + "," + std::to_string((s * 7919) % 1000 / 1000.0) + "\n";
  const vp::Figure fig = vp::layout({csv(text)}, {});
  size_t points = 0;
  double lo = 1e9, hi = -1e9;
  for (const auto& shape : fig.shapes) {
    const auto* p = std::get_if<vp::Polyline>(&shape);
    if (!p || !(p->color == vp::run_color(0)) || p->points.size() < 3) continue;
    points = p->points.size();
    for (const auto& [x, y] : p->points) {
      lo = std::min(lo, y);
      hi = std::max(hi, y);
    }
  }
  EXPECT_GT(points, 100u);
  EXPECT_LE(points, 4u * static_cast<size_t>(fig.width));
  // The extremes survive: the curve still spans the panel's data range (0 to 0.999).
  EXPECT_GT(hi - lo, 200.0);
  EXPECT_LT(vp::render_svg(fig).size(), 200000u);
}

TEST(PlotPng, ValuesNearTheLargestDoublesStayOnTheCanvas) {
  const vp::Figure fig = vp::layout({csv("step,loss\n0,1e308\n1,-1e308\n2,1.7e308\n")}, {});
  for (const auto& shape : fig.shapes) {
    if (const auto* p = std::get_if<vp::Polyline>(&shape)) {
      for (const auto& [x, y] : p->points) {
        EXPECT_TRUE(x >= 0 && x <= fig.width && y >= 0 && y <= fig.height) << x << "," << y;
      }
    }
  }
  EXPECT_GT(decode_png(vp::encode_png(vp::rasterize(fig))).count(vp::run_color(0)), 100u);
}

TEST(PlotPng, RunWithOnePointDrawsAMarker) {
  const std::vector<vp::Run> runs{csv(training_csv(1.0), "long"), csv("step,train_loss\n42,0.7\n", "single")};
  const vp::Figure fig = vp::layout(runs, {{"train_loss"}, "", 0, 0});
  EXPECT_EQ(count_polylines(fig, vp::run_color(1)), 1u);  // the legend swatch only
  EXPECT_EQ(count_markers(fig, vp::run_color(1)), 2u);    // the point and the legend
  const Decoded d = draw(runs, {{"train_loss"}, "", 0, 0});
  // A disc of radius 4 (49 pixels) plus the legend's swatch and disc.
  EXPECT_GT(d.count(vp::run_color(1)), 49u + 40u);
  // One run of one point alone: the panel's range is widened around it.
  const Decoded alone = draw({csv("step,test_acc\n1720,0.89\n")});
  EXPECT_GT(alone.count(vp::run_color(0)), 49u);
}

TEST(PlotSvg, DrawsTheSameShapesAsTextElementsAndEscapesNames) {
  const std::vector<vp::Run> runs{csv(training_csv(1.0), "a<&>\xff"), csv(training_csv(2.0), "b")};
  const std::string svg = vp::render_svg(vp::layout(runs, {}));
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("<text"), std::string::npos);
  EXPECT_NE(svg.find(">train_loss</text>"), std::string::npos);
  EXPECT_NE(svg.find("a&lt;&amp;&gt;\\xff"), std::string::npos);
  EXPECT_NE(svg.find("stroke=\"" + vp::hex(vp::run_color(0)) + "\""), std::string::npos);
  EXPECT_NE(svg.find("stroke=\"" + vp::hex(vp::run_color(1)) + "\""), std::string::npos);
}
