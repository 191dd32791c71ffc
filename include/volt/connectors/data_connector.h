#pragma once
#include <memory>
#include <string>

#include "volt/core/batch_limit.h"
#include "volt/core/types.h"
#include "volt/data/datamodule.h"

namespace volt::connectors {

/// Where a run's data comes from: a DataModule, or loaders handed to fit/validate/test/
/// predict directly (wrapped in a DataModule). Calls prepare_data and setup in order and
/// works out how many batches each stage runs.
class DataConnector {
 public:
  /// Uses `datamodule` (not owned; must outlive the stage).
  explicit DataConnector(data::DataModule& datamodule) : datamodule_(&datamodule) {}
  /// Wraps explicit loaders (any may be nullptr).
  DataConnector(std::shared_ptr<data::DataLoader> train, std::shared_ptr<data::DataLoader> val,
                std::shared_ptr<data::DataLoader> test, std::shared_ptr<data::DataLoader> predict);

  /// prepare_data (on local rank 0 only) and setup(stage), then fetches the loaders.
  void prepare(Stage stage, bool is_local_zero);
  void teardown(Stage stage);
  /// Gives each of `world_size` ranks its share of the train, val and test loaders (a
  /// DistributedSampler over each loader's own sampler). No-op for one rank or a loader
  /// already distributed. Call after prepare.
  void distribute(int64_t world_size, int64_t rank);

  std::shared_ptr<data::DataLoader> train_loader() const { return train_; }
  std::shared_ptr<data::DataLoader> val_loader() const { return val_; }
  std::shared_ptr<data::DataLoader> test_loader() const { return test_; }
  std::shared_ptr<data::DataLoader> predict_loader() const { return predict_; }

  /// Batches a stage runs: `limit` (the Trainer flag named `flag`, e.g.
  /// "limit_val_batches") applied to the loader's length (0 without a loader). A positive
  /// fraction that selects no batch of a non-empty loader (0.05 of 10 batches) is a
  /// ConfigError naming the smallest fraction that would work, as in Lightning.
  static int64_t num_batches(const std::shared_ptr<data::DataLoader>& loader, const BatchLimit& limit,
                             const std::string& flag);

 private:
  std::unique_ptr<data::DataModule> owned_;
  data::DataModule* datamodule_ = nullptr;
  std::shared_ptr<data::DataLoader> train_, val_, test_, predict_;
};

}  // namespace volt::connectors
