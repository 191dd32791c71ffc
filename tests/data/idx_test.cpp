#include "volt/data/idx.h"

#include <ATen/ops/bincount.h>
#include <ATen/ops/full.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/temp_dir.h"
#include "volt/core/error.h"

namespace volt::data {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<unsigned char>;

using volt::testing::TempDir;

void put_be32(Bytes& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<unsigned char>(v >> shift));
}

Bytes idx_header(unsigned char type, const std::vector<uint32_t>& dims) {
  Bytes out = {0, 0, type, static_cast<unsigned char>(dims.size())};
  for (uint32_t d : dims) put_be32(out, d);
  return out;
}

Bytes concat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void write_raw(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

void write_gz(const std::string& path, const Bytes& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  if (!bytes.empty()) {
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
  }
  ASSERT_EQ(gzclose(f), Z_OK);
}

// Big-endian bytes of any trivially copyable value.
template <typename T>
void put_be(Bytes& out, T value) {
  unsigned char raw[sizeof(T)];
  std::memcpy(raw, &value, sizeof(T));
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(raw[sizeof(T) - 1 - i]);
}

std::string read_error(const std::string& path) {
  try {
    read_idx(path);
  } catch (const DataError& e) {
    return e.what();
  }
  return "(no DataError)";
}

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

TEST(ReadIdx, ReadsAGzipCompressedUint8File) {
  TempDir dir;
  const std::string path = dir.file("a-idx3-ubyte.gz");
  write_gz(path, concat(idx_header(0x08, {2, 3}), {0, 1, 2, 253, 254, 255}));
  at::Tensor t = read_idx(path);
  EXPECT_EQ(t.scalar_type(), at::kByte);
  EXPECT_EQ(t.sizes(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t[1][2].item<uint8_t>(), 255);
  EXPECT_EQ(t[0][1].item<uint8_t>(), 1);
}

TEST(ReadIdx, ReadsAnUncompressedFile) {
  TempDir dir;
  const std::string path = dir.file("a-idx1-ubyte");
  write_raw(path, concat(idx_header(0x08, {4}), {9, 8, 7, 6}));
  at::Tensor t = read_idx(path);
  EXPECT_EQ(t.sizes(), (std::vector<int64_t>{4}));
  EXPECT_EQ(t[0].item<uint8_t>(), 9);
  EXPECT_EQ(t[3].item<uint8_t>(), 6);
}

TEST(ReadIdx, ConvertsEveryElementTypeFromBigEndian) {
  TempDir dir;
  Bytes i8 = idx_header(0x09, {2});
  put_be<int8_t>(i8, -5);
  put_be<int8_t>(i8, 7);
  Bytes i16 = idx_header(0x0B, {2});
  put_be<int16_t>(i16, -300);
  put_be<int16_t>(i16, 0x1234);
  Bytes i32 = idx_header(0x0C, {1, 2});
  put_be<int32_t>(i32, -70000);
  put_be<int32_t>(i32, 0x12345678);
  Bytes f32 = idx_header(0x0D, {2});
  put_be<float>(f32, 1.5f);
  put_be<float>(f32, -2.25f);
  Bytes f64 = idx_header(0x0E, {2});
  put_be<double>(f64, 3.125);
  put_be<double>(f64, -1e300);
  write_gz(dir.file("i8.gz"), i8);
  write_raw(dir.file("i16"), i16);
  write_gz(dir.file("i32.gz"), i32);
  write_raw(dir.file("f32"), f32);
  write_gz(dir.file("f64.gz"), f64);

  at::Tensor t = read_idx(dir.file("i8.gz"));
  EXPECT_EQ(t.scalar_type(), at::kChar);
  EXPECT_EQ(t[0].item<int8_t>(), -5);
  EXPECT_EQ(t[1].item<int8_t>(), 7);
  t = read_idx(dir.file("i16"));
  EXPECT_EQ(t.scalar_type(), at::kShort);
  EXPECT_EQ(t[0].item<int16_t>(), -300);
  EXPECT_EQ(t[1].item<int16_t>(), 0x1234);
  t = read_idx(dir.file("i32.gz"));
  EXPECT_EQ(t.scalar_type(), at::kInt);
  EXPECT_EQ(t.sizes(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(t[0][0].item<int32_t>(), -70000);
  EXPECT_EQ(t[0][1].item<int32_t>(), 0x12345678);
  t = read_idx(dir.file("f32"));
  EXPECT_EQ(t.scalar_type(), at::kFloat);
  EXPECT_EQ(t[0].item<float>(), 1.5f);
  EXPECT_EQ(t[1].item<float>(), -2.25f);
  t = read_idx(dir.file("f64.gz"));
  EXPECT_EQ(t.scalar_type(), at::kDouble);
  EXPECT_EQ(t[0].item<double>(), 3.125);
  EXPECT_EQ(t[1].item<double>(), -1e300);
}

TEST(ReadIdx, ReadsAnEmptyDimension) {
  TempDir dir;
  write_raw(dir.file("empty"), idx_header(0x0D, {0, 28}));
  at::Tensor t = read_idx(dir.file("empty"));
  EXPECT_EQ(t.sizes(), (std::vector<int64_t>{0, 28}));
}

TEST(ReadIdx, MissingFileIsNamed) {
  TempDir dir;
  const std::string path = dir.file("nope-idx3-ubyte.gz");
  const std::string message = read_error(path);
  EXPECT_CONTAINS(message, path);
  EXPECT_CONTAINS(message, "does not exist");
  EXPECT_EQ(message.find("apt-get"), std::string::npos) << message;
}

TEST(ReadIdx, MissingFashionMnistFileSuggestsTheDebianPackage) {
  const std::string path = std::string(kFashionMnistDir) + "/no-such-file-idx3-ubyte.gz";
  const std::string message = read_error(path);
  EXPECT_CONTAINS(message, path);
  EXPECT_CONTAINS(message, "apt-get install dataset-fashion-mnist");
}

TEST(ReadIdx, FolderIsNotAFile) {
  TempDir dir;
  EXPECT_CONTAINS(read_error(dir.str()), dir.str());
}

TEST(ReadIdx, BadMagicShowsTheBytesFound) {
  TempDir dir;
  const std::string path = dir.file("archive.zip");
  write_raw(path, {'P', 'K', 3, 4, 0, 0, 0, 0});
  const std::string message = read_error(path);
  EXPECT_CONTAINS(message, path);
  EXPECT_CONTAINS(message, "50 4b 03 04");
}

TEST(ReadIdx, UnknownElementTypeIsBadMagic) {
  TempDir dir;
  const std::string path = dir.file("odd.gz");
  write_gz(path, concat(idx_header(0x07, {1}), {0}));
  const std::string message = read_error(path);
  EXPECT_CONTAINS(message, path);
  EXPECT_CONTAINS(message, "00 00 07 01");
}

TEST(ReadIdx, EmptyFileIsAnError) {
  TempDir dir;
  write_raw(dir.file("empty"), {});
  write_gz(dir.file("empty.gz"), {});
  EXPECT_CONTAINS(read_error(dir.file("empty")), dir.file("empty"));
  EXPECT_CONTAINS(read_error(dir.file("empty.gz")), dir.file("empty.gz"));
}

TEST(ReadIdx, TruncatedHeaderSaysHowManyBytesWereFound) {
  TempDir dir;
  write_raw(dir.file("short-magic"), {0, 0});
  std::string message = read_error(dir.file("short-magic"));
  EXPECT_CONTAINS(message, dir.file("short-magic"));
  EXPECT_CONTAINS(message, "truncated header");
  EXPECT_CONTAINS(message, "found 2");

  Bytes header = idx_header(0x08, {10, 28, 28});
  header.resize(9);  // magic and one and a quarter of the three dimensions
  write_gz(dir.file("short-dims.gz"), header);
  message = read_error(dir.file("short-dims.gz"));
  EXPECT_CONTAINS(message, dir.file("short-dims.gz"));
  EXPECT_CONTAINS(message, "truncated header");
  EXPECT_CONTAINS(message, "need 16");
  EXPECT_CONTAINS(message, "found 9");
}

TEST(ReadIdx, TruncatedDataSaysBytesExpectedAndFound) {
  TempDir dir;
  const Bytes bytes = concat(idx_header(0x0C, {3, 5}), Bytes(50, 1));  // 60 bytes announced
  write_gz(dir.file("cut-idx3-ubyte.gz"), bytes);
  write_raw(dir.file("cut-idx3-ubyte"), bytes);
  for (const std::string& path : {dir.file("cut-idx3-ubyte.gz"), dir.file("cut-idx3-ubyte")}) {
    const std::string message = read_error(path);
    EXPECT_CONTAINS(message, path);
    EXPECT_CONTAINS(message, "truncated");
    EXPECT_CONTAINS(message, "60 data bytes");
    EXPECT_CONTAINS(message, "only 50");
    EXPECT_CONTAINS(message, "[3, 5]");
  }
}

TEST(ReadIdx, HeaderAnnouncingTerabytesIsAnErrorNotACrash) {
  TempDir dir;
  const Bytes bytes = concat(idx_header(0x08, {0x7fffffff, 28, 28}), Bytes(100));
  write_gz(dir.file("huge.gz"), bytes);
  write_raw(dir.file("huge"), bytes);
  write_raw(dir.file("overflow"), idx_header(0x0E, {0x7fffffff, 0x7fffffff, 0x7fffffff}));
  EXPECT_CONTAINS(read_error(dir.file("huge.gz")), dir.file("huge.gz"));
  EXPECT_CONTAINS(read_error(dir.file("huge")), "only 100");
  EXPECT_CONTAINS(read_error(dir.file("overflow")), "[2147483647, 2147483647, 2147483647]");
}

TEST(ReadIdx, NegativeDimensionIsAnError) {
  TempDir dir;
  write_raw(dir.file("negative"), idx_header(0x08, {0xfffffffd}));
  EXPECT_CONTAINS(read_error(dir.file("negative")), "-3");
}

TEST(ReadIdx, CutOffGzipStreamIsReportedAsTruncated) {
  TempDir dir;
  const std::string full = dir.file("full.gz");
  Bytes payload(20000);
  for (size_t i = 0; i < payload.size(); ++i)
    payload[i] = static_cast<unsigned char>(i * 7919 % 251);
  write_gz(full, concat(idx_header(0x08, {20000}), payload));
  std::ifstream in(full, std::ios::binary);
  Bytes gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  gz.resize(gz.size() / 2);
  const std::string cut = dir.file("cut.gz");
  write_raw(cut, gz);
  const std::string message = read_error(cut);
  EXPECT_CONTAINS(message, cut);
  EXPECT_CONTAINS(message, "truncated");
  EXPECT_CONTAINS(message, "cut off");
}

TEST(ReadIdx, CorruptGzipStreamIsAnError) {
  TempDir dir;
  const std::string path = dir.file("corrupt.gz");
  write_raw(path, {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff});
  EXPECT_CONTAINS(read_error(path), path);
}

TEST(ReadIdx, TrailingGarbageIsAnError) {
  TempDir dir;
  const std::string path = dir.file("long");
  write_raw(path, concat(idx_header(0x08, {2, 2}), {1, 2, 3, 4, 5, 6, 7}));
  const std::string message = read_error(path);
  EXPECT_CONTAINS(message, path);
  EXPECT_CONTAINS(message, "3 bytes of trailing garbage");
}

// ---------------------------------------------------------------------------------------
// MNIST-format folders

Bytes images_file(uint32_t n, unsigned char first_pixel) {
  Bytes out = idx_header(0x08, {n, 28, 28});
  for (uint32_t i = 0; i < n * 28 * 28; ++i) out.push_back(static_cast<unsigned char>(i % 256));
  if (n > 0) out[16] = first_pixel;
  return out;
}

Bytes labels_file(const Bytes& labels) {
  return concat(idx_header(0x08, {static_cast<uint32_t>(labels.size())}), labels);
}

TEST(LoadMnistFormat, LoadsScaledImagesAndInt64Labels) {
  TempDir dir;
  write_gz(dir.file("train-images-idx3-ubyte.gz"), images_file(3, 255));
  write_raw(dir.file("train-labels-idx1-ubyte"), labels_file({7, 0, 9}));
  auto data = load_mnist_format(dir.str(), /*train=*/true);
  ASSERT_EQ(data->tensors().size(), 2u);
  const at::Tensor& images = data->tensors()[0];
  const at::Tensor& labels = data->tensors()[1];
  EXPECT_EQ(images.sizes(), (std::vector<int64_t>{3, 1, 28, 28}));
  EXPECT_EQ(images.scalar_type(), at::kFloat);
  EXPECT_EQ(images[0][0][0][0].item<float>(), 1.f);
  EXPECT_FLOAT_EQ(images[0][0][0][1].item<float>(), 1.f / 255);
  EXPECT_FLOAT_EQ(images[1][0][0][0].item<float>(), (784 % 256) / 255.f);
  EXPECT_EQ(labels.scalar_type(), at::kLong);
  EXPECT_EQ(labels[2].item<int64_t>(), 9);
}

TEST(LoadMnistFormat, TestSplitReadsTheT10kFiles) {
  TempDir dir;
  write_raw(dir.file("train-images-idx3-ubyte"), images_file(3, 0));
  write_raw(dir.file("train-labels-idx1-ubyte"), labels_file({1, 2, 3}));
  write_gz(dir.file("t10k-images-idx3-ubyte.gz"), images_file(2, 0));
  write_gz(dir.file("t10k-labels-idx1-ubyte.gz"), labels_file({4, 5}));
  EXPECT_EQ(load_mnist_format(dir.str(), /*train=*/false)->size(), 2);
  EXPECT_EQ(load_mnist_format(dir.str(), /*train=*/true)->size(), 3);
}

TEST(LoadMnistFormat, DifferentCountsNameBothFiles) {
  TempDir dir;
  write_raw(dir.file("train-images-idx3-ubyte"), images_file(3, 0));
  write_raw(dir.file("train-labels-idx1-ubyte"), labels_file({1, 2}));
  try {
    load_mnist_format(dir.str(), true);
    FAIL() << "no DataError";
  } catch (const DataError& e) {
    EXPECT_CONTAINS(e.what(), dir.file("train-images-idx3-ubyte"));
    EXPECT_CONTAINS(e.what(), dir.file("train-labels-idx1-ubyte"));
    EXPECT_CONTAINS(e.what(), "3 images");
    EXPECT_CONTAINS(e.what(), "2 labels");
  }
}

TEST(LoadMnistFormat, ImagesOfAnotherShapeAreAnError) {
  TempDir dir;
  write_raw(dir.file("train-images-idx3-ubyte"),
            concat(idx_header(0x08, {1, 32, 32}), Bytes(1024)));
  write_raw(dir.file("train-labels-idx1-ubyte"), labels_file({1}));
  try {
    load_mnist_format(dir.str(), true);
    FAIL() << "no DataError";
  } catch (const DataError& e) {
    EXPECT_CONTAINS(e.what(), dir.file("train-images-idx3-ubyte"));
    EXPECT_CONTAINS(e.what(), "[1, 32, 32]");
  }
}

TEST(LoadMnistFormat, MissingFilesAreNamed) {
  TempDir dir;
  write_raw(dir.file("train-images-idx3-ubyte"), images_file(1, 0));
  try {
    load_mnist_format(dir.str(), true);
    FAIL() << "no DataError";
  } catch (const DataError& e) {
    EXPECT_CONTAINS(e.what(), "train-labels-idx1-ubyte");
    EXPECT_CONTAINS(e.what(), dir.str());
  }
  EXPECT_THROW(load_mnist_format(dir.file("absent"), true), DataError);
}

// ---------------------------------------------------------------------------------------
// The real files of Debian's dataset-fashion-mnist package

constexpr const char* kNoFashionMnist =
    " is absent; apt-get install dataset-fashion-mnist to run this test";

TEST(FashionMnist, TrainSplitHas60000ImagesAnd6000PerClass) {
  if (!fs::is_directory(kFashionMnistDir)) GTEST_SKIP() << kFashionMnistDir << kNoFashionMnist;
  auto data = load_mnist_format(kFashionMnistDir, /*train=*/true);
  const at::Tensor& images = data->tensors()[0];
  const at::Tensor& labels = data->tensors()[1];
  EXPECT_EQ(data->size(), 60000);
  EXPECT_EQ(images.sizes(), (std::vector<int64_t>{60000, 1, 28, 28}));
  EXPECT_GE(images.min().item<float>(), 0.f);
  EXPECT_LE(images.max().item<float>(), 1.f);
  EXPECT_EQ(images.max().item<float>(), 1.f);
  EXPECT_EQ(labels.min().item<int64_t>(), 0);
  EXPECT_EQ(labels.max().item<int64_t>(), 9);
  EXPECT_TRUE(at::bincount(labels).equal(at::full({10}, 6000, at::kLong)));
}

TEST(FashionMnist, TestSplitHas10000Images) {
  if (!fs::is_directory(kFashionMnistDir)) GTEST_SKIP() << kFashionMnistDir << kNoFashionMnist;
  auto data = load_mnist_format(kFashionMnistDir, /*train=*/false);
  EXPECT_EQ(data->size(), 10000);
  EXPECT_EQ(data->tensors()[0].sizes(), (std::vector<int64_t>{10000, 1, 28, 28}));
  EXPECT_GE(data->tensors()[0].min().item<float>(), 0.f);
  EXPECT_LE(data->tensors()[0].max().item<float>(), 1.f);
  EXPECT_EQ(data->tensors()[1].min().item<int64_t>(), 0);
  EXPECT_EQ(data->tensors()[1].max().item<int64_t>(), 9);
}

}  // namespace
}  // namespace volt::data
