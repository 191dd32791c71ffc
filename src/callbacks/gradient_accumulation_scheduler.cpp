#include "volt/callbacks/gradient_accumulation_scheduler.h"

#include "volt/core/error.h"
#include "volt/core/module.h"

namespace volt::callbacks {
namespace {

std::string keys_of(const std::map<int64_t, int64_t>& m) {
  std::string s = "[";
  for (const auto& [k, v] : m) s += (s.size() > 1 ? ", " : "") + std::to_string(k);
  return s + "]";
}

std::string values_of(const std::map<int64_t, int64_t>& m) {
  std::string s = "[";
  for (const auto& [k, v] : m) s += (s.size() > 1 ? ", " : "") + std::to_string(v);
  return s + "]";
}

}  // namespace

GradientAccumulationScheduler::GradientAccumulationScheduler(std::map<int64_t, int64_t> scheduling)
    : scheduling_(std::move(scheduling)) {
  if (scheduling_.empty()) {
    throw ConfigError(
        "GradientAccumulationScheduler got an empty schedule. Give {epoch: factor} pairs, e.g. "
        "{{0, 1}, {4, 2}} to accumulate 2 batches from epoch 4 on.");
  }
  if (scheduling_.begin()->first < 0) {
    throw ConfigError("GradientAccumulationScheduler: epochs must be 0 or more (0-based). Got " + keys_of(scheduling_) +
                      ".");
  }
  for (const auto& [epoch, factor] : scheduling_) {
    if (factor < 1) {
      throw ConfigError("GradientAccumulationScheduler: accumulation factors must be 1 or more. Got " +
                        values_of(scheduling_) + " (epoch " + std::to_string(epoch) + " has " + std::to_string(factor) +
                        ").");
    }
  }
  scheduling_.emplace(0, 1);  // no-op when epoch 0 is scheduled
}

int64_t GradientAccumulationScheduler::get_accumulate_grad_batches(int64_t epoch) const {
  auto it = scheduling_.upper_bound(epoch);
  if (it == scheduling_.begin()) return 1;
  return std::prev(it)->second;
}

bool GradientAccumulationScheduler::going_to_accumulate_grad_batches() const {
  for (const auto& [epoch, factor] : scheduling_) {
    if (factor > 1) return true;
  }
  return false;
}

std::string GradientAccumulationScheduler::state_key() const {
  std::string s = "GradientAccumulationScheduler{";
  bool first = true;
  for (const auto& [epoch, factor] : scheduling_) {
    s += (first ? "" : ", ") + std::to_string(epoch) + ": " + std::to_string(factor);
    first = false;
  }
  return s + "}";
}

void GradientAccumulationScheduler::setup(TrainerView& view, Stage stage) {
  if (stage != Stage::kFit) return;
  if (!view.module().automatic_optimization()) {
    throw ConfigError("GradientAccumulationScheduler needs automatic optimization, and " + view.module().name() +
                      " steps its optimizers itself (manual optimization). Remove the callback, or accumulate in "
                      "training_step by stepping every N batches.");
  }
}

void GradientAccumulationScheduler::on_train_epoch_start(TrainerView& view) {
  view.set_accumulate_grad_batches(get_accumulate_grad_batches(view.state().current_epoch));
}

}  // namespace volt::callbacks
