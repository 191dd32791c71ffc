#pragma once
// The module tensors weight averaging works on, by name, in the module's order.
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>

namespace volt::callbacks::detail {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

/// The module's parameters (and, with `buffers`, then its buffers), undefined ones left out.
/// The tensors share storage with the module: writing them in place changes it.
inline NamedTensors named_tensors(const torch::nn::Module& module, bool buffers) {
  NamedTensors out;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    if (item.value().defined()) out.emplace_back(item.key(), item.value());
  }
  if (buffers) {
    for (const auto& item : module.named_buffers(/*recurse=*/true)) {
      if (item.value().defined()) out.emplace_back(item.key(), item.value());
    }
  }
  return out;
}

}  // namespace volt::callbacks::detail
