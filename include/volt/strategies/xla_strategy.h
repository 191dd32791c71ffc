#pragma once
#include <memory>

#include "volt/accelerators/tpu_runtime.h"
#include "volt/strategies/ddp_strategy.h"

namespace volt::strategies {

/// One process per TPU device, started by the spawn launcher (Lightning's XLAStrategy):
/// each worker trains on its own lazy-tensor device; before every optimizer step the
/// gradients are averaged across the processes: by the runtime's own collective when its
/// library provides one (VoltTpuRuntime::all_reduce_mean), else on host copies through
/// the c10d Gloo process group of the distributed strategy it builds on, one float32
/// buffer per step (average_gradients_on_host; the CPU stand-in's way). Other collectives
/// (logging, decisions) always use Gloo on host copies (docs/tpu.md).
///
/// As with single_xla, mark_step() closes each optimizer step and precedes every read on
/// the host; rank 0 writes checkpoints from CPU copies; the parent of the spawned workers
/// gets the trained state back through its launcher (launchers::XLALauncher, which starts
/// and ends the workers as ddp_spawn's SpawnLauncher does).
class XLAStrategy : public DDPStrategy {
 public:
  XLAStrategy(const StrategyParts& parts, DDPOptions options);

  /// configure_model and the tensors on this process's device (as single_xla), then
  /// parameters and buffers broadcast from rank 0.
  void setup(Module& module) override;
  /// mark_step(), gradients averaged across the processes, the precision's step, mark_step().
  bool optimizer_step(torch::optim::Optimizer& optimizer, const std::function<void()>& before_step = {}) override;
  double scalar_to_host(const at::Tensor& value) override;
  at::Tensor predict_step(Module& module, Batch& batch, StepContext& ctx) override;
  void save_checkpoint(const Checkpoint& checkpoint, const std::string& path) override;
  std::string save_optimizer_state(torch::optim::Optimizer& optimizer) override;
  void load_optimizer_state(torch::optim::Optimizer& optimizer, const std::string& bytes) override;

  /// Collectives on device tensors go through host copies; results come back on the
  /// tensor's device.
  void broadcast(std::vector<at::Tensor>& tensors, int64_t src) override;
  std::vector<at::Tensor> all_gather(const at::Tensor& tensor) override;
  at::Tensor all_reduce(const at::Tensor& tensor, ReduceOp op) override;

  /// The step boundary on this process's device.
  void mark_step() const;
  const accelerators::TpuRuntime& runtime() const { return *runtime_; }
  /// Gradient elements averaged at the last optimizer step (0 with one process).
  int64_t last_averaged_elements() const { return last_averaged_; }

 private:
  bool on_device(const at::Tensor& t) const { return t.defined() && t.device() == device_; }

  c10::Device device_;
  std::shared_ptr<accelerators::TpuRuntime> runtime_;
  int64_t last_averaged_ = 0;
};

/// The factory behind strategy "xla".
std::shared_ptr<Strategy> make_xla_strategy(const StrategyParts& parts);

}  // namespace volt::strategies
