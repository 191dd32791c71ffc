#pragma once
#include <memory>

#include "volt/accelerators/tpu_accelerator.h"
#include "volt/strategies/strategy.h"

namespace volt::strategies {

/// One process on one TPU device through a lazy-tensor runtime (Lightning's
/// SingleDeviceXLAStrategy). Operations are recorded into a graph; mark_step() compiles
/// (once per graph shape) and runs it. It is called after every optimizer step and before
/// any value is read on the host (logging, checkpoints, predictions), so each training
/// step is one bounded graph. The module's tensors are re-created on the device
/// (volt::place_on_device): torch::nn::Module::to cannot move them there.
class SingleXLAStrategy : public Strategy {
 public:
  /// `accelerator` must carry a TPU runtime (TPUAccelerator::runtime()).
  SingleXLAStrategy(c10::Device device, std::shared_ptr<accelerators::TPUAccelerator> accelerator,
                    std::shared_ptr<precision::Precision> precision,
                    std::shared_ptr<environments::ClusterEnvironment> environment,
                    std::shared_ptr<checkpoint_io::CheckpointIO> checkpoint_io);
  std::string name() const override { return "single_xla"; }
  c10::Device root_device() const override { return device_; }

  /// configure_model under device(), the precision's dtype, then every tensor onto the device.
  void setup(Module& module) override;
  /// The precision's step, then mark_step().
  bool optimizer_step(torch::optim::Optimizer& optimizer, const std::function<void()>& before_step = {}) override;
  /// mark_step(), then the read.
  double scalar_to_host(const at::Tensor& value) override;
  /// The module's prediction, computed (mark_step) and copied to the CPU.
  at::Tensor predict_step(Module& module, Batch& batch, StepContext& ctx) override;
  /// mark_step(), then the tensors copied to the CPU and written (rank 0).
  void save_checkpoint(const Checkpoint& checkpoint, const std::string& path) override;
  /// mark_step(), the state copied to the CPU, serialised, and left on the device.
  std::string save_optimizer_state(torch::optim::Optimizer& optimizer) override;
  /// Loads on the CPU, then moves the state to the device.
  void load_optimizer_state(torch::optim::Optimizer& optimizer, const std::string& bytes) override;

  /// The step boundary on this strategy's device.
  void mark_step() const;
  const accelerators::TpuRuntime& runtime() const { return *runtime_; }

 private:
  c10::Device device_;
  std::shared_ptr<accelerators::TpuRuntime> runtime_;
};

}  // namespace volt::strategies
