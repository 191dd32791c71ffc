#include "volt/precision/precision.h"

#include <ATen/ops/stack.h>
#include <torch/optim/optimizer.h>

#include "volt/core/error.h"

namespace volt::precision {

ClipAlgorithm clip_algorithm_from_flag(const std::string& gradient_clip_algorithm) {
  if (gradient_clip_algorithm == "norm") return ClipAlgorithm::kNorm;
  if (gradient_clip_algorithm == "value") return ClipAlgorithm::kValue;
  throw ConfigError("gradient_clip_algorithm='" + gradient_clip_algorithm + "' is not known. Use \"norm\" or \"value\".");
}

void Precision::backward(const at::Tensor& loss) {
  loss.backward();
}

void Precision::clip_gradients(torch::optim::Optimizer& optimizer, double value, ClipAlgorithm algorithm) {
  if (value <= 0.0) return;
  std::vector<at::Tensor> params;
  for (auto& group : optimizer.param_groups()) {
    for (auto& p : group.params()) {
      if (p.grad().defined()) params.push_back(p);
    }
  }
  if (params.empty()) return;
  if (algorithm == ClipAlgorithm::kNorm) {
    // Total 2-norm over all gradients; the scale stays a tensor, so no host sync on GPUs.
    std::vector<at::Tensor> norms;
    norms.reserve(params.size());
    for (auto& p : params) norms.push_back(p.grad().detach().norm(2));
    const at::Tensor total = at::stack(norms).norm(2);
    const at::Tensor coef = total.add(1e-6).reciprocal().mul(value).clamp_max(1.0);
    for (auto& p : params) p.mutable_grad().detach().mul_(coef.to(p.grad().dtype()));
  } else {
    for (auto& p : params) p.mutable_grad().detach().clamp_(-value, value);
  }
}

bool Precision::optimizer_step(torch::optim::Optimizer& optimizer, const std::function<void()>& before_step) {
  unscale_gradients(optimizer);
  if (before_step) before_step();
  optimizer.step();
  return true;
}

}  // namespace volt::precision
