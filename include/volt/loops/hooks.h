#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "volt/connectors/callback_connector.h"
#include "volt/core/module.h"
#include "volt/profilers/profiler.h"

namespace volt::strategies {
class Strategy;
}

namespace volt::loops {

/// The callback and module hooks, by Lightning's names (the profiler's action names end in them).
enum class Hook : uint8_t {
  on_fit_start,
  on_fit_end,
  on_sanity_check_start,
  on_sanity_check_end,
  on_train_start,
  on_train_end,
  on_train_epoch_start,
  on_train_epoch_end,
  on_train_batch_start,
  on_train_batch_end,
  on_validation_start,
  on_validation_end,
  on_validation_epoch_start,
  on_validation_epoch_end,
  on_validation_batch_start,
  on_validation_batch_end,
  on_test_start,
  on_test_end,
  on_test_epoch_start,
  on_test_epoch_end,
  on_test_batch_start,
  on_test_batch_end,
  on_predict_start,
  on_predict_end,
  on_predict_epoch_start,
  on_predict_epoch_end,
  on_predict_batch_start,
  on_predict_batch_end,
  on_before_backward,
  on_after_backward,
  on_before_optimizer_step,
  on_before_zero_grad,
  kCount
};
/// "on_train_epoch_end", ...
const char* hook_name(Hook hook);

/// What the loops do between hooks, each a profiler action (names in action_name()).
enum class Action : uint8_t {
  run_training_epoch,     ///< "run_training_epoch"
  run_training_batch,     ///< "run_training_batch": training_step, backward, optimizer step of one batch
  train_dataloader_next,  ///< "[_TrainingEpochLoop].train_dataloader_next"
  val_next,               ///< "[_EvaluationLoop].val_next" (validation and sanity check)
  test_next,              ///< "[_EvaluationLoop].test_next"
  predict_next,           ///< "[_PredictionLoop].predict_next"
  batch_to_device,        ///< "[Strategy]<Strategy>.batch_to_device"
  training_step,          ///< "[Strategy]<Strategy>.training_step"
  validation_step,        ///< "[Strategy]<Strategy>.validation_step"
  test_step,              ///< "[Strategy]<Strategy>.test_step"
  predict_step,           ///< "[Strategy]<Strategy>.predict_step"
  backward,               ///< "[Strategy]<Strategy>.backward"
  optimizer_step,         ///< "[Strategy]<Strategy>.optimizer_step" (with the hooks before it, and clipping)
  optimizer_zero_grad,    ///< "[LightningModule]<Module>.optimizer_zero_grad"
  run_sanity_check,       ///< "run_sanity_check": the sanity-check validation
  run_validation,         ///< "run_validation": one validation pass (in fit or validate)
  run_test,               ///< "run_test"
  run_predict,            ///< "run_predict"
  kCount
};

/// The one place hooks are dispatched (Lightning's call._call_callback_hooks and
/// _call_lightning_module_hook): callbacks in the CallbackConnector's order, the module's
/// hooks, and the loops' own actions. With a profiler, every call is timed under its
/// action name (`[Callback]<state_key>.<hook>`, `[LightningModule]<Module>.<hook>`, the
/// Action names); without one, each call costs one null check more than calling directly.
class Hooks {
 public:
  /// `profiler` may be nullptr (profiling off); it must outlive the Hooks.
  Hooks(const connectors::CallbackConnector& callbacks, const Module& module, const strategies::Strategy& strategy,
        profilers::Profiler* profiler);

  profilers::Profiler* profiler() const { return profiler_; }

  /// f(callback) for every callback, in order.
  template <typename F>
  void callbacks(Hook hook, F&& f) const {
    if (profiler_ == nullptr) return callbacks_.call(f);
    for (size_t i = 0; i < callback_ptrs_.size(); ++i) {
      profilers::Profiler::Guard g(profiler_, callback_ids_[i][index(hook)]);
      f(*callback_ptrs_[i]);
    }
  }
  /// f(callback) for the monitoring callbacks (ModelCheckpoint, EarlyStopping) when
  /// `monitoring`, else for the others (CallbackConnector::call_monitoring).
  template <typename F>
  void monitoring_callbacks(bool monitoring, Hook hook, F&& f) const {
    if (profiler_ == nullptr) return callbacks_.call_monitoring(monitoring, f);
    callbacks_.call_monitoring(monitoring, [&](callbacks::Callback& cb) {
      profilers::Profiler::Guard g(profiler_, callback_ids_[slot_of(cb)][index(hook)]);
      f(cb);
    });
  }
  /// f() as the module's `hook`; returns what f returns.
  template <typename F>
  decltype(auto) module(Hook hook, F&& f) const {
    if (profiler_ == nullptr) return f();
    profilers::Profiler::Guard g(profiler_, module_ids_[index(hook)]);
    return f();
  }
  /// f() as `action`; returns what f returns.
  template <typename F>
  decltype(auto) action(Action action, F&& f) const {
    if (profiler_ == nullptr) return f();
    profilers::Profiler::Guard g(profiler_, action_ids_[static_cast<size_t>(action)]);
    return f();
  }
  /// RAII: times `action` while the guard lives (a no-op guard without a profiler).
  [[nodiscard]] profilers::Profiler::Guard scoped(Action action) const {
    return profilers::Profiler::Guard(profiler_, profiler_ ? action_ids_[static_cast<size_t>(action)] : 0);
  }
  /// A step of the stage ended (the profiler's schedule counts it).
  void step() const {
    if (profiler_ != nullptr) profiler_->step();
  }

  /// The profiler action name of an Action for this module and strategy.
  static std::string action_name(Action action, const std::string& module_name, const std::string& strategy_name);
  /// Python's __class__.__name__ of a C++ object: its demangled type without namespaces.
  static std::string class_name(const std::string& demangled);

 private:
  static constexpr size_t index(Hook h) { return static_cast<size_t>(h); }
  size_t slot_of(const callbacks::Callback& cb) const;

  const connectors::CallbackConnector& callbacks_;
  profilers::Profiler* profiler_;
  std::vector<callbacks::Callback*> callback_ptrs_;
  std::vector<std::array<profilers::ActionId, static_cast<size_t>(Hook::kCount)>> callback_ids_;
  std::array<profilers::ActionId, static_cast<size_t>(Hook::kCount)> module_ids_{};
  std::array<profilers::ActionId, static_cast<size_t>(Action::kCount)> action_ids_{};
};

}  // namespace volt::loops
