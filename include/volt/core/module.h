#pragma once
#include <map>
#include <string>

#include <torch/nn/module.h>

#include "volt/core/checkpoint.h"
#include "volt/core/optimizer_config.h"
#include "volt/core/step_context.h"
#include "volt/core/trainer_view.h"
#include "volt/core/types.h"

namespace volt {

/// A model with Lightning's hooks. Derive from it, register layers as with
/// torch::nn::Module, and implement training_step and configure_optimizers.
/// Every hook runs on every rank unless noted; hooks default to no-ops.
class Module : public torch::nn::Module {
 public:
  using torch::nn::Module::Module;
  ~Module() override = default;

  // --- steps ---
  /// One training batch. Return the loss to back-propagate (automatic optimization) or
  /// an undefined tensor to skip its backward (as Lightning's None: the optimizer step of
  /// the accumulation window still runs and counts in global_step). With manual optimization, call
  /// ctx.manual_backward / ctx.optimizer_step yourself and return anything.
  virtual at::Tensor training_step(Batch& batch, StepContext& ctx) = 0;
  /// One validation batch, under no-grad and eval mode. Log with ctx.log.
  virtual void validation_step(Batch& batch, StepContext& ctx);
  /// One test batch, under no-grad and eval mode.
  virtual void test_step(Batch& batch, StepContext& ctx);
  /// One prediction batch; the result is collected by Trainer::predict.
  virtual at::Tensor predict_step(Batch& batch, StepContext& ctx);
  /// Optimizers and LR schedulers. Called once per fit, after the module is on its device.
  virtual OptimizerConfig configure_optimizers() = 0;

  // --- set-up ---
  /// Build layers here to create them directly on the target device: the strategy sets
  /// device() first and calls this at the start of every stage, before
  /// configure_optimizers (so guard against building twice, e.g. `if (fc_) return;`).
  /// On lazy-tensor devices (TPU) make standard layers there with
  /// `volt::on_device(torch::nn::Linear(4, 2), device())` (volt/core/device_placement.h).
  virtual void configure_model() {}
  /// At the start of fit/validate/test/predict, before the module moves to its device.
  virtual void setup(Stage) {}
  /// At the end of fit/validate/test/predict.
  virtual void teardown(Stage) {}

  // --- stage hooks ---
  virtual void on_fit_start() {}
  virtual void on_fit_end() {}
  virtual void on_train_start() {}
  virtual void on_train_end() {}
  virtual void on_validation_start() {}
  virtual void on_validation_end() {}
  virtual void on_test_start() {}
  virtual void on_test_end() {}
  virtual void on_predict_start() {}
  virtual void on_predict_end() {}

  // --- epoch hooks ---
  virtual void on_train_epoch_start() {}
  /// After the last training batch of an epoch and its end-of-epoch validation (as in
  /// Lightning 2.x); may log epoch-level metrics with log().
  virtual void on_train_epoch_end() {}
  virtual void on_validation_epoch_start() {}
  virtual void on_validation_epoch_end() {}
  virtual void on_test_epoch_start() {}
  virtual void on_test_epoch_end() {}
  virtual void on_predict_epoch_start() {}
  virtual void on_predict_epoch_end() {}

  // --- batch hooks ---
  /// Return false to skip the rest of this training epoch.
  virtual bool on_train_batch_start(Batch&, int64_t /*batch_idx*/) { return true; }
  virtual void on_train_batch_end(const at::Tensor& /*loss*/, Batch&, int64_t /*batch_idx*/) {}
  virtual void on_validation_batch_start(Batch&, int64_t /*batch_idx*/) {}
  virtual void on_validation_batch_end(Batch&, int64_t /*batch_idx*/) {}
  virtual void on_test_batch_start(Batch&, int64_t /*batch_idx*/) {}
  virtual void on_test_batch_end(Batch&, int64_t /*batch_idx*/) {}

  // --- optimization hooks ---
  virtual void on_before_backward(const at::Tensor& /*loss*/) {}
  virtual void on_after_backward() {}
  /// Before optimizer i steps, after gradients are unscaled, before clipping.
  virtual void on_before_optimizer_step(torch::optim::Optimizer&, size_t /*index*/) {}
  virtual void on_before_zero_grad(torch::optim::Optimizer&) {}

  // --- checkpoints ---
  /// Add your own entries to a checkpoint about to be written.
  virtual void on_save_checkpoint(Checkpoint&) {}
  /// Read them back, before the state is restored.
  virtual void on_load_checkpoint(const Checkpoint&) {}

  // --- logging from hooks ---
  /// Logs a metric from any hook that runs during a stage (e.g. on_validation_epoch_end),
  /// exactly as ctx.log does in a step. Throws outside a running stage.
  void log(const std::string& name, const at::Tensor& value, const LogOptions& options = {});
  void log(const std::string& name, double value, const LogOptions& options = {});
  /// Set by the loops to the context log() records into; not for user code.
  void set_log_context(StepContext* ctx) { log_context_ = ctx; }
  /// Sends an image (float [C,H,W], C = 1 or 3, values in [0,1]; or uint8 [C,H,W]) to
  /// every logger that shows images (TensorBoardLogger), on rank 0, at the current
  /// global_step (Lightning: `self.logger.experiment.add_image`). Call it from any hook
  /// or step during a stage; outside a Trainer's stage it throws volt::Error.
  void log_image(const std::string& tag, const at::Tensor& image);
  /// Sends a text to every logger that shows text, as log_image does.
  void log_text(const std::string& tag, const std::string& text);
  /// Set by the Trainer for the length of a stage; not for user code.
  void set_trainer_view(TrainerView* view) { trainer_view_ = view; }

  // --- configuration ---
  bool automatic_optimization() const { return automatic_optimization_; }
  /// false: training_step drives the optimizers itself (GANs, several optimizers).
  void set_automatic_optimization(bool on) { automatic_optimization_ = on; }
  /// Records hyperparameters: written to the loggers (hparams.yaml) and checkpoints.
  void save_hyperparameters(std::map<std::string, std::string> hparams) { hparams_ = std::move(hparams); }
  const std::map<std::string, std::string>& hparams() const { return hparams_; }
  /// The device this module computes on, set by the strategy before configure_model
  /// (cpu until then).
  c10::Device device() const { return device_; }
  /// Set by the strategy; not for user code.
  void set_device(c10::Device device) { device_ = device; }

 private:
  c10::Device device_{c10::kCPU};
  bool automatic_optimization_ = true;
  StepContext* log_context_ = nullptr;
  TrainerView* trainer_view_ = nullptr;
  std::map<std::string, std::string> hparams_;
};

}  // namespace volt
