#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "volt/callbacks/callback.h"
#include "volt/core/lr_scheduler.h"

namespace volt::callbacks {

/// SWA's learning-rate schedule (torch.optim.swa_utils.SWALR): from the rates the optimizer
/// has when it is built, each group's rate is annealed to its SWA rate over
/// `annealing_epochs` steps ("cos": (1 - cos(pi t)) / 2, "linear": t), then held there;
/// with annealing_epochs 0 the SWA rate holds from the start. The rates after k steps are
/// PyTorch's recurrence run k times from the starting rates, so they equal PyTorch's bit for
/// bit and a resumed run (the same starting rates, set_last_epoch(k)) sets the same ones.
class SWALR : public LRScheduler {
 public:
  /// `swa_lrs`: one rate for every parameter group, or one per group; each above 0.
  /// Throws ConfigError on a wrong count, a rate that is not above 0, annealing_epochs
  /// below 0 or a strategy other than "cos" or "linear".
  SWALR(torch::optim::Optimizer& optimizer, std::vector<double> swa_lrs, int64_t annealing_epochs = 10,
        const std::string& annealing_strategy = "cos");

  /// The SWA rate of each parameter group.
  const std::vector<double>& swa_lrs() const { return swa_lrs_; }

  /// The rate after `steps` steps of a group that started at `start_lr`, annealed to `swa_lr`.
  double rate(double start_lr, double swa_lr, int64_t steps) const;

 protected:
  /// LRScheduler sets the groups' rates in group order, one lr_at call each: the calls are
  /// counted to give each group its own SWA rate.
  double lr_at(double base_lr, int64_t epoch) const override;

 private:
  double anneal(double t) const;

  std::vector<double> swa_lrs_;
  int64_t annealing_epochs_;
  bool cosine_;
  mutable size_t next_group_ = 0;
};

/// Stochastic Weight Averaging, as Lightning 2.2.5's StochasticWeightAveraging does it.
///
/// From epoch swa_start (0-based: swa_epoch_start - 1 for a whole number, int(max_epochs *
/// fraction) - 1, at least 0, for a fraction) to the last epoch, at the start of each of those
/// epochs (on_train_epoch_start) the module's parameters are folded into a running average
/// with avg_fn (the mean by default; the first fold copies), so the average holds the weights
/// the epochs swa_start - 1 .. max_epochs - 2 ended with (Lightning's rule). At the start of
/// epoch swa_start the optimizer's schedule becomes a SWALR (replacing the module's scheduler,
/// if any, through TrainerView::set_lr_schedulers; it steps once per epoch). When training ends
/// after the last epoch (on_train_end; not after an early stop), the averaged parameters are
/// copied into the module and, if it has batch-norm layers, their statistics are estimated
/// again with one pass over the training data (TrainerView::forward_training_data) with
/// momentum unset (a cumulative average), as torch.optim.swa_utils.update_bn does. Under DDP
/// every rank averages the same parameters; the batch-norm statistics each rank estimated on
/// its part of the data are averaged across ranks (TrainerView::all_reduce_mean).
///
/// Differences from Lightning: Lightning runs the batch-norm pass as one more training epoch
/// (so current_epoch ends at max_epochs + 1, and that epoch logs, validates and checkpoints);
/// Volt runs it inside on_train_end and changes no counter. The average lives on the module's
/// device (Lightning's default is the CPU).
///
/// Checkpoints: state_dict() holds n_averaged, latest_update_epoch and the SWALR's starting
/// rates and step count; on_save_checkpoint adds the averaged parameters as tensors
/// "swa.average.<parameter name>". A fit resumed from any checkpoint of the run (mid-epoch
/// included) ends with bitwise the weights of the uninterrupted run.
///
/// Needs one optimizer, automatic optimization, at most one LR scheduler and a bounded
/// max_epochs; checked at on_fit_start, before any batch runs (ConfigError).
class StochasticWeightAveraging : public Callback {
 public:
  /// The new average from the current one, the module's parameter and how many weights
  /// the average holds (at least 1 when called).
  using AvgFn = std::function<at::Tensor(const at::Tensor& averaged, const at::Tensor& current, int64_t n_averaged)>;

  /// Lightning's arguments, with its defaults (swa_lrs has none).
  struct Options {
    /// The SWA learning rate: one for every parameter group of the optimizer, or one per group.
    std::vector<double> swa_lrs;
    /// A whole number: the 1-based epoch averaging starts at (at least 1). A fraction in
    /// [0, 1]: that share of max_epochs.
    std::variant<int64_t, double> swa_epoch_start = 0.8;
    /// Epochs of the annealing from the current rate to swa_lrs (0: at once).
    int64_t annealing_epochs = 10;
    /// "cos" or "linear".
    std::string annealing_strategy = "cos";
    /// Empty: the running mean, averaged + (current - averaged) / (n_averaged + 1).
    AvgFn avg_fn;
  };

  /// Throws ConfigError (what, given, fix) when `options` are invalid: no swa_lrs, a rate
  /// not above 0 or not finite, swa_epoch_start below 1 (whole) or outside [0, 1]
  /// (fraction), annealing_epochs below 0, an unknown annealing_strategy.
  explicit StochasticWeightAveraging(Options options);

  /// "StochasticWeightAveraging".
  std::string state_key() const override { return "StochasticWeightAveraging"; }
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& state) override;

  /// A new fit starts with no average (a checkpoint it resumes from brings its own).
  void setup(TrainerView& view, Stage stage) override;
  /// Checks the run (see the class comment) and resolves swa_start and swa_end.
  void on_fit_start(TrainerView& view) override;
  /// Installs the SWALR at swa_start; folds the weights into the average in [swa_start, swa_end].
  void on_train_epoch_start(TrainerView& view) override;
  /// After the last epoch: the average into the module, batch-norm statistics estimated again.
  void on_train_end(TrainerView& view) override;
  void on_save_checkpoint(TrainerView& view, Checkpoint& checkpoint) override;
  /// Reads the averaged parameters back; throws CheckpointError when the checkpoint's state
  /// says it holds an average but the tensors are missing or do not fit the module.
  void on_load_checkpoint(TrainerView& view, const Checkpoint& checkpoint) override;

  const Options& options() const { return options_; }
  /// Weights folded into the average so far.
  int64_t n_averaged() const { return n_averaged_; }
  /// The averaged parameters, in the module's parameter order (empty before the first fold).
  const std::vector<at::Tensor>& average() const { return average_; }
  /// 0-based first and last averaged epoch (valid from on_fit_start on).
  int64_t swa_start() const { return swa_start_; }
  int64_t swa_end() const { return swa_end_; }
  /// The running mean, PyTorch's default avg_fn.
  static at::Tensor mean(const at::Tensor& averaged, const at::Tensor& current, int64_t n_averaged);

 private:
  void install_scheduler(TrainerView& view);
  void fold(const TrainerView& view);
  void transfer(const TrainerView& view) const;
  void update_batch_norm(TrainerView& view) const;

  Options options_;
  int64_t swa_start_ = 0;
  int64_t swa_end_ = -1;
  bool initialized_ = false;
  int64_t n_averaged_ = 0;
  int64_t latest_update_epoch_ = -1;
  std::vector<at::Tensor> average_;
  std::shared_ptr<SWALR> scheduler_;
  /// The optimizer's rates when the SWALR was built, and its step count: from a checkpoint
  /// until the SWALR is built again.
  std::vector<double> scheduler_start_lrs_;
  std::optional<int64_t> restored_scheduler_steps_;
  bool warned_scheduler_ = false;
};

}  // namespace volt::callbacks
