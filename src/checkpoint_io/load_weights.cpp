#include "volt/checkpoint_io/load_weights.h"

#include <algorithm>
#include <map>
#include <utility>

#include <torch/nn/module.h>

#include "checkpoint_io/detail/torch_archive.h"
#include "volt/core/error.h"
#include "volt/core/file_check.h"
#include "volt/core/printable.h"

namespace volt::checkpoint_io {
namespace {

std::string shape_text(c10::IntArrayRef sizes) {
  std::string out = "[";
  for (size_t d = 0; d < sizes.size(); ++d) out += (d ? ", " : "") + std::to_string(sizes[d]);
  return out + "]";
}

std::string joined(std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + printable(n);
  return "[" + out + "]";
}

}  // namespace

std::string LoadWeightsReport::describe() const {
  std::string out;
  auto add = [&](const std::string& part) { out += (out.empty() ? "" : "; ") + part; };
  if (!missing.empty()) add("missing in the file " + joined(missing));
  if (!unexpected.empty()) add("unexpected in the file " + joined(unexpected));
  if (!mismatched.empty()) {
    std::vector<std::string> items;
    for (const auto& m : mismatched) items.push_back(m.name + " (module " + m.expected + ", file " + m.got + ")");
    add("shape differs " + joined(items));
  }
  return out;
}

std::function<std::string(const std::string&)> strip_prefix(const std::string& prefix) {
  return [prefix](const std::string& name) {
    return name.compare(0, prefix.size(), prefix) == 0 ? name.substr(prefix.size()) : name;
  };
}

LoadWeightsReport load_weights(torch::nn::Module& module, const std::string& path, const LoadWeightsOptions& options) {
  WeightsFile file = read_weights_file(path);
  const std::string name = detail::file_label(path, std::string(format_name(file.format)));
  std::map<std::string, std::pair<std::string, at::Tensor>> state;  // module name -> (file name, tensor)
  for (auto& [file_name, tensor] : file.state_dict) {
    const std::string mapped = options.key_map ? options.key_map(file_name) : file_name;
    if (mapped.empty()) continue;
    const auto [it, inserted] = state.emplace(mapped, std::make_pair(file_name, tensor));
    if (!inserted) {
      throw CheckpointError(name + ": the key map gives " + quote_path(it->second.first) + " and " +
                            quote_path(file_name) + " the same name " + quote_path(mapped) +
                            ". Give a key_map that keeps names apart.");
    }
  }
  LoadWeightsReport report;
  report.format = file.format;
  std::vector<std::pair<at::Tensor, at::Tensor>> copies;
  auto visit = [&](const std::string& key, at::Tensor& target) {
    if (!target.defined()) return;
    const auto it = state.find(key);
    if (it == state.end()) {
      report.missing.push_back(key);
      return;
    }
    const at::Tensor& source = it->second.second;
    if (source.sizes() != target.sizes()) {
      report.mismatched.push_back({key, shape_text(target.sizes()), shape_text(source.sizes())});
    } else {
      copies.emplace_back(target, source);
      report.loaded.push_back(key);
    }
    state.erase(it);
  };
  for (auto& item : module.named_parameters(true)) visit(item.key(), item.value());
  for (auto& item : module.named_buffers(true)) visit(item.key(), item.value());
  for (const auto& [key, entry] : state) report.unexpected.push_back(key);
  if (options.strict && !report.clean()) {
    throw CheckpointError(name + " does not fit module " + module.name() + ": " + report.describe() +
                          ". Nothing was loaded. Map the file's names with LoadWeightsOptions::key_map (e.g. "
                          "strip_prefix(\"model.\")), or load with strict = false to take the names that fit.");
  }
  at::NoGradGuard no_grad;
  for (auto& [target, source] : copies) {
    target.copy_(source.to(target.device(), target.scalar_type()));
  }
  return report;
}

}  // namespace volt::checkpoint_io
