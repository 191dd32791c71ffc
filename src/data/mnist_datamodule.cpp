#include "volt/data/mnist_datamodule.h"

#include "volt/core/error.h"

namespace volt::data {

void MnistDataModule::setup(Stage stage) {
  if ((stage == Stage::kFit || stage == Stage::kValidate) && !train_) {
    auto full = load_mnist_format(options_.dir, /*train=*/true);
    const int64_t n = full->size();
    if (options_.val_size <= 0 || options_.val_size >= n) {
      throw ConfigError("data.val_size=" + std::to_string(options_.val_size) + " must be between 1 and " +
                        std::to_string(n - 1) + " (the training file has " + std::to_string(n) + " images).");
    }
    auto parts = random_split(full, {n - options_.val_size, options_.val_size}, options_.seed);
    train_ = parts[0];
    val_ = parts[1];
  }
  if ((stage == Stage::kTest || stage == Stage::kPredict) && !test_) {
    test_ = load_mnist_format(options_.dir, /*train=*/false);
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
