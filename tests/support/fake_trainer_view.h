#pragma once
// A TrainerView for testing callbacks without a Trainer: state and metrics are plain
// members the test sets; requests are recorded.
#include <string>
#include <utility>
#include <vector>

#include "volt/core/module.h"
#include "volt/core/trainer_view.h"

namespace volt::testing {

class FakeTrainerView : public TrainerView {
 public:
  explicit FakeTrainerView(const Module* module = nullptr) : module_(module) {}

  TrainerState state_;
  MetricMap callback_metrics_;
  MetricMap progress_bar_metrics_;
  std::vector<std::shared_ptr<torch::optim::Optimizer>> optimizers_;
  std::vector<LRSchedulerConfig> lr_schedulers_;
  std::string log_dir_ = ".";
  bool has_loggers_ = false;

  // Recorded requests.
  std::vector<std::pair<std::string, bool>> saved_;  // (path, weights_only)
  std::vector<std::string> removed_;
  std::vector<std::string> stop_reasons_;
  std::vector<std::pair<MetricMap, int64_t>> logged_;

  const TrainerState& state() const override { return state_; }
  const MetricMap& callback_metrics() const override { return callback_metrics_; }
  const MetricMap& progress_bar_metrics() const override { return progress_bar_metrics_; }
  const Module& module() const override { return *module_; }
  const std::vector<std::shared_ptr<torch::optim::Optimizer>>& optimizers() const override { return optimizers_; }
  const std::vector<LRSchedulerConfig>& lr_schedulers() const override { return lr_schedulers_; }
  std::string log_dir() const override { return log_dir_; }
  bool has_loggers() const override { return has_loggers_; }
  void save_checkpoint(const std::string& path, bool weights_only) override { saved_.emplace_back(path, weights_only); }
  void remove_checkpoint(const std::string& path) override { removed_.push_back(path); }
  void request_stop(const std::string& reason) override {
    state_.should_stop = true;
    stop_reasons_.push_back(reason);
  }
  void log_metrics(const MetricMap& metrics, int64_t step) override { logged_.emplace_back(metrics, step); }
  bool reduce_boolean_decision(bool decision, bool) override { return decision; }

 private:
  const Module* module_;
};

}  // namespace volt::testing
