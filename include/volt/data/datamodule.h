#pragma once
#include <memory>

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
};

}  // namespace volt::data
