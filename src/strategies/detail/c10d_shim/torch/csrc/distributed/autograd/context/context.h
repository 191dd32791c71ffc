// Stand-in for a LibTorch header that Debian's libtorch-dev 1.13 does not ship (c10d's
// reducer.hpp includes it for distributed autograd, which Volt does not use). It declares
// only what reducer.hpp names: the Reducer holds a shared_ptr to the context and never
// calls it on the local-autograd path. On this include path only when the real header is
// missing (see CMakeLists.txt).
#pragma once
#include <functional>
#include <memory>

#include <ATen/core/Tensor.h>

namespace torch {
namespace distributed {
namespace autograd {

class DistAutogradContext {
 public:
  using GradCallback = std::function<bool(at::Tensor&)>;
};
using ContextPtr = std::shared_ptr<DistAutogradContext>;

}  // namespace autograd
}  // namespace distributed
}  // namespace torch
