#pragma once
#include <cstdint>
#include <map>

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

namespace torch::optim {
class Optimizer;
}

namespace volt::precision {

/// Dynamic loss scaling for float16 training (PyTorch's GradScaler, in C++ on ATen ops).
/// The loss is multiplied by the scale before backward; before a step the gradients are
/// divided by it and checked: if any is inf or NaN the step is skipped and the scale
/// backs off, and after growth_interval good steps in a row it grows. Uses LibTorch's
/// fused _amp_* kernels on CUDA tensors and plain ops elsewhere (so its logic runs and is
/// tested on CPU).
class GradScaler {
 public:
  struct Options {
    double init_scale = 65536.0;  // 2^16
    double growth_factor = 2.0;
    double backoff_factor = 0.5;
    int64_t growth_interval = 2000;
    bool enabled = true;
  };

  GradScaler() : GradScaler(Options{}) {}
  explicit GradScaler(Options options);

  /// loss * scale (the loss itself when disabled).
  at::Tensor scale(const at::Tensor& loss) const;
  /// Divides the optimizer's gradients by the scale once per step (a second call before
  /// step is a no-op) and records whether any is inf or NaN.
  void unscale(torch::optim::Optimizer& optimizer);
  /// Unscales if not done yet, then steps unless a gradient was inf or NaN. Returns
  /// whether the optimizer stepped.
  bool step(torch::optim::Optimizer& optimizer);
  /// Adjusts the scale after the step of `optimizer`: backoff if it found inf/NaN,
  /// growth after growth_interval good steps; clears that optimizer's per-step state.
  void update(torch::optim::Optimizer& optimizer);

  double get_scale() const { return scale_; }
  int64_t growth_tracker() const { return growth_tracker_; }
  bool is_enabled() const { return options_.enabled; }
  const Options& options() const { return options_; }
  /// Whether the last unscale of `optimizer` found inf or NaN.
  bool found_inf(const torch::optim::Optimizer& optimizer) const;

  nlohmann::json state_dict() const;
  void load_state_dict(const nlohmann::json& state);

 private:
  struct PerOptimizer {
    bool unscaled = false;
    bool found_inf = false;
  };
  Options options_;
  double scale_;
  int64_t growth_tracker_ = 0;
  std::map<const torch::optim::Optimizer*, PerOptimizer> per_optimizer_;
};

}  // namespace volt::precision
