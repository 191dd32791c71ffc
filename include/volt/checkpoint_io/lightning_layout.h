#pragma once
/// The parts of PyTorch Lightning 2.x's checkpoint dictionary that Volt builds from its own state: the
/// nested loop progress, the precision plug-in's key, and Volt's format 1 metadata upgraded to the layout.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace volt {
class LRScheduler;
}

namespace volt::checkpoint_io {

/// The Lightning release whose checkpoint layout Volt writes ("pytorch-lightning_version").
inline constexpr const char* kLightningLayoutVersion = "2.2.5";

/// Where a fit is: the epoch, optimizer steps so far, batches finished in this epoch and in all, and the
/// epoch's length (batches_done == num_training_batches: the epoch's last batch is done).
struct LoopProgress {
  int64_t epoch = 0;
  int64_t global_step = 0;
  int64_t batches_done = 0;
  int64_t batches_seen = 0;
  int64_t num_training_batches = 0;
};

/// Volt's own copy of the progress (meta["volt"]["loops"]), as JSON.
nlohmann::json progress_json(const LoopProgress& p);

/// Lightning's "loops" entry for a fit at `p`: fit_loop's epoch, batch, scheduler and optimizer progress
/// (with their total and current ready/started/processed/completed counters) and the evaluation loops, with
/// the values Lightning 2.2.5 writes when it saves at the same point (after a batch: that batch is processed
/// but not completed; after the epoch's last batch: the epoch is processed but not completed).
nlohmann::json lightning_loops(const LoopProgress& p, int64_t scheduler_steps);

/// The progress a Lightning checkpoint's entries describe: epoch and global_step from the top, the batch
/// position from loops.fit_loop's batch progress. A counter it lacks is -1, so that the checks of a resume
/// name it.
LoopProgress progress_from_lightning(const nlohmann::json& meta);

/// Lightning's key for the precision plug-in's state: "MixedPrecision" for 16-mixed and bf16-mixed,
/// "DoublePrecision", "HalfPrecision", "Precision" for the others.
std::string lightning_precision_key(const std::string& precision);

/// The `lr_schedulers` entry of `scheduler`: what PyTorch's scheduler of the same name returns from
/// state_dict() (its settings under PyTorch's names, then base_lrs, last_epoch, verbose, _step_count,
/// _get_lr_called_within_step, _last_lr), so that torch.optim.lr_scheduler's class loads it.
nlohmann::json pytorch_scheduler_state(const LRScheduler& scheduler);

/// Volt's format 1 metadata (its top-level epoch, loops, lr_schedulers, precision, callbacks, versions) in
/// the layout of format 2: Lightning's keys, and Volt's own under "volt". Keys it does not know (a module's
/// or callback's own) are kept at the top.
nlohmann::json upgrade_v1_meta(const nlohmann::json& v1);

}  // namespace volt::checkpoint_io
