#pragma once
#include <map>
#include <string>

#include <ATen/core/Tensor.h>

namespace torch::nn {
class Module;
}

namespace volt::checkpoint_io {

/// The module's parameters and buffers by dotted name (what checkpoints and .safetensors
/// files store).
std::map<std::string, at::Tensor> module_state_dict(const torch::nn::Module& module);

/// Copies `state` into the module like a strict load_state_dict: every parameter and
/// buffer must be there with its shape, and nothing else. Otherwise nothing is copied and
/// a CheckpointError lists what is missing, what differs in shape and what is unexpected,
/// naming `source` (e.g. "checkpoint 'a.ckpt'") and calling it `kind` ("checkpoint",
/// "file") in the lists. With `dtypes_must_match` (resuming from a checkpoint) a tensor whose dtype is
/// not the module's is listed too ("dtype differs"); otherwise values are converted to each parameter's
/// dtype. Always moved to each parameter's device.
void load_state_dict_strict(torch::nn::Module& module, std::map<std::string, at::Tensor> state,
                            const std::string& source, const std::string& kind, bool dtypes_must_match = false);

}  // namespace volt::checkpoint_io
