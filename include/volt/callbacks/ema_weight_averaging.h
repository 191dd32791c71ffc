#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "volt/callbacks/callback.h"

namespace volt::callbacks {

/// An exponential moving average of the weights (Lightning's EMAWeightAveraging, with
/// PyTorch 2.x's torch.optim.swa_utils.AveragedModel and get_ema_multi_avg_fn semantics).
///
/// Updates: after an optimizer step (on_train_batch_end; a batch that only accumulates
/// gradients changes nothing), when step index s = global_step - 1 is a multiple of
/// update_every_n_steps and at least update_starting_at_step: the first update copies the
/// weights, every later one sets average = lerp(average, current, 1 - decay) for
/// floating-point tensors (integer buffers: average * decay + current * (1 - decay)). With
/// use_buffers the buffers (batch-norm statistics) are averaged too; without, the average's
/// buffers are the module's.
///
/// Where the average is used: swapped into the module for every validation during fit
/// (on_validation_epoch_start, swapped back at on_validation_epoch_end), copied into the
/// module when training ends (on_train_end), and written as the checkpoint's weights
/// ("state_dict.*"), the module's own weights beside them as "ema.current.<name>". Resuming
/// from such a checkpoint restores both (a fit resumed mid-epoch ends with bitwise the weights
/// of the uninterrupted run); loading it for validate/test/predict gives the average. A
/// checkpoint without "ema.current.*" (written without this callback) starts the average from
/// its weights, with a warning. Weights-only checkpoints hold the module's own weights (no
/// callback adds to them, as in Lightning).
///
/// Ranks: under DDP every rank's parameters are the same, so are their averages; buffers
/// follow each rank's own.
class EMAWeightAveraging : public Callback {
 public:
  struct Options {
    /// Weight of the old average per update; in (0, 1).
    double decay = 0.999;
    /// Update after every n-th optimizer step (at least 1).
    int64_t update_every_n_steps = 1;
    /// First step index (global_step - 1) that updates; unset: from the first step.
    std::optional<int64_t> update_starting_at_step;
    /// Average the buffers as well as the parameters.
    bool use_buffers = true;
  };

  /// Throws ConfigError (what, given, fix): decay not in (0, 1), update_every_n_steps
  /// below 1, update_starting_at_step below 0.
  explicit EMAWeightAveraging(Options options);
  /// The default Options.
  EMAWeightAveraging();

  /// "EMAWeightAveraging".
  std::string state_key() const override { return "EMAWeightAveraging"; }
  /// n_averaged and latest_update_step.
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& state) override;

  /// A new fit starts a new average (a checkpoint it resumes from brings its own).
  void setup(TrainerView& view, Stage stage) override;
  /// The average starts as a copy of the module (n_averaged 0) unless a checkpoint gave one.
  void on_fit_start(TrainerView& view) override;
  void on_train_batch_end(TrainerView& view, const at::Tensor& loss, const Batch& batch, int64_t batch_idx) override;
  void on_validation_epoch_start(TrainerView& view) override;
  void on_validation_epoch_end(TrainerView& view) override;
  void on_train_end(TrainerView& view) override;
  void on_save_checkpoint(TrainerView& view, Checkpoint& checkpoint) override;
  /// Restores the average and the module's own weights; throws CheckpointError when
  /// "ema.current.*" does not fit the module.
  void on_load_checkpoint(TrainerView& view, const Checkpoint& checkpoint) override;

  const Options& options() const { return options_; }
  /// Updates so far (the first one copied).
  int64_t n_averaged() const { return n_averaged_; }
  /// The averaged parameters, then buffers, in the module's order (empty outside fit).
  const std::vector<at::Tensor>& average() const { return average_; }
  /// Whether the update after step index `step_idx` (global_step - 1) averages.
  bool should_update(int64_t step_idx) const;

 private:
  void update(const TrainerView& view);
  void swap(const TrainerView& view);
  void copy_from_module(const TrainerView& view);

  Options options_;
  int64_t n_averaged_ = 0;
  int64_t latest_update_step_ = 0;
  /// Parameters then buffers, as detail::named_tensors(module, true) lists them.
  std::vector<at::Tensor> average_;
  bool swapped_ = false;
};

}  // namespace volt::callbacks
