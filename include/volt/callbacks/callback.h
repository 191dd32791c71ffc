#pragma once
#include <cstdint>
#include <exception>
#include <string>

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include "volt/core/checkpoint.h"
#include "volt/core/trainer_view.h"
#include "volt/core/types.h"

namespace torch::optim {
class Optimizer;
}

namespace volt::callbacks {

/// A plug-in that observes a run at Lightning's hook points. Every hook defaults to a
/// no-op and receives a TrainerView (never the Trainer). Hooks run on every rank;
/// callbacks that write files do so on rank 0 (state().is_global_zero).
class Callback {
 public:
  virtual ~Callback() = default;

  /// Key under which state_dict() is stored in checkpoints; unique per instance kind
  /// and settings (e.g. "ModelCheckpoint{monitor=val_loss,mode=min}").
  virtual std::string state_key() const = 0;
  virtual nlohmann::json state_dict() const { return nlohmann::json::object(); }
  virtual void load_state_dict(const nlohmann::json&) {}

  virtual void setup(TrainerView&, Stage) {}
  virtual void teardown(TrainerView&, Stage) {}
  virtual void on_fit_start(TrainerView&) {}
  virtual void on_fit_end(TrainerView&) {}
  virtual void on_sanity_check_start(TrainerView&) {}
  virtual void on_sanity_check_end(TrainerView&) {}

  virtual void on_train_start(TrainerView&) {}
  virtual void on_train_end(TrainerView&) {}
  virtual void on_train_epoch_start(TrainerView&) {}
  /// After the epoch's last batch and its end-of-epoch validation (Lightning's order).
  virtual void on_train_epoch_end(TrainerView&) {}
  virtual void on_train_batch_start(TrainerView&, const Batch&, int64_t /*batch_idx*/) {}
  /// After the optimizer step (if any) of this batch; `loss` may be undefined.
  virtual void on_train_batch_end(TrainerView&, const at::Tensor& /*loss*/, const Batch&,
                                  int64_t /*batch_idx*/) {}

  virtual void on_validation_start(TrainerView&) {}
  virtual void on_validation_end(TrainerView&) {}
  virtual void on_validation_epoch_start(TrainerView&) {}
  /// Epoch aggregates of validation metrics are in callback_metrics() here.
  virtual void on_validation_epoch_end(TrainerView&) {}
  virtual void on_validation_batch_start(TrainerView&, const Batch&, int64_t) {}
  virtual void on_validation_batch_end(TrainerView&, const Batch&, int64_t) {}

  virtual void on_test_start(TrainerView&) {}
  virtual void on_test_end(TrainerView&) {}
  virtual void on_test_epoch_start(TrainerView&) {}
  virtual void on_test_epoch_end(TrainerView&) {}
  virtual void on_test_batch_start(TrainerView&, const Batch&, int64_t) {}
  virtual void on_test_batch_end(TrainerView&, const Batch&, int64_t) {}

  virtual void on_predict_start(TrainerView&) {}
  virtual void on_predict_end(TrainerView&) {}
  virtual void on_predict_batch_start(TrainerView&, const Batch&, int64_t) {}
  virtual void on_predict_batch_end(TrainerView&, const Batch&, int64_t) {}

  virtual void on_before_backward(TrainerView&, const at::Tensor& /*loss*/) {}
  virtual void on_after_backward(TrainerView&) {}
  virtual void on_before_optimizer_step(TrainerView&, torch::optim::Optimizer&, size_t /*index*/) {}
  virtual void on_before_zero_grad(TrainerView&, torch::optim::Optimizer&) {}

  virtual void on_save_checkpoint(TrainerView&, Checkpoint&) {}
  virtual void on_load_checkpoint(TrainerView&, const Checkpoint&) {}
  /// A stage is ending with an exception (after which it is re-thrown).
  virtual void on_exception(TrainerView&, const std::exception&) {}
};

}  // namespace volt::callbacks
