#include "volt/precision/true_precision.h"

#include <c10/core/DefaultDtype.h>
#include <torch/nn/module.h>

namespace volt::precision {
namespace {

class DefaultDtypeScope : public ForwardScope {
 public:
  explicit DefaultDtypeScope(c10::ScalarType dtype) : previous_(c10::get_default_dtype()) {
    // Only float32/float64 can be LibTorch's default dtype; half types keep float32.
    if (dtype == c10::kDouble || dtype == c10::kFloat) c10::set_default_dtype(c10::scalarTypeToTypeMeta(dtype));
  }
  ~DefaultDtypeScope() override { c10::set_default_dtype(previous_); }

 private:
  caffe2::TypeMeta previous_;
};

}  // namespace

TruePrecision::TruePrecision(std::string name, c10::ScalarType dtype) : name_(std::move(name)), dtype_(dtype) {}

void TruePrecision::convert_module(torch::nn::Module& module) {
  module.to(dtype_);
}

void TruePrecision::convert_input(Batch& batch) {
  for (auto& t : batch) {
    if (t.defined() && t.is_floating_point() && t.scalar_type() != dtype_) t = t.to(dtype_);
  }
}

std::unique_ptr<ForwardScope> TruePrecision::forward_context() {
  return std::make_unique<DefaultDtypeScope>(dtype_);
}

}  // namespace volt::precision
