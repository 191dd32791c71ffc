#pragma once
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <torch/optim/optimizer.h>

namespace volt::callbacks::detail {

/// An optimizer's per-parameter state and every parameter group's options, copied so that they can
/// be put back bitwise (the tuner's sweeps and trials train with the optimizer, then restore it).
class OptimizerSnapshot {
 public:
  /// Copies `optimizer`'s state now (through its own serialization, so any optimizer type works).
  explicit OptimizerSnapshot(torch::optim::Optimizer& optimizer);
  /// Puts the copied state and options back into the optimizer it was taken from; state added
  /// since (e.g. Adam's moments created by the first step) is removed.
  void restore();

 private:
  torch::optim::Optimizer* optimizer_;
  std::string archive_;
  std::vector<std::unique_ptr<torch::optim::OptimizerOptions>> options_;
};

}  // namespace volt::callbacks::detail
