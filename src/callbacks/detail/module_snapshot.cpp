#include "callbacks/detail/module_snapshot.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/core/grad_mode.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <ATen/ops/empty.h>

namespace volt::callbacks::detail {

ModuleSnapshot::ModuleSnapshot(Module& module) : module_(module), training_(module.is_training()) {
  for (const auto& p : module.parameters(/*recurse=*/true)) {
    params_.push_back({p, p.detach().clone(), p.grad().defined() ? p.grad().detach().clone() : at::Tensor()});
  }
  for (const auto& b : module.buffers(/*recurse=*/true)) buffers_.push_back({b, b.detach().clone(), at::Tensor()});
  cpu_rng_ = at::detail::getDefaultCPUGenerator().get_state();
  // Every CUDA device's generator too, as Lightning's isolate_rng (torch.cuda.get_rng_state_all).
  if (at::hasCUDA()) {
    const int n = at::detail::getCUDAHooks().getNumGPUs();
    for (int i = 0; i < n; ++i) {
      const at::Generator& gen =
          at::globalContext().defaultGenerator(c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(i)));
      cuda_rng_.push_back(gen.get_state());
    }
  }
}

void ModuleSnapshot::restore() {
  at::NoGradGuard no_grad;
  for (auto& e : params_) {
    e.tensor.detach().copy_(e.value);
    if (e.grad.defined()) {
      if (e.tensor.grad().defined()) {
        e.tensor.mutable_grad().detach().copy_(e.grad);
      } else {
        e.tensor.mutable_grad() = e.grad.clone();
      }
    } else {
      e.tensor.mutable_grad() = at::Tensor();
    }
  }
  for (auto& e : buffers_) e.tensor.detach().copy_(e.value);
  module_.train(training_);
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(cpu_rng_);
  for (size_t i = 0; i < cuda_rng_.size(); ++i) {
    at::Generator cuda =
        at::globalContext().defaultGenerator(c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(i)));
    std::lock_guard<std::mutex> cuda_lock(cuda.mutex());
    cuda.set_state(cuda_rng_[i]);
  }
}

}  // namespace volt::callbacks::detail
