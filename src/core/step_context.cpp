#include "volt/core/step_context.h"

#include <ATen/ops/scalar_tensor.h>

namespace volt {

void StepContext::log(const std::string& name, double value, const LogOptions& options) {
  log(name, at::scalar_tensor(value, at::kDouble), options);
}

}  // namespace volt
