#include "volt/callbacks/lr_monitor.h"

#include <cxxabi.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <typeinfo>

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

bool has_momentum(const torch::optim::Optimizer& optimizer) {
  const auto& options = optimizer.defaults();
  return dynamic_cast<const torch::optim::SGDOptions*>(&options) != nullptr ||
         dynamic_cast<const torch::optim::AdamOptions*>(&options) != nullptr ||
         dynamic_cast<const torch::optim::AdamWOptions*>(&options) != nullptr ||
         dynamic_cast<const torch::optim::RMSpropOptions*>(&options) != nullptr;
}

}  // namespace

std::string LearningRateMonitor::optimizer_class_name(const torch::optim::Optimizer& optimizer) {
  // The dynamic type's unqualified name, as Python's type(optimizer).__name__:
  // torch::optim::Adam -> "Adam", a user's subclass -> its own name.
  const char* mangled = typeid(optimizer).name();
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  std::string name = status == 0 && demangled ? demangled.get() : mangled;
  const size_t template_start = name.find('<');
  const size_t last_colon = name.rfind("::", template_start);
  if (last_colon != std::string::npos) name = name.substr(last_colon + 2);
  return name;
}

std::vector<LearningRateMonitor::Entry> LearningRateMonitor::entries(const TrainerView& view) {
  // Lightning's naming: schedulers first ("lr-<OptimizerClass>" unless named), then the
  // optimizers no scheduler drives; the n-th unnamed use of one optimizer class gets
  // "-<n-1>"; an optimizer with several parameter groups one key per group, "/pg<i>".
  std::vector<Entry> out;
  std::vector<const torch::optim::Optimizer*> seen;
  std::map<std::string, int> seen_types;
  std::set<std::string> used;
  auto add = [&](const torch::optim::Optimizer& optimizer, const std::string& name, bool counts,
                 const Interval* interval) {
    seen.push_back(&optimizer);
    const std::string cls = optimizer_class_name(optimizer);
    if (counts) ++seen_types[cls];
    std::string base = name.empty() ? "lr-" + cls : name;
    auto it = seen_types.find(cls);
    if (it != seen_types.end() && it->second > 1) base += "-" + std::to_string(it->second - 1);
    // Two schedulers given one name: Lightning logs one key, the second value silently
    // replacing the first; Volt keeps both (docs/lightning-differences.md).
    const std::string wanted = base;
    for (int n = 1; !used.insert(base).second; ++n) base = wanted + "-" + std::to_string(n);
    Entry entry{&optimizer, {}, interval != nullptr, interval != nullptr ? *interval : Interval::kEpoch};
    const size_t groups = optimizer.param_groups().size();
    for (size_t g = 0; g < groups; ++g) {
      entry.names.push_back(groups > 1 ? base + "/pg" + std::to_string(g + 1) : base);
    }
    out.push_back(std::move(entry));
  };
  for (const LRSchedulerConfig& config : view.lr_schedulers()) {
    if (!config.scheduler) continue;
    add(config.scheduler->optimizer(), config.name, config.name.empty(), &config.interval);
  }
  for (const auto& optimizer : view.optimizers()) {
    if (!optimizer) continue;
    bool driven = false;
    for (const auto* s : seen) driven = driven || s == optimizer.get();
    if (!driven) add(*optimizer, "", true, nullptr);
  }
  return out;
}

LearningRateMonitor::LearningRateMonitor(std::optional<Interval> logging_interval, bool log_momentum)
    : logging_interval_(logging_interval), log_momentum_(log_momentum) {}

void LearningRateMonitor::setup(TrainerView& view, Stage stage) {
  if (stage == Stage::kFit && !view.has_loggers()) {
    throw ConfigError(
        "LearningRateMonitor needs a logger; the Trainer has none, so the learning rates "
        "would be recorded nowhere. Attach a logger (e.g. volt::loggers::CSVLogger) or "
        "remove the LearningRateMonitor callback.");
  }
}

void LearningRateMonitor::on_train_start(TrainerView& view) {
  if (!log_momentum_ || warned_momentum_) return;
  bool all_have_momentum = true;
  for (const auto& optimizer : view.optimizers()) {
    if (optimizer && !has_momentum(*optimizer)) all_have_momentum = false;
  }
  if (all_have_momentum) return;
  warned_momentum_ = true;
  if (view.state().is_global_zero) {
    std::cerr << "[volt] warning: LearningRateMonitor(log_momentum=true), but some optimizers have no momentum "
                 "(SGD, RMSprop: momentum; Adam, AdamW: beta1); their momentum is logged as 0.\n";
  }
}

MetricMap LearningRateMonitor::collect(const TrainerView& view, std::optional<Interval> interval) const {
  MetricMap out;
  for (const Entry& entry : entries(view)) {
    // Optimizers without a scheduler are logged at every logging point, as in Lightning.
    if (entry.has_scheduler && interval && entry.interval != *interval) continue;
    const auto& groups = entry.optimizer->param_groups();
    for (size_t g = 0; g < groups.size() && g < entry.names.size(); ++g) {
      out[entry.names[g]] = groups[g].options().get_lr();
      if (log_momentum_) out[entry.names[g] + "-momentum"] = momentum_of(groups[g].options());
    }
  }
  return out;
}

void LearningRateMonitor::on_train_batch_start(TrainerView& view, const Batch& /*batch*/, int64_t /*batch_idx*/) {
  const TrainerState& s = view.state();
  if (logging_interval_ == Interval::kEpoch ||
      !should_update_logs(s.batches_that_stepped, s.log_every_n_steps, s.should_stop)) {
    return;
  }
  // Unset: step-interval schedulers; kStep: every scheduler.
  const MetricMap metrics = collect(view, logging_interval_ ? std::nullopt : std::optional<Interval>(Interval::kStep));
  if (!metrics.empty()) view.log_metrics(metrics, s.batches_that_stepped);
}

void LearningRateMonitor::on_train_epoch_start(TrainerView& view) {
  if (logging_interval_ == Interval::kStep) return;
  const MetricMap metrics = collect(view, logging_interval_ ? std::nullopt : std::optional<Interval>(Interval::kEpoch));
  if (!metrics.empty()) view.log_metrics(metrics, view.state().batches_that_stepped);
}

}  // namespace volt::callbacks
