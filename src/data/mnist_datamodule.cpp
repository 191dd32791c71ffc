#include "volt/data/mnist_datamodule.h"

#include <algorithm>
#include <thread>

#include "volt/core/error.h"
#include "volt/core/error_boundary.h"
#include "volt/core/file_check.h"

namespace volt::data {
namespace {

// 2^24 examples per batch is far beyond any batch that fits in memory; it also keeps the
// evaluation loaders' 4 x batch_size far from overflowing.
constexpr int64_t kMaxBatchSize = int64_t{1} << 24;

}  // namespace

void MnistDataModule::prepare_data() {
  const auto& o = options_;
  if (o.batch_size < 1 || o.batch_size > kMaxBatchSize) {
    throw ConfigError("data.batch_size=" + std::to_string(o.batch_size) + " is not valid. Use 1 to " +
                      std::to_string(kMaxBatchSize) + " images per batch, e.g. 64.");
  }
  if (o.val_size < 1) {
    throw ConfigError("data.val_size=" + std::to_string(o.val_size) +
                      " is not valid. Hold out at least 1 training image for validation, e.g. 5000.");
  }
  const int64_t max_workers = max_loader_workers();
  if (o.num_workers < 0 || o.num_workers > max_workers) {
    throw ConfigError("data.num_workers=" + std::to_string(o.num_workers) + " is not valid. Use 0 (load on the "
                      "training thread) up to " + std::to_string(max_workers) + " (4 per core of this machine).");
  }
  if (o.num_classes < 1 || o.num_classes > 256) {
    throw ConfigError("num_classes=" + std::to_string(o.num_classes) +
                      " is not valid for MNIST-format labels (one byte each). Use 1 to 256, e.g. 10.");
  }
}

void MnistDataModule::setup(Stage stage) {
  prepare_data();  // the options again: setup may be called without prepare_data
  try {
    if ((stage == Stage::kFit || stage == Stage::kValidate) && !train_) {
      auto full = load_mnist_format(options_.dir, /*train=*/true, options_.num_classes);
      const int64_t n = full->size();
      if (n < 2) {
        throw DataError("the training files in " + quote_path(options_.dir) + " hold " + std::to_string(n) +
                        " image(s); a train/val split needs at least 2. Give the complete files.");
      }
      if (options_.val_size >= n) {
        throw ConfigError("data.val_size=" + std::to_string(options_.val_size) + " must be between 1 and " +
                          std::to_string(n - 1) + " (the training file has " + std::to_string(n) + " images).");
      }
      auto parts = random_split(full, {n - options_.val_size, options_.val_size}, options_.seed);
      train_ = parts[0];
      val_ = parts[1];
    }
    if ((stage == Stage::kTest || stage == Stage::kPredict) && !test_) {
      test_ = load_mnist_format(options_.dir, /*train=*/false, options_.num_classes);
    }
  } catch (...) {
    rethrow_as_volt_error("MnistDataModule could not load " + quote_path(options_.dir), ErrorKind::kData);
  }
}

std::shared_ptr<DataLoader> MnistDataModule::loader(std::shared_ptr<const Dataset> dataset, bool train) const {
  DataLoaderOptions o;
  o.batch_size = train ? options_.batch_size : 4 * options_.batch_size;
  o.shuffle = train;
  o.num_workers = options_.num_workers;
  o.seed = options_.seed;
  return std::make_shared<DataLoader>(std::move(dataset), o);
}

}  // namespace volt::data
