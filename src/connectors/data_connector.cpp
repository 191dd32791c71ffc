#include "volt/connectors/data_connector.h"

#include "volt/core/error.h"

namespace volt::connectors {
namespace {

/// A DataModule over fixed loaders.
class LoadersDataModule : public data::DataModule {
 public:
  LoadersDataModule(std::shared_ptr<data::DataLoader> train, std::shared_ptr<data::DataLoader> val,
                    std::shared_ptr<data::DataLoader> test, std::shared_ptr<data::DataLoader> predict)
      : train_(std::move(train)), val_(std::move(val)), test_(std::move(test)), predict_(std::move(predict)) {}
  std::shared_ptr<data::DataLoader> train_dataloader() override { return train_; }
  std::shared_ptr<data::DataLoader> val_dataloader() override { return val_; }
  std::shared_ptr<data::DataLoader> test_dataloader() override { return test_; }
  std::shared_ptr<data::DataLoader> predict_dataloader() override { return predict_; }

 private:
  std::shared_ptr<data::DataLoader> train_, val_, test_, predict_;
};

}  // namespace

DataConnector::DataConnector(std::shared_ptr<data::DataLoader> train, std::shared_ptr<data::DataLoader> val,
                             std::shared_ptr<data::DataLoader> test, std::shared_ptr<data::DataLoader> predict)
    : owned_(std::make_unique<LoadersDataModule>(std::move(train), std::move(val), std::move(test),
                                                 std::move(predict))),
      datamodule_(owned_.get()) {}

void DataConnector::prepare(Stage stage, bool is_local_zero) {
  if (is_local_zero) datamodule_->prepare_data();
  datamodule_->setup(stage);
  switch (stage) {
    case Stage::kFit:
      train_ = datamodule_->train_dataloader();
      val_ = datamodule_->val_dataloader();
      if (!train_) {
        throw ConfigError("fit needs training data, but no train loader was given and the DataModule's "
                          "train_dataloader() returned nullptr. Pass a loader to fit() or implement "
                          "train_dataloader().");
      }
      break;
    case Stage::kValidate:
      val_ = datamodule_->val_dataloader();
      if (!val_) {
        throw ConfigError("validate needs data, but val_dataloader() returned nullptr and no loader was given.");
      }
      break;
    case Stage::kTest:
      test_ = datamodule_->test_dataloader();
      if (!test_) {
        throw ConfigError("test needs data, but test_dataloader() returned nullptr and no loader was given.");
      }
      break;
    case Stage::kPredict:
      predict_ = datamodule_->predict_dataloader();
      if (!predict_) {
        throw ConfigError("predict needs data, but predict_dataloader() returned nullptr and no loader was given.");
      }
      break;
  }
}

void DataConnector::distribute(int64_t world_size, int64_t rank) {
  if (world_size <= 1) return;
  for (auto* loader : {&train_, &val_, &test_}) {
    if (!*loader) continue;
    if (!(*loader)->has_length()) {
      // A stream shards itself by (rank, worker): it only needs to know its place.
      (*loader)->set_distributed(world_size, rank);
      continue;
    }
    auto current = (*loader)->sampler_ptr();
    if (const auto* d = dynamic_cast<const data::DistributedSampler*>(current.get())) {
      if (d->num_replicas() == world_size && d->rank() == rank) continue;
      current = std::shared_ptr<const data::Sampler>(current, &d->base());
    }
    (*loader)->set_sampler(std::make_shared<data::DistributedSampler>(current, world_size, rank));
  }
}

void DataConnector::teardown(Stage stage) {
  datamodule_->teardown(stage);
}

int64_t DataConnector::num_batches(const std::shared_ptr<data::DataLoader>& loader, const BatchLimit& limit,
                                   const std::string& flag) {
  if (!loader) return 0;
  if (!loader->has_length()) {
    // Lightning's rule for a loader whose len() is inf: a count caps it, 1.0 runs the stream to
    // its end, any other share of an unknown length is refused.
    if (!limit.is_fraction) return static_cast<int64_t>(limit.value);
    if (limit.value == 1.0) return kInfiniteBatches;
    const std::string loader_name = flag.rfind("limit_", 0) == 0 && flag.size() > 14
                                        ? flag.substr(6, flag.size() - 14) + " loader"
                                        : std::string("loader");
    throw ConfigError(flag + "=" + limit.to_string() + " is a share of the " + loader_name +
                      ", but it reads an IterableDataset, which has no length. Use " + flag +
                      "=1.0 to read the whole stream, or a batch count such as " + flag +
                      "=100 (as Lightning requires).");
  }
  const int64_t available = loader->num_batches();
  if (limit.is_fraction && limit.value > 0.0 && available > 0 &&
      static_cast<int64_t>(static_cast<double>(available) * limit.value) == 0) {
    // Lightning refuses this too (rather than running one batch nobody asked for).
    const std::string loader_name = flag.rfind("limit_", 0) == 0 && flag.size() > 14
                                        ? flag.substr(6, flag.size() - 14) + " loader"
                                        : std::string("loader");
    throw ConfigError(flag + "=" + limit.to_string() + " selects no batch: the " + loader_name + " has " +
                      std::to_string(available) + " batches and " + limit.to_string() + " * " +
                      std::to_string(available) + " < 1. Use at least " + flag + "=" +
                      BatchLimit::fraction(1.0 / static_cast<double>(available)).to_string() +
                      ", a batch count such as " + flag + "=1, or 0 to skip these batches.");
  }
  return limit.apply(available);
}

}  // namespace volt::connectors
