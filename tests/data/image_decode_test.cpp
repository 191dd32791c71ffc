#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "data/image_reference.h"
#include "support/temp_dir.h"
#include "volt/core/error.h"
#include "volt/data/image/decode.h"

namespace {

using volt::data::ImageMode;
using volt::testing::TempDir;

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Every file of the PIL-written set, in both modes, against PIL's own decode: PNG exactly, JPEG
// with at most `jpeg_tolerance` (PIL links the same libjpeg-turbo with the same DCT settings, so 0).
TEST(ImageDecode, PixelsEqualPilForEveryPngColourTypeAndJpegVariant) {
  if (const std::string why = volt::testing::python_missing("PIL, numpy"); !why.empty()) GTEST_SKIP() << why;
  TempDir dir("volt_image_decode");
  volt::testing::run_image_reference("decode '" + dir.str() + "'");
  const auto manifest = nlohmann::json::parse(read_bytes(dir / "manifest.json"));
  ASSERT_GE(manifest.size(), 12u);
  int jpeg_max_diff = 0;
  for (const auto& [name, entry] : manifest.items()) {
    const int64_t h = entry["height"], w = entry["width"];
    for (const ImageMode mode : {ImageMode::kRGB, ImageMode::kL}) {
      const int64_t c = mode == ImageMode::kRGB ? 3 : 1;
      const at::Tensor ours = volt::data::read_image(entry["file"].get<std::string>(), mode);
      const at::Tensor pil =
          volt::testing::read_raw(dir / (name + "." + volt::data::to_string(mode) + ".raw"), {h, w, c}, at::kByte);
      ASSERT_EQ(ours.sizes(), pil.sizes()) << name << " " << volt::data::to_string(mode);
      const int diff = (ours.to(at::kInt) - pil.to(at::kInt)).abs().max().item<int>();
      const bool jpeg = read_bytes(entry["file"]).substr(0, 2) == "\xFF\xD8";
      if (jpeg) {
        jpeg_max_diff = std::max(jpeg_max_diff, diff);
      } else {
        EXPECT_EQ(diff, 0) << name << " (" << entry["mode"] << ") in mode " << volt::data::to_string(mode);
      }
    }
  }
  // Measured: 0 (the same decoder and settings as PIL).
  EXPECT_EQ(jpeg_max_diff, 0);
}

TEST(ImageDecode, RoundTripsPngExactlyAndJpegClosely) {
  TempDir dir("volt_image_roundtrip");
  at::manual_seed(3);
  const at::Tensor rgb = at::randint(0, 256, {20, 31, 3}, at::kByte);
  const at::Tensor gray = at::randint(0, 256, {9, 4, 1}, at::kByte);
  volt::data::write_png(dir / "a.png", rgb);
  volt::data::write_png(dir / "g.png", gray);
  EXPECT_TRUE(at::equal(volt::data::read_image(dir / "a.png"), rgb));
  EXPECT_TRUE(at::equal(volt::data::read_image(dir / "g.png", ImageMode::kL), gray));
  // A flat colour survives JPEG almost unchanged.
  const at::Tensor flat = at::full({16, 16, 3}, 100, at::kByte);
  volt::data::write_jpeg(dir / "f.jpg", flat, 95);
  const at::Tensor back = volt::data::read_image(dir / "f.jpg");
  EXPECT_LE((back.to(at::kInt) - 100).abs().max().item<int>(), 1);
  EXPECT_FALSE(std::filesystem::exists(dir / "f.jpg.tmp"));
}

TEST(ImageDecode, GrayFileInRgbModeReplicatesTheChannel) {
  TempDir dir("volt_image_gray");
  const at::Tensor gray = at::randint(0, 256, {5, 7, 1}, at::kByte);
  volt::data::write_png(dir / "g.png", gray);
  const at::Tensor rgb = volt::data::read_image(dir / "g.png", ImageMode::kRGB);
  ASSERT_EQ(rgb.size(2), 3);
  for (int c = 0; c < 3; ++c) EXPECT_TRUE(at::equal(rgb.select(2, c), gray.select(2, 0)));
}

void expect_error_naming(const std::string& path, const std::string& fragment) {
  try {
    volt::data::read_image(path);
    FAIL() << "no error for " << path;
  } catch (const volt::DataError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(std::filesystem::path(path).filename().string()), std::string::npos) << what;
    EXPECT_NE(what.find(fragment), std::string::npos) << what;
  }
}

