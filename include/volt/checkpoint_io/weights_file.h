#pragma once
/// Which format a checkpoint or weights file is, and its weights, read without running anything in it.
#include <map>
#include <string>

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

namespace volt::checkpoint_io {

/// The formats Volt reads.
enum class FileFormat {
  kVoltCheckpoint,       ///< written by Volt (TorchCheckpointIO): Lightning's keys and "volt_format_version"; or format 1
  kLightningCheckpoint,  ///< written by PyTorch Lightning: "state_dict", "epoch", "pytorch-lightning_version", ...
  kTorchStateDict,       ///< torch.save(model.state_dict()): names -> tensors
  kSafetensors,          ///< the Hugging Face .safetensors layout
};

/// "Volt checkpoint", "Lightning checkpoint", "torch.save state_dict", "safetensors".
const char* format_name(FileFormat format);

/// A checkpoint or weights file, as read by read_weights_file.
struct WeightsFile {
  FileFormat format = FileFormat::kTorchStateDict;
  /// The module's parameters and buffers by dotted name: Volt's "state_dict.<name>" tensors, Lightning's
  /// "state_dict", the whole dict of a torch.save state_dict, every tensor of a .safetensors file.
  std::map<std::string, at::Tensor> state_dict;
  /// What else the file says, as JSON: Volt's meta; for Lightning the top-level entries (numbers and
  /// strings as they are, containers summarised: "optimizer_states": "list of 1", tensors as
  /// "tensor float32 [3]", objects as "object <class>"); safetensors' metadata.
  nlohmann::json info = nlohmann::json::object();
};

/// Reads `path`, detecting its format from its contents (not its name): a zip archive (integrity checked as
/// verify_zip does, then its pickle read by a weights-only reader that runs nothing) whose root is Volt's,
/// Lightning's or a name -> tensor dict, or a .safetensors file. Throws CheckpointError naming the file and
/// what is wrong, or, for a file of none of these formats, what it holds instead.
WeightsFile read_weights_file(const std::string& path);

}  // namespace volt::checkpoint_io
