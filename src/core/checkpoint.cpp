#include "volt/core/checkpoint.h"

namespace volt {

std::map<std::string, at::Tensor> Checkpoint::state_dict() const {
  static const std::string kPrefix = "state_dict.";
  std::map<std::string, at::Tensor> out;
  for (const auto& [key, tensor] : tensors) {
    if (key.compare(0, kPrefix.size(), kPrefix) == 0) out.emplace(key.substr(kPrefix.size()), tensor);
  }
  return out;
}

}  // namespace volt
