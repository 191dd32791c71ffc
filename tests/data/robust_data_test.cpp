// Data entry points against hostile files and numbers: FIFOs refused before they are
// opened, a file given as a folder, labels outside the declared classes, empty files,
// bounded loader settings; and the helpers behind the messages.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ATen/ops/ones.h>

#include <chrono>
#include <limits>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <string>
#include <vector>

#include "support/expect.h"
#include "support/temp_dir.h"
#include "volt/core/error.h"
#include "volt/core/file_check.h"
#include "volt/data/dataloader.h"
#include "volt/data/idx.h"
#include "volt/data/mnist_datamodule.h"

namespace fs = std::filesystem;
using volt::testing::contains;
using volt::testing::error_message;
using volt::testing::TempDir;

namespace {

using Bytes = std::vector<unsigned char>;

Bytes idx(unsigned char type, const std::vector<uint32_t>& dims, const Bytes& data) {
  Bytes out = {0, 0, type, static_cast<unsigned char>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<unsigned char>(d >> shift));
  }
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

void write(const std::string& path, const Bytes& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

/// An MNIST-format folder with `labels` (one 28x28 image each).
void mnist_folder(const std::string& dir, const std::string& split, const Bytes& labels) {
  const auto n = static_cast<uint32_t>(labels.size());
  write(dir + "/" + split + "-images-idx3-ubyte", idx(0x08, {n, 28, 28}, Bytes(size_t{n} * 784, 7)));
  write(dir + "/" + split + "-labels-idx1-ubyte", idx(0x08, {n}, labels));
}

template <typename E>
std::string message_within_5s(std::function<void()> fn) {
  auto result = std::async(std::launch::async, [fn] { return error_message<E>(fn); });
  if (result.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    ADD_FAILURE() << "still blocked after 5 s";
    std::_Exit(1);
  }
  return result.get();
}

}  // namespace

TEST(IdxRobust, AFifoIsRefusedWithoutBlocking) {
  TempDir dir;
  const std::string fifo = dir / "train-images-idx3-ubyte";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string msg = message_within_5s<volt::DataError>([&] { volt::data::read_idx(fifo); });
  EXPECT_TRUE(contains(msg, "FIFO")) << msg;
}

TEST(MnistFormatRobust, AFileGivenAsTheFolderSaysItIsAFile) {
  TempDir dir;
  const std::string file = dir / "data";
  std::ofstream(file) << "x";
  const std::string msg = error_message<volt::DataError>([&] { volt::data::load_mnist_format(file, true); });
  EXPECT_TRUE(contains(msg, "is a file, not a folder")) << msg;
  EXPECT_FALSE(contains(msg, "does not exist")) << msg;
}

TEST(MnistFormatRobust, ALabelOutsideTheClassesNamesTheFileTheLabelAndTheCounts) {
  TempDir dir;
  mnist_folder(dir.str(), "t10k", {1, 2, 12, 3, 200});
  const std::string msg = error_message<volt::DataError>([&] { volt::data::load_mnist_format(dir.str(), false, 10); });
  EXPECT_TRUE(contains(msg, "t10k-labels-idx1-ubyte")) << msg;
  EXPECT_TRUE(contains(msg, "label 12 at index 2")) << msg;
  EXPECT_TRUE(contains(msg, "2 of 5 labels")) << msg;
  EXPECT_TRUE(contains(msg, "10 classes")) << msg;
}

TEST(MnistDataModuleRobust, EmptyTrainingFilesNameTheFilesAndTheCount) {
  TempDir dir;
  mnist_folder(dir.str(), "train", {});
  volt::data::MnistDataModule dm({dir.str(), 8, 1, 0, 0});
  const std::string msg = error_message<volt::DataError>([&] { dm.setup(volt::Stage::kFit); });
  EXPECT_TRUE(contains(msg, "train-images-idx3-ubyte")) << msg;
  EXPECT_TRUE(contains(msg, "0 images")) << msg;
  EXPECT_FALSE(contains(msg, "between 1 and -1")) << msg;
}

TEST(MnistDataModuleRobust, OneImageIsTooFewToSplit) {
  TempDir dir;
  mnist_folder(dir.str(), "train", {3});
  volt::data::MnistDataModule dm({dir.str(), 8, 1, 0, 0});
  const std::string msg = error_message<volt::DataError>([&] { dm.setup(volt::Stage::kFit); });
  EXPECT_TRUE(contains(msg, "1 image(s)")) << msg;
}

TEST(MnistDataModuleRobust, OptionsOutOfRangeAreConfigErrorsNamingTheOption) {
  EXPECT_TRUE(contains(error_message<volt::ConfigError>([] {
                         volt::data::MnistDataModule({"/nonexistent", 0, 10, 0, 0}).prepare_data();
                       }),
                       "data.batch_size=0"));
  EXPECT_TRUE(contains(error_message<volt::ConfigError>([] {
                         volt::data::MnistDataModule({"/nonexistent", int64_t{1} << 62, 10, 0, 0}).prepare_data();
                       }),
                       "data.batch_size=4611686018427387904"));
  EXPECT_TRUE(contains(error_message<volt::ConfigError>([] {
                         volt::data::MnistDataModule({"/nonexistent", 8, 10, 100000, 0}).prepare_data();
                       }),
                       "data.num_workers=100000"));
}

TEST(DataLoaderRobust, NumWorkersAndPrefetchAreCapped) {
  auto ds = std::make_shared<volt::data::TensorDataset>(std::vector<at::Tensor>{at::ones({4, 2})});
  volt::data::DataLoaderOptions o;
  o.num_workers = volt::data::max_loader_workers() + 1;
  EXPECT_TRUE(contains(error_message<volt::ConfigError>([&] { volt::data::DataLoader(ds, o); }),
                       "num_workers=" + std::to_string(o.num_workers)));
  o.num_workers = 0;
  o.prefetch_factor = int64_t{1} << 40;
  EXPECT_TRUE(contains(error_message<volt::ConfigError>([&] { volt::data::DataLoader(ds, o); }), "prefetch_factor"));
}

TEST(DataLoaderRobust, AHugeBatchSizeCountsOneBatchWithoutOverflow) {
  auto ds = std::make_shared<volt::data::TensorDataset>(std::vector<at::Tensor>{at::ones({4, 2})});
  volt::data::DataLoaderOptions o;
  o.batch_size = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(volt::data::DataLoader(ds, o).num_batches(), 1);
}

TEST(FileCheck, QuotePathEscapesBytesThatAreNotUtf8AndControlCharacters) {
  EXPECT_EQ(volt::quote_path("a/b.ckpt"), "'a/b.ckpt'");
  EXPECT_EQ(volt::quote_path("caf\xc3\xa9"), "'caf\xc3\xa9'");  // valid UTF-8 stays
  EXPECT_EQ(volt::quote_path("x\xff" "y"), "'x\\xffy'");
  EXPECT_EQ(volt::quote_path("new\nline"), "'new\\nline'");
  EXPECT_EQ(volt::quote_path("it's"), "'it\\'s'");
  EXPECT_EQ(volt::quote_path("\xc0\xaf"), "'\\xc0\\xaf'");  // overlong encoding of '/'
}

TEST(FileCheck, KindsAndMessages) {
  TempDir dir;
  const std::string file = dir / "f";
  std::ofstream(file) << "x";
  const std::string fifo = dir / "p";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(volt::file_kind(file), volt::FileKind::kRegular);
  EXPECT_EQ(volt::file_kind(dir.str()), volt::FileKind::kDirectory);
  EXPECT_EQ(volt::file_kind(fifo), volt::FileKind::kFifo);
  EXPECT_EQ(volt::file_kind(dir / "missing"), volt::FileKind::kMissing);
  EXPECT_EQ(volt::regular_file_problem(file, "data file"), "");
  EXPECT_TRUE(contains(volt::regular_file_problem(fifo, "data file"), "is a FIFO (named pipe)"));
  EXPECT_TRUE(contains(volt::folder_problem(file, "root"), "is a file, not a folder"));
  EXPECT_TRUE(contains(volt::folder_problem(file + "/sub/dir", "root"), "cannot be created"));
  EXPECT_EQ(volt::folder_problem(dir / "new/sub", "root"), "");
}
