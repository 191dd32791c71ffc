#include "volt/core/checkpoint.h"

#include <filesystem>

namespace volt {

bool is_checkpoint_path(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) return true;
  return std::filesystem::is_directory(path, ec) &&
         std::filesystem::is_regular_file(std::filesystem::path(path) / kShardedCheckpointMetaFile, ec);
}

std::map<std::string, at::Tensor> Checkpoint::state_dict() const {
  static const std::string kPrefix = "state_dict.";
  std::map<std::string, at::Tensor> out;
  for (const auto& [key, tensor] : tensors) {
    if (key.compare(0, kPrefix.size(), kPrefix) == 0) out.emplace(key.substr(kPrefix.size()), tensor);
  }
  return out;
}

}  // namespace volt