TEST(ImageDecode, TruncatedCorruptAndForeignFilesAreRefusedNamingTheFile) {
  TempDir dir("volt_image_bad");
  const at::Tensor rgb = at::randint(0, 256, {64, 48, 3}, at::kByte);
  volt::data::write_png(dir / "ok.png", rgb);
  volt::data::write_jpeg(dir / "ok.jpg", rgb, 90);
  const std::string png = read_bytes(dir / "ok.png"), jpg = read_bytes(dir / "ok.jpg");
  write_bytes(dir / "cut.png", png.substr(0, png.size() / 2));
  write_bytes(dir / "cut.jpg", jpg.substr(0, jpg.size() / 2));
  std::string flipped = png;
  flipped[png.size() / 2] ^= 0x55;  // inside IDAT: a CRC or zlib error
  write_bytes(dir / "flipped.png", flipped);
  std::string garbage = jpg.substr(0, 200) + std::string(jpg.size() - 200, '\x07');
  write_bytes(dir / "garbage.jpg", garbage);
  write_bytes(dir / "empty.jpg", "");
  write_bytes(dir / "text.png", "hello, this is not an image");
  expect_error_naming(dir / "cut.png", "truncated");
  expect_error_naming(dir / "cut.jpg", "truncated");
  expect_error_naming(dir / "flipped.png", "not a readable PNG");
  expect_error_naming(dir / "garbage.jpg", "JPEG");
  expect_error_naming(dir / "empty.jpg", "empty");
  expect_error_naming(dir / "text.png", "neither JPEG nor PNG");
  expect_error_naming(dir / "missing.png", "does not exist");
  expect_error_naming(dir.str(), "folder");
}

TEST(ImageDecode, HugeDeclaredJpegSizeIsRefusedBeforeThePixelsAreAllocated) {
  TempDir dir("volt_image_huge");
  volt::data::write_jpeg(dir / "small.jpg", at::full({8, 8, 3}, 50, at::kByte), 90);
  std::string jpg = read_bytes(dir / "small.jpg");
  const size_t sof = jpg.find("\xFF\xC0");
  ASSERT_NE(sof, std::string::npos);
  // SOF0: marker, length (2), precision (1), height (2), width (2): declare 60000 x 60000.
  for (size_t at : {sof + 5, sof + 7}) {
    jpg[at] = static_cast<char>(0xEA);
    jpg[at + 1] = static_cast<char>(0x60);
  }
  write_bytes(dir / "huge.jpg", jpg);
  expect_error_naming(dir / "huge.jpg", "more than the 2^28");
}

TEST(ImageDecode, WritersRefuseTensorsThatAreNotImages) {
  TempDir dir("volt_image_write_bad");
  EXPECT_THROW(volt::data::write_png(dir / "x.png", at::zeros({4, 4, 3}, at::kFloat)), volt::ConfigError);
  EXPECT_THROW(volt::data::write_png(dir / "x.png", at::zeros({3, 4, 4}, at::kByte)), volt::ConfigError);
  EXPECT_THROW(volt::data::write_jpeg(dir / "x.jpg", at::zeros({4, 4, 3}, at::kByte), 0), volt::ConfigError);
  EXPECT_FALSE(std::filesystem::exists(dir / "x.png"));
  EXPECT_THROW(volt::data::write_png(dir / "no_such_folder/x.png", at::zeros({4, 4, 3}, at::kByte)), volt::DataError);
}

}  // namespace
