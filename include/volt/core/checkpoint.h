#pragma once
#include <map>
#include <string>

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

namespace volt {

/// Format version written into every checkpoint; bumped when the layout changes.
constexpr int kCheckpointFormatVersion = 1;

/// Everything a checkpoint holds, in memory. CheckpointIO turns it into a file and back.
///
/// - `tensors`: named tensors. Module state lives under "state_dict.<name>", RNG states
///   under "rng.<name>".
/// - `blobs`: opaque serialised parts (optimizer state as a LibTorch archive:
///   "optimizer.<i>").
/// - `meta`: JSON: format and library versions, loop progress, scheduler and callback
///   state, hyperparameters, the logger's version.
struct Checkpoint {
  std::map<std::string, at::Tensor> tensors;
  std::map<std::string, std::string> blobs;
  nlohmann::json meta = nlohmann::json::object();

  /// The module's parameters and buffers, without the "state_dict." prefix.
  std::map<std::string, at::Tensor> state_dict() const;
};

}  // namespace volt
