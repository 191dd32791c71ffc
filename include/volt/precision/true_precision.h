#pragma once
#include <string>

#include <c10/core/ScalarType.h>

#include "volt/precision/precision.h"

namespace volt::precision {

/// The whole module, its inputs and the default dtype in one type: "64-true" (float64),
/// "16-true" (float16), "bf16-true" (bfloat16). Integer inputs (labels) are left alone.
class TruePrecision : public Precision {
 public:
  TruePrecision(std::string name, c10::ScalarType dtype);
  std::string name() const override { return name_; }
  /// Casts every floating parameter and buffer to the dtype.
  void convert_module(torch::nn::Module& module) override;
  /// Casts the batch's floating tensors to the dtype.
  void convert_input(Batch& batch) override;
  /// Sets the default dtype (new floating tensors) for the scope's lifetime.
  [[nodiscard]] std::unique_ptr<ForwardScope> forward_context() override;
  c10::ScalarType dtype() const { return dtype_; }

 private:
  std::string name_;
  c10::ScalarType dtype_;
};

}  // namespace volt::precision
