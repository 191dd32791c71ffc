#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/randint.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "data/image_reference.h"
#include "support/temp_dir.h"
#include "volt/core/error.h"
#include "volt/data/dataloader.h"
#include "volt/data/image/decode.h"
#include "volt/data/image/image_folder.h"
#include "volt/data/image/transforms.h"

namespace {

namespace fs = std::filesystem;
using volt::data::ImageFolder;
using volt::data::ImageFolderOptions;
using volt::testing::TempDir;

void png(const fs::path& path, int value, int h = 8, int w = 8) {
  fs::create_directories(path.parent_path());
  volt::data::write_png(path.string(), at::full({h, w, 3}, value, at::kByte));
}

void touch(const fs::path& path, const std::string& bytes = "x") {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

// Names that sort differently by byte, by case and by path: upper before lower case, '-' before
// '/', digits, a hidden folder, nested folders, upper-case extensions, files that are not images.
void make_tricky_folder(const fs::path& r) {
  png(r / "cat" / "b.png", 10);
  png(r / "cat" / "A.PNG", 11);
  png(r / "cat" / "a.png", 12);
  png(r / "cat" / "sub" / "z.png", 13);
  png(r / "cat" / "sub-2" / "y.png", 14);
  png(r / "cat" / "sub" / "deeper" / "x.Jpeg", 15);
  touch(r / "cat" / "notes.txt");
  touch(r / "cat" / "png");
  png(r / "Dog" / "10.png", 20);
  png(r / "Dog" / "9.png", 21);
  png(r / "Dog" / "img.tiff", 22);  // found by its extension, as torchvision finds it
  png(r / "bird_1" / "one.webp", 30);
  png(r / ".hidden" / "h.png", 40);
  touch(r / "README.md");
  fs::create_symlink(fs::absolute(r / "Dog"), r / "link_to_dog");
}

TEST(ImageFolder, ClassesOrderAndTargetsEqualTorchvisionOnTheSameFolder) {
  if (const std::string why = volt::testing::python_missing("torchvision"); !why.empty()) GTEST_SKIP() << why;
  TempDir dir("volt_image_folder");
  const fs::path root = dir.path() / "root";
  make_tricky_folder(root);
  const auto tv = nlohmann::json::parse(volt::testing::run_image_reference("folder '" + root.string() + "'"));
  ASSERT_FALSE(tv.contains("error")) << tv.dump();
  const ImageFolder folder(root.string());
  EXPECT_EQ(folder.classes(), tv["classes"].get<std::vector<std::string>>());
  EXPECT_EQ(folder.class_to_idx(), (tv["class_to_idx"].get<std::map<std::string, int64_t>>()));
  std::vector<std::string> ours;
  for (const auto& [path, target] : folder.samples()) ours.push_back(fs::path(path).lexically_relative(root).string());
  EXPECT_EQ(ours, tv["samples"].get<std::vector<std::string>>());
  EXPECT_EQ(folder.targets(), tv["targets"].get<std::vector<int64_t>>());
  ASSERT_EQ(folder.size(), 14);
}

TEST(ImageFolder, EmptyRootAndClassWithoutImagesAreRefusedAsTorchvisionRefusesThem) {
  TempDir dir("volt_image_folder_empty");
  const fs::path root = dir.path() / "root";
  fs::create_directories(root);
  touch(root / "stray.png");
  try {
    ImageFolder folder(root.string());
    FAIL() << "no error for a folder without class folders";
  } catch (const volt::DataError& e) {
    EXPECT_NE(std::string(e.what()).find("found no class folder"), std::string::npos) << e.what();
  }
  png(root / "a" / "1.png", 1);
  touch(root / "b" / "notes.txt");
  fs::create_directories(root / "c");
  try {
    ImageFolder folder(root.string());
    FAIL() << "no error for classes without images";
  } catch (const volt::DataError& e) {
    EXPECT_NE(std::string(e.what()).find("for the classes b, c"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ImageFolder((root / "missing").string()), volt::DataError);
  EXPECT_THROW(ImageFolder((root / "stray.png").string()), volt::DataError);
  if (volt::testing::python_missing("torchvision").empty()) {
    const auto tv = nlohmann::json::parse(volt::testing::run_image_reference("folder '" + root.string() + "'"));
    EXPECT_EQ(tv.value("error", ""), "FileNotFoundError") << tv.dump();
    EXPECT_NE(tv.value("message", "").find("b, c"), std::string::npos) << tv.dump();
  }
}

TEST(ImageFolder, CorruptFileFailsItsSampleNamingTheFileOrIsSkippedWithACount) {
  TempDir dir("volt_image_folder_corrupt");
  const fs::path root = dir.path() / "root";
  png(root / "a" / "good.png", 5);
  png(root / "a" / "good2.png", 6);
  touch(root / "a" / "broken.png", std::string("\x89PNG\r\n\x1a\n", 8) + "garbage");
  touch(root / "b" / "fake.jpg", "not a jpeg at all");
  png(root / "b" / "fine.png", 7);
  const ImageFolder strict(root.string());
  ASSERT_EQ(strict.size(), 5);
  // a/broken.png sorts first.
  try {
    strict.get(0);
    FAIL() << "no error for a corrupt file";
  } catch (const volt::DataError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("broken.png"), std::string::npos) << what;
    EXPECT_NE(what.find("sample 0 (class 'a')"), std::string::npos) << what;
  }
  // Through the loader's workers the error names the file too.
  volt::data::DataLoaderOptions lo;
  lo.batch_size = 5;
  lo.num_workers = 2;
  volt::data::DataLoader loader(std::make_shared<ImageFolder>(root.string()), lo);
  try {
    loader.stream()->next();
    FAIL() << "the loader hid the corrupt file";
  } catch (const volt::DataError& e) {
    EXPECT_NE(std::string(e.what()).find("broken.png"), std::string::npos) << e.what();
  }

  ImageFolderOptions opts;
  opts.skip_corrupt = true;
  const ImageFolder lenient(root.string(), opts);
  EXPECT_EQ(lenient.size(), 3);
  EXPECT_EQ(lenient.skipped(), 2);
  ASSERT_EQ(lenient.skipped_files().size(), 2u);
  EXPECT_NE(lenient.skipped_files()[0].first.find("broken.png"), std::string::npos);
  EXPECT_NE(lenient.skipped_files()[1].first.find("fake.jpg"), std::string::npos);
  EXPECT_EQ(lenient.get(2)[1].item<int64_t>(), 1);
  EXPECT_EQ(lenient.get(0)[0].select(2, 0)[0][0].item<uint8_t>(), 5);
}

TEST(ImageFolder, AugmentedBatchesAreTheSameForAnyWorkerCountAndChangeWithEpochAndSeed) {
  TempDir dir("volt_image_folder_workers");
  const fs::path root = dir.path() / "root";
  at::manual_seed(0);
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < 7; ++i) {
      fs::create_directories(root / ("c" + std::to_string(c)));
      volt::data::write_png((root / ("c" + std::to_string(c)) / (std::to_string(i) + ".png")).string(),
                            at::randint(0, 256, {24 + i, 30, 3}, at::kByte));
    }
  }
  namespace T = volt::data::transforms;
  ImageFolderOptions opts;
  opts.seed = 42;
  opts.transform = std::make_shared<T::Compose>(std::vector<T::TransformPtr>{
      std::make_shared<T::RandomResizedCrop>(std::vector<int64_t>{16}), std::make_shared<T::RandomHorizontalFlip>(),
      std::make_shared<T::ColorJitter>(0.4, 0.4, 0.4), std::make_shared<T::ToTensor>()});
  // The loader passes its epoch to the folder (Dataset::set_epoch); the shuffle order stays epoch 0's
  // (a sampler that ignores the epoch), so only the augmentations change with it.
  struct EpochZeroOrder : volt::data::Sampler {
    volt::data::RandomSampler base;
    explicit EpochZeroOrder(int64_t n) : base(n, 7) {}
    std::vector<int64_t> indices(int64_t) const override { return base.indices(0); }
    int64_t size() const override { return base.size(); }
  };
  auto run = [&](int64_t workers, int64_t epoch, uint64_t seed) {
    ImageFolderOptions o = opts;
    o.seed = seed;
    auto folder = std::make_shared<ImageFolder>(root.string(), o);
    volt::data::DataLoaderOptions lo;
    lo.batch_size = 4;
    lo.num_workers = workers;
    volt::data::DataLoader loader(folder, lo);
    loader.set_sampler(std::make_shared<EpochZeroOrder>(folder->size()));
    loader.set_epoch(epoch);
    std::vector<at::Tensor> out;
    auto stream = loader.stream();
    EXPECT_EQ(folder->epoch(), epoch);
    while (auto b = stream->next()) {
      EXPECT_EQ((*b)[0].sizes(), (at::IntArrayRef{static_cast<int64_t>((*b)[1].size(0)), 3, 16, 16}));
      out.push_back((*b)[0]);
      out.push_back((*b)[1]);
    }
    return out;
  };
  const auto inline0 = run(0, 0, 42);
  for (const int64_t workers : {1, 2, 3}) {
    const auto other = run(workers, 0, 42);
    ASSERT_EQ(other.size(), inline0.size());
    for (size_t i = 0; i < other.size(); ++i) EXPECT_TRUE(at::equal(other[i], inline0[i])) << workers << " " << i;
  }
  const auto epoch1 = run(2, 1, 42);
  const auto seed43 = run(0, 0, 43);
  EXPECT_FALSE(at::equal(epoch1[0], inline0[0]));
  EXPECT_FALSE(at::equal(seed43[0], inline0[0]));
}

}  // namespace
