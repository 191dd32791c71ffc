#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "volt/callbacks/callback.h"

namespace volt::callbacks {

/// Logs the distribution of every parameter and of its gradient as histograms
/// ("weights/<name>", "gradients/<name>", names as named_parameters() gives them) to every
/// logger that shows histograms (TensorBoardLogger; the CSV logger drops them), every
/// `every_n_steps` optimizer steps.
///
/// When: at on_before_optimizer_step of the steps whose global_step (optimizer steps taken
/// so far) is a multiple of every_n_steps, so the first histograms are those of step 0;
/// gradients are then unscaled and not yet clipped, weights not yet updated. The histograms
/// carry that global_step. With several optimizers (manual optimization), each logs the
/// parameters it steps. Runs on rank 0 only (other ranks return at once).
class HistogramMonitor : public Callback {
 public:
  /// `every_n_steps` at least 1. At least one of `log_weights`, `log_gradients`.
  explicit HistogramMonitor(int64_t every_n_steps = 100, bool log_weights = true, bool log_gradients = true);

  /// "HistogramMonitor{every_n_steps=N}".
  std::string state_key() const override;
  /// Throws volt::ConfigError when fitting without loggers (nothing would record them).
  void setup(TrainerView& view, Stage stage) override;
  void on_before_optimizer_step(TrainerView& view, torch::optim::Optimizer& optimizer, size_t index) override;

  int64_t every_n_steps() const { return every_n_steps_; }

 private:
  int64_t every_n_steps_;
  bool log_weights_;
  bool log_gradients_;
  std::map<size_t, int64_t> last_step_;  // optimizer index -> global_step last logged
};

}  // namespace volt::callbacks
