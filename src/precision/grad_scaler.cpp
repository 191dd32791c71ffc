#include "volt/precision/grad_scaler.h"

#include <ATen/ops/_amp_foreach_non_finite_check_and_unscale.h>
#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/full.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/stack.h>
#include <torch/optim/optimizer.h>

#include "volt/core/error.h"

namespace volt::precision {

GradScaler::GradScaler(Options options) : options_(options), scale_(options.init_scale) {
  if (!(options_.init_scale > 0.0)) {
    throw ConfigError("GradScaler init_scale=" + std::to_string(options_.init_scale) + " must be positive.");
  }
  if (!(options_.growth_factor > 1.0)) {
    throw ConfigError("GradScaler growth_factor=" + std::to_string(options_.growth_factor) +
                      " must be above 1 (the default is 2).");
  }
  if (!(options_.backoff_factor > 0.0 && options_.backoff_factor < 1.0)) {
    throw ConfigError("GradScaler backoff_factor=" + std::to_string(options_.backoff_factor) +
                      " must be between 0 and 1 (the default is 0.5).");
  }
  if (options_.growth_interval < 1) {
    throw ConfigError("GradScaler growth_interval=" + std::to_string(options_.growth_interval) +
                      " must be at least 1 (the default is 2000).");
  }
}

at::Tensor GradScaler::scale(const at::Tensor& loss) const {
  if (!options_.enabled) return loss;
  return loss.mul(scale_);
}

void GradScaler::unscale(torch::optim::Optimizer& optimizer) {
  if (!options_.enabled) return;
  auto& state = per_optimizer_[&optimizer];
  if (state.unscaled) return;
  std::vector<at::Tensor> grads;
  for (auto& group : optimizer.param_groups()) {
    for (auto& p : group.params()) {
      if (p.grad().defined()) grads.push_back(p.mutable_grad());
    }
  }
  state.unscaled = true;
  state.found_inf = false;
  if (grads.empty()) return;
  const double inv_scale = 1.0 / scale_;
  // The fused kernel unscales and checks in one pass, but only for CUDA tensors of one
  // device; everything else takes the plain path.
  bool all_cuda = true;
  for (const auto& g : grads) all_cuda = all_cuda && g.is_cuda() && g.device() == grads.front().device();
  if (all_cuda) {
    const auto opts = at::TensorOptions().dtype(at::kFloat).device(grads.front().device());
    at::Tensor found = at::full({}, 0.0, opts);
    at::Tensor inv = at::full({}, inv_scale, opts);
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found, inv);
    state.found_inf = found.item<float>() != 0.0f;
    return;
  }
  std::vector<at::Tensor> finite;
  finite.reserve(grads.size());
  for (const auto& g : grads) finite.push_back(at::isfinite(g).all());
  state.found_inf = !at::stack(finite).all().item<bool>();
  at::_foreach_mul_(grads, inv_scale);
}

bool GradScaler::step(torch::optim::Optimizer& optimizer) {
  if (!options_.enabled) {
    optimizer.step();
    return true;
  }
  unscale(optimizer);
  if (per_optimizer_[&optimizer].found_inf) return false;
  optimizer.step();
  return true;
}

void GradScaler::update(torch::optim::Optimizer& optimizer) {
  if (!options_.enabled) return;
  auto it = per_optimizer_.find(&optimizer);
  const bool inf = it != per_optimizer_.end() && it->second.found_inf;
  if (inf) {
    scale_ *= options_.backoff_factor;
    growth_tracker_ = 0;
  } else if (++growth_tracker_ >= options_.growth_interval) {
    scale_ *= options_.growth_factor;
    growth_tracker_ = 0;
  }
  if (it != per_optimizer_.end()) it->second = PerOptimizer{};
}

bool GradScaler::found_inf(const torch::optim::Optimizer& optimizer) const {
  auto it = per_optimizer_.find(&optimizer);
  return it != per_optimizer_.end() && it->second.found_inf;
}

nlohmann::json GradScaler::state_dict() const {
  return {{"scale", scale_},
          {"growth_factor", options_.growth_factor},
          {"backoff_factor", options_.backoff_factor},
          {"growth_interval", options_.growth_interval},
          {"growth_tracker", growth_tracker_},
          {"enabled", options_.enabled}};
}

void GradScaler::load_state_dict(const nlohmann::json& state) {
  if (!state.is_object() || !state.contains("scale")) {
    throw CheckpointError("the gradient scaler's state in this checkpoint has no 'scale'; it was not written by a "
                          "16-mixed run. Resume with the precision that wrote it.");
  }
  scale_ = state.at("scale").get<double>();
  growth_tracker_ = state.value("growth_tracker", int64_t{0});
  options_.growth_factor = state.value("growth_factor", options_.growth_factor);
  options_.backoff_factor = state.value("backoff_factor", options_.backoff_factor);
  options_.growth_interval = state.value("growth_interval", options_.growth_interval);
  options_.enabled = state.value("enabled", options_.enabled);
}

}  // namespace volt::precision
