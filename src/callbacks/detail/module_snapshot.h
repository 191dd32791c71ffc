#pragma once
#include <string>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include "volt/core/module.h"

namespace volt::callbacks::detail {

/// A module's parameters, buffers and gradients, its train/eval mode, and the CPU and CUDA random generators,
/// copied so that the tuner can put them back bitwise after a sweep or a trial.
class ModuleSnapshot {
 public:
  explicit ModuleSnapshot(Module& module);
  /// Copies the values back into the module's own tensors (their storage stays theirs, so optimizers
  /// and views that point at them see the old values again) and resets the generator.
  void restore();

 private:
  struct Entry {
    at::Tensor tensor;  // the module's own
    at::Tensor value;   // its copy
    at::Tensor grad;    // a copy of its gradient (undefined: none)
  };
  Module& module_;
  bool training_;
  std::vector<Entry> params_, buffers_;
  at::Tensor cpu_rng_;
  std::vector<at::Tensor> cuda_rng_;  // one per CUDA device (none without CUDA)
};

}  // namespace volt::callbacks::detail
