#include "volt/strategies/single_xla_strategy.h"

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include "strategies/detail/xla_device.h"
#include "volt/core/device_placement.h"
#include "volt/core/error.h"

namespace volt::strategies {

SingleXLAStrategy::SingleXLAStrategy(c10::Device device, std::shared_ptr<accelerators::TPUAccelerator> accelerator,
                                     std::shared_ptr<precision::Precision> precision,
                                     std::shared_ptr<environments::ClusterEnvironment> environment,
                                     std::shared_ptr<checkpoint_io::CheckpointIO> checkpoint_io)
    : Strategy(accelerator, std::move(precision), std::move(environment), std::move(checkpoint_io)),
      device_(device),
      runtime_(detail::xla_runtime("single_xla", accelerator, device_)) {}

void SingleXLAStrategy::mark_step() const {
  runtime_->mark_step(device_);
}

void SingleXLAStrategy::setup(Module& module) {
  detail::setup_module_on_xla(module, device_, *precision_);
}

bool SingleXLAStrategy::optimizer_step(torch::optim::Optimizer& optimizer, const std::function<void()>& before_step) {
  const bool stepped = Strategy::optimizer_step(optimizer, before_step);
  mark_step();
  return stepped;
}

double SingleXLAStrategy::scalar_to_host(const at::Tensor& value) {
  if (value.device() == device_) mark_step();
  return value.item<double>();
}

at::Tensor SingleXLAStrategy::predict_step(Module& module, Batch& batch, StepContext& ctx) {
  at::Tensor out = Strategy::predict_step(module, batch, ctx);
  if (!out.defined() || out.device() != device_) return out;
  mark_step();
  return out.to(c10::kCPU);
}

void SingleXLAStrategy::save_checkpoint(const Checkpoint& checkpoint, const std::string& path) {
  mark_step();
  Strategy::save_checkpoint(detail::checkpoint_on_host(checkpoint), path);
}

std::string SingleXLAStrategy::save_optimizer_state(torch::optim::Optimizer& optimizer) {
  mark_step();
  return detail::optimizer_state_via_host(optimizer, device_,
                                          [&] { return Strategy::save_optimizer_state(optimizer); });
}

void SingleXLAStrategy::load_optimizer_state(torch::optim::Optimizer& optimizer, const std::string& bytes) {
  Strategy::load_optimizer_state(optimizer, bytes);
  move_optimizer_state(optimizer, device_);
}

}  // namespace volt::strategies
