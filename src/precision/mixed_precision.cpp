#include "volt/precision/mixed_precision.h"

#include <mutex>

#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>
#include <torch/optim/optimizer.h>

#include "volt/core/compat.h"
#include "volt/core/error.h"

namespace volt::precision {
namespace {

class AutocastScope : public ForwardScope {
 public:
  AutocastScope(c10::DeviceType device, c10::ScalarType dtype)
      : device_(device), was_enabled_(compat::autocast_enabled(device)), previous_dtype_(compat::autocast_dtype(device)) {
    compat::set_autocast_enabled(device, true);
    compat::set_autocast_dtype(device, dtype);
    at::autocast::increment_nesting();
  }
  ~AutocastScope() override {
    // The cast cache holds lower-precision copies of the weights; drop it when the
    // outermost region ends, or the next step would use stale copies.
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    compat::set_autocast_enabled(device_, was_enabled_);
    compat::set_autocast_dtype(device_, previous_dtype_);
  }

 private:
  c10::DeviceType device_;
  bool was_enabled_;
  c10::ScalarType previous_dtype_;
};

/// A boxed AutocastCPU kernel: casts bfloat16/float16 tensor arguments to float32 and
/// calls the op below autocast. Boxed, so it fits each op's schema on every LibTorch.
void fp32_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  for (auto& value : *stack) {
    if (value.isTensor()) {
      const at::Tensor& t = value.toTensor();
      if (t.defined() && (t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf)) value = t.to(at::kFloat);
    }
  }
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCPU);
  op.callBoxed(stack);
}

}  // namespace

void register_cpu_autocast_fp32_ops() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Registered explicitly (not by a static initialiser) and kept for the process.
    static auto* library =
        new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::AutocastCPU, __FILE__, __LINE__);
    for (const char* op : {"log_softmax.int", "softmax.int", "sum", "sum.dim_IntList", "mean", "mean.dim"}) {
      library->impl(op, torch::CppFunction::makeFromBoxedFunction<&fp32_kernel>());
    }
  });
}

MixedPrecision::MixedPrecision(std::string name, c10::DeviceType device, c10::ScalarType dtype,
                               std::shared_ptr<GradScaler> scaler)
    : name_(std::move(name)), device_(device), dtype_(dtype), scaler_(std::move(scaler)) {
  if (device_ != c10::DeviceType::CPU && device_ != c10::DeviceType::CUDA) {
    throw NotSupportedError("mixed precision autocast runs on cpu and cuda; got device type " +
                            c10::DeviceTypeName(device_) + ".");
  }
  if (device_ == c10::DeviceType::CPU) register_cpu_autocast_fp32_ops();
}

std::unique_ptr<ForwardScope> MixedPrecision::forward_context() {
  return std::make_unique<AutocastScope>(device_, dtype_);
}

at::Tensor MixedPrecision::pre_backward(const at::Tensor& loss) {
  return scaler_ ? scaler_->scale(loss) : loss;
}

void MixedPrecision::unscale_gradients(torch::optim::Optimizer& optimizer) {
  if (scaler_) scaler_->unscale(optimizer);
}

bool MixedPrecision::optimizer_step(torch::optim::Optimizer& optimizer, const std::function<void()>& before_step) {
  if (!scaler_) return Precision::optimizer_step(optimizer, before_step);
  scaler_->unscale(optimizer);
  if (before_step) before_step();
  const bool stepped = scaler_->step(optimizer);
  scaler_->update(optimizer);
  return stepped;
}

nlohmann::json MixedPrecision::state_dict() const {
  return scaler_ ? nlohmann::json{{"scaler", scaler_->state_dict()}} : nlohmann::json::object();
}

void MixedPrecision::load_state_dict(const nlohmann::json& state) {
  if (scaler_ && state.contains("scaler")) scaler_->load_state_dict(state.at("scaler"));
}

}  // namespace volt::precision
