#include "volt/callbacks/histogram_monitor.h"

#include <unordered_map>

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include "volt/core/error.h"
#include "volt/core/module.h"

namespace volt::callbacks {

HistogramMonitor::HistogramMonitor(int64_t every_n_steps, bool log_weights, bool log_gradients)
    : every_n_steps_(every_n_steps), log_weights_(log_weights), log_gradients_(log_gradients) {
  if (every_n_steps_ < 1) {
    throw ConfigError("HistogramMonitor got every_n_steps=" + std::to_string(every_n_steps_) +
                      "; use 1 (every optimizer step) or more.");
  }
  if (!log_weights_ && !log_gradients_) {
    throw ConfigError(
        "HistogramMonitor with log_weights=false and log_gradients=false would log nothing; "
        "enable one or drop the callback.");
  }
}

std::string HistogramMonitor::state_key() const {
  return "HistogramMonitor{every_n_steps=" + std::to_string(every_n_steps_) + "}";
}

void HistogramMonitor::setup(TrainerView& view, Stage stage) {
  if (stage == Stage::kFit && !view.has_loggers()) {
    throw ConfigError(
        "HistogramMonitor needs a logger; the Trainer has none, so the histograms would be recorded "
        "nowhere. Set logger=tensorboard (or csv,tensorboard), or remove the callback.");
  }
  last_step_.clear();
}

void HistogramMonitor::on_before_optimizer_step(TrainerView& view, torch::optim::Optimizer& optimizer, size_t index) {
  const TrainerState& state = view.state();
  if (!state.is_global_zero || state.global_step % every_n_steps_ != 0) return;
  const auto seen = last_step_.find(index);
  if (seen != last_step_.end() && seen->second == state.global_step) return;
  last_step_[index] = state.global_step;

  std::unordered_map<const void*, std::string> names;
  for (const auto& item : view.module().named_parameters(/*recurse=*/true)) {
    names.emplace(item.value().unsafeGetTensorImpl(), item.key());
  }
  int64_t position = 0;  // names a parameter the module does not own by its place in the optimizer
  for (const auto& group : optimizer.param_groups()) {
    for (const auto& p : group.params()) {
      const auto it = names.find(p.unsafeGetTensorImpl());
      const std::string name = it != names.end() ? it->second : "param" + std::to_string(position);
      ++position;
      if (log_weights_) view.log_histogram("weights/" + name, p, state.global_step);
      if (log_gradients_ && p.grad().defined()) view.log_histogram("gradients/" + name, p.grad(), state.global_step);
    }
  }
}

}  // namespace volt::callbacks
