#include "volt/core/module.h"

#include "volt/core/error.h"

namespace volt {

void Module::validation_step(Batch&, StepContext&) {}
void Module::test_step(Batch&, StepContext&) {}

at::Tensor Module::predict_step(Batch&, StepContext&) {
  throw NotSupportedError("Trainer::predict called on a module (" + name() +
                          ") that does not override predict_step. Override "
                          "`at::Tensor predict_step(volt::Batch& batch, volt::StepContext& ctx)` "
                          "to return the prediction for a batch.");
}

void Module::log(const std::string& name, const at::Tensor& value, const LogOptions& options) {
  if (log_context_ == nullptr) {
    throw Error("Module::log(\"" + name + "\") was called while no stage is running. Log from a step or "
                "from a hook the Trainer calls (e.g. on_validation_epoch_end).");
  }
  log_context_->log(name, value, options);
}

void Module::log(const std::string& name, double value, const LogOptions& options) {
  if (log_context_ == nullptr) {
    throw Error("Module::log(\"" + name + "\") was called while no stage is running. Log from a step or "
                "from a hook the Trainer calls (e.g. on_validation_epoch_end).");
  }
  log_context_->log(name, value, options);
}

void Module::log_image(const std::string& tag, const at::Tensor& image) {
  if (trainer_view_ == nullptr) {
    throw Error("Module::log_image(\"" + tag + "\"): the module is not attached to a Trainer (no stage is running), "
                "so there is no logger to send the image to. Call it from a step or hook the Trainer runs.");
  }
  trainer_view_->log_image(tag, image, trainer_view_->state().global_step);
}

void Module::log_text(const std::string& tag, const std::string& text) {
  if (trainer_view_ == nullptr) {
    throw Error("Module::log_text(\"" + tag + "\"): the module is not attached to a Trainer (no stage is running), "
                "so there is no logger to send the text to. Call it from a step or hook the Trainer runs.");
  }
  trainer_view_->log_text(tag, text, trainer_view_->state().global_step);
}

}  // namespace volt
