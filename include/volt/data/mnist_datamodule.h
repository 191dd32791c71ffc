#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "volt/data/datamodule.h"
#include "volt/data/dataset.h"
#include "volt/data/idx.h"

namespace volt::data {

/// A folder of MNIST-format IDX files (Debian's dataset-fashion-mnist by default; MNIST,
/// KMNIST and the like have the same layout) as a DataModule: the training file split at
/// random into train and val, the t10k file for test and predict. Training batches are
/// shuffled; evaluation loaders use 4 x batch_size (no gradients, so memory allows it).
class MnistDataModule : public DataModule {
 public:
  struct Options {
    std::string dir = kFashionMnistDir;
    int64_t batch_size = 64;
    /// Training images held out for validation: 1 .. (training images - 1).
    int64_t val_size = 5000;
    int64_t num_workers = 0;
    /// Seeds the train/val split and the shuffling.
    uint64_t seed = 0;
    /// Classes the labels must lie in (0 .. num_classes - 1); 10 for the MNIST family.
    int64_t num_classes = 10;
  };

  explicit MnistDataModule(Options options) : options_(std::move(options)) {}

  /// Checks the options (batch_size 1 .. 2^24, val_size >= 1, num_workers 0 .. 4 x cores,
  /// num_classes 1 .. 256): a ConfigError naming the option and the value given.
  void prepare_data() override;
  /// Loads the files a stage needs, once. A val_size outside 1 .. (training images - 1) is a
  /// ConfigError naming data.val_size; an empty file, images and labels that disagree, or a
  /// label outside 0 .. num_classes - 1 is a DataError naming the file and the counts. Any
  /// other failure leaves as a volt::DataError too.
  void setup(Stage stage) override;
  std::shared_ptr<DataLoader> train_dataloader() override { return loader(train_, true); }
  std::shared_ptr<DataLoader> val_dataloader() override { return loader(val_, false); }
  std::shared_ptr<DataLoader> test_dataloader() override { return loader(test_, false); }
  std::shared_ptr<DataLoader> predict_dataloader() override { return loader(test_, false); }

  const Options& options() const { return options_; }
  /// Options::batch_size, which the batch-size finder may change (checked again by prepare_data).
  std::optional<int64_t> batch_size() const override { return options_.batch_size; }
  void set_batch_size(int64_t batch_size) override { options_.batch_size = batch_size; }

 private:
  std::shared_ptr<DataLoader> loader(std::shared_ptr<const Dataset> dataset, bool train) const;

  Options options_;
  std::shared_ptr<const Dataset> train_, val_, test_;
};

}  // namespace volt::data
