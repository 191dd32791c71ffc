#include "volt/loops/hooks.h"

#include <c10/util/Type.h>

#include <typeinfo>

#include "volt/strategies/strategy.h"

namespace volt::loops {

namespace {

constexpr const char* kHookNames[] = {
    "on_fit_start",
    "on_fit_end",
    "on_sanity_check_start",
    "on_sanity_check_end",
    "on_train_start",
    "on_train_end",
    "on_train_epoch_start",
    "on_train_epoch_end",
    "on_train_batch_start",
    "on_train_batch_end",
    "on_validation_start",
    "on_validation_end",
    "on_validation_epoch_start",
    "on_validation_epoch_end",
    "on_validation_batch_start",
    "on_validation_batch_end",
    "on_test_start",
    "on_test_end",
    "on_test_epoch_start",
    "on_test_epoch_end",
    "on_test_batch_start",
    "on_test_batch_end",
    "on_predict_start",
    "on_predict_end",
    "on_predict_epoch_start",
    "on_predict_epoch_end",
    "on_predict_batch_start",
    "on_predict_batch_end",
    "on_before_backward",
    "on_after_backward",
    "on_before_optimizer_step",
    "on_before_zero_grad",
};
static_assert(sizeof(kHookNames) / sizeof(kHookNames[0]) == static_cast<size_t>(Hook::kCount), "one name per Hook");

}  // namespace

const char* hook_name(Hook hook) {
  return kHookNames[static_cast<size_t>(hook)];
}

std::string Hooks::class_name(const std::string& demangled) {
  // "volt::strategies::SingleDeviceStrategy" -> "SingleDeviceStrategy"; template arguments kept whole.
  const size_t angle = demangled.find('<');
  const size_t cut = demangled.rfind("::", angle == std::string::npos ? std::string::npos : angle);
  return cut == std::string::npos ? demangled : demangled.substr(cut + 2);
}

std::string Hooks::action_name(Action action, const std::string& module_name, const std::string& strategy_name) {
  const std::string strategy = "[Strategy]" + strategy_name + ".";
  switch (action) {
    case Action::run_training_epoch:
      return "run_training_epoch";
    case Action::run_training_batch:
      return "run_training_batch";
    case Action::train_dataloader_next:
      return "[_TrainingEpochLoop].train_dataloader_next";
    case Action::val_next:
      return "[_EvaluationLoop].val_next";
    case Action::test_next:
      return "[_EvaluationLoop].test_next";
    case Action::predict_next:
      return "[_PredictionLoop].predict_next";
    case Action::batch_to_device:
      return strategy + "batch_to_device";
    case Action::training_step:
      return strategy + "training_step";
    case Action::validation_step:
      return strategy + "validation_step";
    case Action::test_step:
      return strategy + "test_step";
    case Action::predict_step:
      return strategy + "predict_step";
    case Action::backward:
      return strategy + "backward";
    case Action::optimizer_step:
      return strategy + "optimizer_step";
    case Action::optimizer_zero_grad:
      return "[LightningModule]" + module_name + ".optimizer_zero_grad";
    case Action::run_sanity_check:
      return "run_sanity_check";
    case Action::run_validation:
      return "run_validation";
    case Action::run_test:
      return "run_test";
    case Action::run_predict:
      return "run_predict";
    case Action::kCount:
      break;
  }
  return "unknown";
}

Hooks::Hooks(const connectors::CallbackConnector& callbacks, const Module& module, const strategies::Strategy& strategy,
             profilers::Profiler* profiler)
    : callbacks_(callbacks), profiler_(profiler) {
  if (profiler_ == nullptr) return;
  // Interned once per stage, so the per-step path only indexes.
  const std::string module_name = class_name(module.name());
  const std::string strategy_name = class_name(c10::demangle(typeid(strategy).name()));
  for (const auto& cb : callbacks.callbacks()) {
    callback_ptrs_.push_back(cb.get());
    std::array<profilers::ActionId, static_cast<size_t>(Hook::kCount)> ids{};
    const std::string prefix = "[Callback]" + cb->state_key() + ".";
    for (size_t h = 0; h < ids.size(); ++h) ids[h] = profiler_->action_id(prefix + kHookNames[h]);
    callback_ids_.push_back(ids);
  }
  for (size_t h = 0; h < module_ids_.size(); ++h) {
    module_ids_[h] = profiler_->action_id("[LightningModule]" + module_name + "." + kHookNames[h]);
  }
  for (size_t a = 0; a < action_ids_.size(); ++a) {
    action_ids_[a] = profiler_->action_id(action_name(static_cast<Action>(a), module_name, strategy_name));
  }
}

size_t Hooks::slot_of(const callbacks::Callback& cb) const {
  for (size_t i = 0; i < callback_ptrs_.size(); ++i) {
    if (callback_ptrs_[i] == &cb) return i;
  }
  return 0;  // unreachable: call_monitoring passes only the connector's callbacks
}

}  // namespace volt::loops
