#pragma once
#include <memory>
#include <string>

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include "volt/precision/grad_scaler.h"
#include "volt/precision/precision.h"

namespace volt::precision {

/// float32 parameters, steps run under LibTorch's autocast in `dtype` on `device` (CPU
/// autocast for bf16-mixed on CPU, CUDA autocast on GPUs), with an optional gradient
/// scaler (16-mixed). Under CPU autocast, log_softmax, softmax, sum and mean of
/// bfloat16/float16 inputs are computed in float32 (LibTorch already does so for
/// cross_entropy_loss, nll_loss, mse_loss and binary_cross_entropy_with_logits).
class MixedPrecision : public Precision {
 public:
  /// `name`: "bf16-mixed" or "16-mixed".
  MixedPrecision(std::string name, c10::DeviceType device, c10::ScalarType dtype,
                 std::shared_ptr<GradScaler> scaler = nullptr);
  std::string name() const override { return name_; }
  /// Autocast on `device` in `dtype` for the scope's lifetime; the previous state is
  /// restored after (nested scopes work).
  [[nodiscard]] std::unique_ptr<ForwardScope> forward_context() override;
  /// loss * scale with a scaler.
  at::Tensor pre_backward(const at::Tensor& loss) override;
  void unscale_gradients(torch::optim::Optimizer& optimizer) override;
  bool optimizer_step(torch::optim::Optimizer& optimizer, const std::function<void()>& before_step) override;
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& state) override;

  c10::DeviceType device() const { return device_; }
  c10::ScalarType dtype() const { return dtype_; }
  /// nullptr without a scaler.
  GradScaler* scaler() const { return scaler_.get(); }

 private:
  std::string name_;
  c10::DeviceType device_;
  c10::ScalarType dtype_;
  std::shared_ptr<GradScaler> scaler_;
};

/// Registers float32 kernels for log_softmax, softmax, sum and mean under CPU autocast
/// (once per process; MixedPrecision on CPU calls it).
void register_cpu_autocast_fp32_ops();

}  // namespace volt::precision
