#pragma once
/// Weights alone into a module, from any file read_weights_file reads (a Lightning .ckpt, a
/// torch.save(model.state_dict()) file, a .safetensors file, a Volt checkpoint).
#include <functional>
#include <string>
#include <vector>

#include "volt/checkpoint_io/weights_file.h"

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace volt::checkpoint_io {

/// How load_weights matches the file's names to the module's.
struct LoadWeightsOptions {
  /// Strict (the default): any missing, unexpected or mis-shaped name is a CheckpointError and nothing is
  /// copied. Not strict: the names that fit are copied, the others are only reported.
  bool strict = true;
  /// Maps each name of the file to the module's name for it (e.g. strips Lightning's "model."); an empty
  /// result drops the tensor. None: names are used as they are.
  std::function<std::string(const std::string&)> key_map;
};

/// A name whose shape in the file differs from the module's.
struct ShapeMismatch {
  std::string name;      ///< the module's name
  std::string expected;  ///< the module's shape, e.g. "[8, 4]"
  std::string got;       ///< the file's shape
};

/// What load_weights did.
struct LoadWeightsReport {
  FileFormat format = FileFormat::kTorchStateDict;
  std::vector<std::string> loaded;      ///< module names copied
  std::vector<std::string> missing;     ///< module names the file lacks
  std::vector<std::string> unexpected;  ///< names of the file (after key_map) the module lacks
  std::vector<ShapeMismatch> mismatched;
  /// Whether every name fit (nothing missing, unexpected or mis-shaped).
  bool clean() const { return missing.empty() && unexpected.empty() && mismatched.empty(); }
  /// "missing [a, b]; unexpected [c]; shape differs [d (module [2], file [3])]", or "" when clean.
  std::string describe() const;
};

/// A prefix-stripping key_map: "model.layer.weight" -> "layer.weight"; names without the prefix are kept.
std::function<std::string(const std::string&)> strip_prefix(const std::string& prefix);

/// Reads `path` (read_weights_file) and copies its state_dict into `module`'s parameters and buffers under
/// no-grad, converted to each one's dtype and device (as PyTorch's load_state_dict does). Two file names
/// mapped to one module name are an error. Throws CheckpointError naming the file: when strict and the names
/// do not fit (listing every missing, unexpected and mis-shaped one, nothing copied), or when the file cannot
/// be read. Returns the report otherwise.
LoadWeightsReport load_weights(torch::nn::Module& module, const std::string& path,
                               const LoadWeightsOptions& options = {});

}  // namespace volt::checkpoint_io
