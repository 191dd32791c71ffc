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

}  // namespace volt
