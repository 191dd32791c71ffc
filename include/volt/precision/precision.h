#pragma once
#include <functional>
#include <memory>
#include <string>

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include "volt/core/types.h"

namespace torch::nn {
class Module;
}
namespace torch::optim {
class Optimizer;
}

namespace volt::precision {

/// How gradients are clipped (Trainer's gradient_clip_algorithm).
enum class ClipAlgorithm { kNorm, kValue };

/// The gradient_clip_algorithm flag ("norm" or "value") as its enum, resolved once before a
/// stage runs. Throws ConfigError for another name (validate_trainer_options refuses it first).
ClipAlgorithm clip_algorithm_from_flag(const std::string& gradient_clip_algorithm);

/// An RAII scope around a forward pass (autocast and friends); ends when destroyed.
class ForwardScope {
 public:
  virtual ~ForwardScope() = default;
};

/// Numerics of a run: what dtype the module and inputs have, what autocast region the
/// steps run in, how the loss is scaled and the optimizer stepped. The base class is
/// "32-true": full float32, every hook a pass-through. Sits under the strategy and
/// knows nothing about processes.
class Precision {
 public:
  virtual ~Precision() = default;
  /// Registry key, e.g. "32-true", "bf16-mixed".
  virtual std::string name() const { return "32-true"; }
  /// Changes the module's parameter dtype where the plug-in needs it (true half, 64-bit).
  virtual void convert_module(torch::nn::Module&) {}
  /// Casts floating-point tensors of a batch where the plug-in needs it.
  virtual void convert_input(Batch&) {}
  /// The region a step runs in; nullptr when nothing needs to happen.
  [[nodiscard]] virtual std::unique_ptr<ForwardScope> forward_context() { return nullptr; }
  /// The tensor backward() is called on (a scaler multiplies the loss here).
  virtual at::Tensor pre_backward(const at::Tensor& loss) { return loss; }
  virtual void backward(const at::Tensor& loss);
  virtual void post_backward(const at::Tensor&) {}
  /// Divides gradients by the loss scale, once per optimizer step (a no-op without a
  /// scaler, and when already done this step).
  virtual void unscale_gradients(torch::optim::Optimizer&) {}
  /// Clips the optimizer's gradients (norm: the total 2-norm of all of them; value: each
  /// entry). Called from optimizer_step's before_step, so always on unscaled gradients.
  virtual void clip_gradients(torch::optim::Optimizer& optimizer, double value, ClipAlgorithm algorithm);
  /// One optimizer step: unscale the gradients, run `before_step` (the
  /// on_before_optimizer_step hooks and clipping), step unless a scaler found inf/NaN
  /// gradients, update the scale. Returns whether the optimizer stepped.
  virtual bool optimizer_step(torch::optim::Optimizer& optimizer, const std::function<void()>& before_step);
  virtual nlohmann::json state_dict() const { return nlohmann::json::object(); }
  virtual void load_state_dict(const nlohmann::json&) {}
  virtual void teardown() {}
};

}  // namespace volt::precision
