// What bench/gpu_cnn.cpp and bench/gpu_lm.cpp share: timing a Trainer's steps on a device, and the weights the
// two sides of a --tiny run compare.
#pragma once
#include <chrono>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/nn/module.h>

#ifdef VOLT_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "volt/volt.h"

namespace gpu_bench {

inline void synchronize(const c10::Device& device) {
#ifdef VOLT_WITH_CUDA
  if (device.is_cuda()) c10::cuda::device_synchronize();
#else
  (void)device;
#endif
}

/// Times the Trainer's steps after `warmup` of them, the device synchronized at both ends.
class StepTimer : public volt::callbacks::Callback {
 public:
  StepTimer(int64_t warmup, c10::Device device) : warmup_(warmup), device_(device) {}
  std::string state_key() const override { return "StepTimer"; }
  void on_train_batch_start(volt::TrainerView&, const volt::Batch&, int64_t batch_idx) override {
    if (batch_idx != warmup_) return;
    synchronize(device_);
    start_ = std::chrono::steady_clock::now();
  }
  void on_train_end(volt::TrainerView&) override {
    synchronize(device_);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  double seconds = 0;

 private:
  int64_t warmup_;
  c10::Device device_;
  std::chrono::steady_clock::time_point start_;
};

/// One side's measurement.
struct Side {
  double seconds = 0;
  std::vector<at::Tensor> weights;  // --tiny only
};

inline std::vector<at::Tensor> weights_of(torch::nn::Module& m) {
  std::vector<at::Tensor> out;
  for (const auto& p : m.parameters()) out.push_back(p.detach().to(at::kCPU).clone());
  return out;
}

}  // namespace gpu_bench
