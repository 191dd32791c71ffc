#pragma once
#include <memory>
#include <string>
#include <vector>

#include "volt/strategies/strategy.h"

namespace volt::strategies {

struct StrategyParts;

#ifdef VOLT_WITH_CUDA
/// Lightning's DataParallelStrategy ("dp"): one process drives every GPU in `devices`. Each
/// training step splits the batch along its first dimension over the GPUs (torch.chunk's sizes),
/// runs training_step on the module itself on the first GPU and on a copy of it
/// (torch::nn::Module::clone(device)) on each other GPU, copies the losses to the first GPU and
/// returns their mean; backward sums the copies' gradients into the module's own parameters
/// (torch::nn::parallel's replicate_grad_edges), so the optimizer steps one set of parameters.
/// The copies are made again at every step (as PyTorch's DataParallel does): buffers the copies
/// change (running statistics) are dropped, those of the first GPU's shard kept. Validation, test
/// and predict steps run on the first GPU, on whole batches. With one GPU it is single_device.
/// Only in builds whose LibTorch has CUDA (VOLT_WITH_CUDA): elsewhere "dp" on CPU runs ddp, with a
/// warning (accelerator connector).
class DataParallelStrategy : public Strategy {
 public:
  /// `devices`: CUDA devices, the first is the root (where parameters and optimizer state live).
  DataParallelStrategy(std::vector<c10::Device> devices, std::shared_ptr<accelerators::Accelerator> accelerator,
                       std::shared_ptr<precision::Precision> precision,
                       std::shared_ptr<environments::ClusterEnvironment> environment,
                       std::shared_ptr<checkpoint_io::CheckpointIO> checkpoint_io);
  std::string name() const override { return "dp"; }
  c10::Device root_device() const override { return devices_.front(); }
  const std::vector<c10::Device>& parallel_devices() const { return devices_; }

  /// Strategy::setup, then (two GPUs or more) one trial copy of the module, so that a module
  /// without clone(device) is refused before the first step.
  void setup(Module& module) override;
  /// The scatter, the per-GPU training steps and the mean of their losses (see the class).
  at::Tensor training_step(Module& module, Batch& batch, StepContext& ctx) override;

 private:
  std::vector<c10::Device> devices_;
};

/// The registry's factory for "dp" (the plan's parallel devices).
std::shared_ptr<Strategy> make_dp_strategy(const StrategyParts& parts);
#endif

}  // namespace volt::strategies
