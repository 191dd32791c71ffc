#pragma once
#include <string>

#include "volt/callbacks/callback.h"

namespace volt::callbacks {

/// Lightning's OnExceptionCheckpoint: when fit raises, a checkpoint of the run as it stood
/// (weights, optimizer, loops, callbacks) is written to `dirpath/filename.ckpt`, from which
/// fit(..., ckpt_path=...) resumes. A fit that ends without an error writes none and removes
/// one an earlier failed run left there (at teardown, as Lightning does).
///
/// Ranks: rank 0 writes, without waiting for the other ranks (the failing run's other ranks
/// may be stuck in a collective or gone): what rank 0 holds after its last finished step.
/// When only another rank raised, rank 0 writes once the failure reaches it. Nothing is
/// written before the optimizers exist (a failure while setting up), under fast_dev_run,
/// nor when validate, test or predict fail.
class OnExceptionCheckpoint : public Callback {
 public:
  /// Throws ConfigError for an empty dirpath, or a filename that is empty or holds a '/'
  /// (Lightning adds ".ckpt" to it).
  explicit OnExceptionCheckpoint(std::string dirpath, std::string filename = "on_exception");

  /// dirpath/filename.ckpt.
  std::string ckpt_path() const;

  /// "OnExceptionCheckpoint{<ckpt_path>}".
  std::string state_key() const override;
  void on_exception(TrainerView& view, const std::exception& error) override;
  void teardown(TrainerView& view, Stage stage) override;

 private:
  std::string dirpath_;
  std::string filename_;
};

}  // namespace volt::callbacks
