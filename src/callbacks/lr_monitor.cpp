#include "volt/callbacks/lr_monitor.h"

#include <map>
#include <tuple>

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include "volt/core/error.h"
#include "volt/core/lr_scheduler.h"

namespace volt::callbacks {
namespace {

// Lightning reports beta1 as Adam's momentum; optimizers without one report 0.
double momentum_of(const torch::optim::OptimizerOptions& options) {
  if (const auto* sgd = dynamic_cast<const torch::optim::SGDOptions*>(&options)) {
    return sgd->momentum();
  }
  if (const auto* adam = dynamic_cast<const torch::optim::AdamOptions*>(&options)) {
    return std::get<0>(adam->betas());
  }
  if (const auto* adamw = dynamic_cast<const torch::optim::AdamWOptions*>(&options)) {
    return std::get<0>(adamw->betas());
  }
  if (const auto* rmsprop = dynamic_cast<const torch::optim::RMSpropOptions*>(&options)) {
    return rmsprop->momentum();
  }
  return 0.0;
}

std::string unique_name(const std::string& base, std::map<std::string, int>& used) {
  const int n = used[base]++;
  return n == 0 ? base : base + "-" + std::to_string(n);
}

void add_groups(MetricMap& out, const std::string& base, const std::vector<double>& lrs,
                const torch::optim::Optimizer* optimizer, bool log_momentum) {
  for (size_t j = 0; j < lrs.size(); ++j) {
    const std::string key = lrs.size() > 1 ? base + "/pg" + std::to_string(j + 1) : base;
    out[key] = lrs[j];
    if (!log_momentum) continue;
    double momentum = 0.0;
    if (optimizer != nullptr && j < optimizer->param_groups().size()) {
      momentum = momentum_of(optimizer->param_groups()[j].options());
    }
    out[key + "-momentum"] = momentum;
  }
}

}  // namespace

LearningRateMonitor::LearningRateMonitor(std::optional<Interval> logging_interval,
                                         bool log_momentum)
    : logging_interval_(logging_interval), log_momentum_(log_momentum) {}

void LearningRateMonitor::setup(TrainerView& view, Stage stage) {
  last_logged_step_ = -1;
  if (stage == Stage::kFit && !view.has_loggers()) {
    throw ConfigError(
        "LearningRateMonitor needs a logger; the Trainer has none, so the learning rates "
        "would be recorded nowhere. Attach a logger (e.g. volt::loggers::CSVLogger) or "
        "remove the LearningRateMonitor callback.");
  }
}

MetricMap LearningRateMonitor::collect(const TrainerView& view, Interval hook) const {
  MetricMap out;
  const auto& schedulers = view.lr_schedulers();
  const auto& optimizers = view.optimizers();
  // Names are assigned over all entries, logged or not, so a key never changes meaning
  // between the step and the epoch hook.
  std::map<std::string, int> used;
  if (schedulers.empty()) {
    if (hook != logging_interval_.value_or(Interval::kStep)) return out;
    for (size_t i = 0; i < optimizers.size(); ++i) {
      const std::string base = unique_name("lr-opt" + std::to_string(i), used);
      if (!optimizers[i]) continue;
      std::vector<double> lrs;
      for (const auto& group : optimizers[i]->param_groups()) {
        lrs.push_back(group.options().get_lr());
      }
      add_groups(out, base, lrs, optimizers[i].get(), log_momentum_);
    }
    return out;
  }
  for (size_t i = 0; i < schedulers.size(); ++i) {
    const LRSchedulerConfig& config = schedulers[i];
    const std::string base =
        unique_name(config.name.empty() ? "lr-opt" + std::to_string(i) : config.name, used);
    if (!config.scheduler || hook != logging_interval_.value_or(config.interval)) continue;
    const torch::optim::Optimizer* optimizer =
        i < optimizers.size() ? optimizers[i].get() : nullptr;
    add_groups(out, base, config.scheduler->get_last_lr(), optimizer, log_momentum_);
  }
  return out;
}

void LearningRateMonitor::on_train_batch_end(TrainerView& view, const at::Tensor& /*loss*/,
                                             const Batch& /*batch*/, int64_t /*batch_idx*/) {
  if (logging_interval_ == Interval::kEpoch) return;
  const int64_t step = view.state().global_step;
  // Under gradient accumulation several batches end at one global step.
  if (step == last_logged_step_) return;
  last_logged_step_ = step;
  const MetricMap metrics = collect(view, Interval::kStep);
  if (!metrics.empty()) view.log_metrics(metrics, step);
}

void LearningRateMonitor::on_train_epoch_start(TrainerView& view) {
  if (logging_interval_ == Interval::kStep) return;
  const MetricMap metrics = collect(view, Interval::kEpoch);
  if (!metrics.empty()) view.log_metrics(metrics, view.state().global_step);
}

}  // namespace volt::callbacks
