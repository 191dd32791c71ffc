#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "volt/core/error.h"
#include "volt/core/types.h"
#include "volt/data/dataloader.h"

namespace volt::data {

/// The data side of a run (Lightning's LightningDataModule): download or check files,
/// build splits, hand out loaders. A loader that is not provided is nullptr.
class DataModule {
 public:
  virtual ~DataModule() = default;
  /// Once per node, on local rank 0, before setup (check or prepare files).
  virtual void prepare_data() {}
  /// On every rank, at the start of each stage (build data sets and splits).
  virtual void setup(Stage) {}
  virtual void teardown(Stage) {}
  virtual std::shared_ptr<DataLoader> train_dataloader() { return nullptr; }
  virtual std::shared_ptr<DataLoader> val_dataloader() { return nullptr; }
  virtual std::shared_ptr<DataLoader> test_dataloader() { return nullptr; }
  virtual std::shared_ptr<DataLoader> predict_dataloader() { return nullptr; }

  /// The training batch size, for the batch-size finder (volt::Tuner::scale_batch_size, Lightning's
  /// `datamodule.batch_size`); nullopt (the default): this DataModule has none the finder may change.
  virtual std::optional<int64_t> batch_size() const { return std::nullopt; }
  /// Sets the training batch size used by the loaders made after the call. Override it with
  /// batch_size(); the default throws NotSupportedError.
  virtual void set_batch_size(int64_t batch_size) {
    throw NotSupportedError("set_batch_size(" + std::to_string(batch_size) +
                            ") on a DataModule without a batch size: override batch_size() and set_batch_size() "
                            "to let the batch-size finder change it.");
  }
};

}  // namespace volt::data
