#pragma once
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "volt/loops/loop.h"

namespace volt::loops {

/// Runs predict_step over the predict batches (eval mode, no gradients) and collects
/// what it returns, one tensor per batch, moved to the CPU.
class PredictionLoop : public Loop {
 public:
  using Loop::Loop;
  std::vector<at::Tensor> run(data::DataLoader& loader, int64_t max_batches);
};

}  // namespace volt::loops
