#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "volt/callbacks/callback.h"

namespace volt::callbacks {

/// Lightning's GradientAccumulationScheduler: the number of batches accumulated per
/// optimizer step, by epoch. `{{0, 1}, {4, 2}}` steps after every batch in epochs 0-3 and
/// after every second batch from epoch 4 on (epochs are 0-based; an epoch below the first
/// key uses 1, as Lightning adds {0: 1}). The last batches of an epoch still step when
/// fewer remain, as with the accumulate_grad_batches flag.
///
/// When: at every on_train_epoch_start it sets the epoch's factor through
/// TrainerView::set_accumulate_grad_batches; the training loop reads it once per epoch, so
/// the per-batch path is that of a fixed accumulate_grad_batches. Under DDP every rank sets
/// the same factor, and the micro-batches inside a window skip gradient synchronisation
/// (no_sync), as the flag does.
///
/// Refused: an empty schedule, an epoch below 0, a factor below 1 (at construction); the
/// accumulate_grad_batches flag other than 1 alongside it (when the Trainer is built); manual
/// optimization (when fit sets up, before any batch).
class GradientAccumulationScheduler : public Callback {
 public:
  /// Throws ConfigError naming the offending epochs or factors.
  explicit GradientAccumulationScheduler(std::map<int64_t, int64_t> scheduling);

  /// The factor of `epoch` (the one of the largest scheduled epoch <= `epoch`).
  int64_t get_accumulate_grad_batches(int64_t epoch) const;
  /// Whether any factor is above 1.
  bool going_to_accumulate_grad_batches() const;
  /// The schedule, with {0: 1} added when it started later.
  const std::map<int64_t, int64_t>& scheduling() const { return scheduling_; }

  /// "GradientAccumulationScheduler{0: 1, 4: 2}".
  std::string state_key() const override;
  /// Refuses manual optimization (ConfigError) when fit sets up.
  void setup(TrainerView& view, Stage stage) override;
  void on_train_epoch_start(TrainerView& view) override;

 private:
  std::map<int64_t, int64_t> scheduling_;
};

}  // namespace volt::callbacks
