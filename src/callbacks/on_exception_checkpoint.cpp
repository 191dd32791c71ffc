#include "volt/callbacks/on_exception_checkpoint.h"

#include <iostream>

#include "volt/core/error.h"

namespace volt::callbacks {

OnExceptionCheckpoint::OnExceptionCheckpoint(std::string dirpath, std::string filename)
    : dirpath_(std::move(dirpath)), filename_(std::move(filename)) {
  if (dirpath_.empty()) {
    throw ConfigError(
        "OnExceptionCheckpoint got an empty dirpath. Give the folder for the checkpoint, e.g. \".\" or "
        "\"checkpoints\".");
  }
  if (filename_.empty()) {
    throw ConfigError(
        "OnExceptionCheckpoint: the filename cannot be empty. Give a name without extension, e.g. "
        "\"on_exception\" (the default).");
  }
  if (filename_.find('/') != std::string::npos) {
    throw ConfigError("OnExceptionCheckpoint(filename='" + filename_ +
                      "') holds a '/'. Give the folder as dirpath and a plain name as filename.");
  }
}

std::string OnExceptionCheckpoint::ckpt_path() const {
  return dirpath_ + (dirpath_.back() == '/' ? "" : "/") + filename_ + ".ckpt";
}

std::string OnExceptionCheckpoint::state_key() const {
  return "OnExceptionCheckpoint{" + ckpt_path() + "}";
}

void OnExceptionCheckpoint::on_exception(TrainerView& view, const std::exception& error) {
  const auto& state = view.state();
  if (state.fn != TrainerFn::kFitting || view.optimizers().empty()) return;
  const std::string path = ckpt_path();
  try {
    view.save_checkpoint_without_collective(path);
  } catch (const std::exception& e) {
    if (state.is_global_zero) {
      std::cerr << "[volt] warning: OnExceptionCheckpoint could not write " << path << " after the error (" << e.what()
                << ")\n";
    }
    return;
  }
  if (state.is_global_zero && !state.fast_dev_run) {
    std::cerr << "volt: fit failed at step " << state.global_step << " (epoch " << state.current_epoch << "); saved "
              << path << ". Resume with fit(..., ckpt_path=\"" << path << "\") once fixed. The error: " << error.what()
              << "\n";
  }
}

void OnExceptionCheckpoint::teardown(TrainerView& view, Stage stage) {
  if (stage == Stage::kFit) view.remove_checkpoint(ckpt_path());
}

}  // namespace volt::callbacks
