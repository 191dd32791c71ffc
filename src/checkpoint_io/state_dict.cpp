#include "volt/checkpoint_io/state_dict.h"

#include <algorithm>
#include <sstream>
#include <utility>
#include <vector>

#include <torch/nn/module.h>

#include "volt/core/error.h"

namespace volt::checkpoint_io {

std::map<std::string, at::Tensor> module_state_dict(const torch::nn::Module& module) {
  std::map<std::string, at::Tensor> state;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    if (item.value().defined()) state.emplace(item.key(), item.value());
  }
  for (const auto& item : module.named_buffers(/*recurse=*/true)) {
    if (item.value().defined()) state.emplace(item.key(), item.value());
  }
  return state;
}

void load_state_dict_strict(torch::nn::Module& module, std::map<std::string, at::Tensor> state,
                            const std::string& source, const std::string& kind, bool dtypes_must_match) {
  std::vector<std::string> missing;
  std::vector<std::string> mismatched;
  std::vector<std::string> mistyped;
  std::vector<std::pair<at::Tensor, at::Tensor>> copies;
  auto visit = [&](const std::string& name, at::Tensor& target) {
    if (!target.defined()) return;
    auto it = state.find(name);
    if (it == state.end()) {
      missing.push_back(name);
      return;
    }
    if (it->second.sizes() != target.sizes()) {
      std::ostringstream msg;
      msg << name << " (" << kind << " " << it->second.sizes() << ", module " << target.sizes() << ")";
      mismatched.push_back(msg.str());
    } else if (dtypes_must_match && it->second.scalar_type() != target.scalar_type()) {
      mistyped.push_back(name + " (" + kind + " " + c10::toString(it->second.scalar_type()) + ", module " +
                         c10::toString(target.scalar_type()) + ")");
    } else {
      copies.emplace_back(target, it->second);
    }
    state.erase(it);
  };
  for (auto& item : module.named_parameters(true)) visit(item.key(), item.value());
  for (auto& item : module.named_buffers(true)) visit(item.key(), item.value());
  if (!missing.empty() || !mismatched.empty() || !mistyped.empty() || !state.empty()) {
    std::string msg = source + " does not fit module " + module.name() + ":";
    auto list = [&](const std::string& what, std::vector<std::string> names) {
      if (names.empty()) return;
      std::sort(names.begin(), names.end());
      msg += " " + what + " [";
      for (size_t i = 0; i < names.size(); ++i) msg += (i ? ", " : "") + names[i];
      msg += "];";
    };
    std::vector<std::string> unexpected;
    for (const auto& [name, tensor] : state) unexpected.push_back(name);
    list("missing in " + kind, missing);
    list("shape differs", mismatched);
    list("dtype differs", mistyped);
    list("unexpected in " + kind, unexpected);
    throw CheckpointError(msg + " Load it into the model class and configuration that wrote it.");
  }
  at::NoGradGuard no_grad;
  for (auto& [target, source_tensor] : copies) {
    // Onto the target's device first: a lazy tensor's copy_ from a CPU tensor goes through
    // a conversion that logs a pinned-memory warning.
    target.copy_(source_tensor.device() == target.device() ? source_tensor : source_tensor.to(target.device()));
  }
}

}  // namespace volt::checkpoint_io
