#pragma once
#include <map>
#include <string>

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

namespace volt {

/// Format version written into every checkpoint; bumped when the layout changes. 2: Lightning 2.x's
/// dictionary (docs/checkpoints.md); 1 (tensors, blobs, JSON meta) is still read and converted.
constexpr int kCheckpointFormatVersion = 2;

/// Everything a checkpoint holds, in memory. CheckpointIO turns it into a file and back.
///
/// - `tensors`: named tensors. Module state lives under "state_dict.<name>", optimizer state
///   in PyTorch's names under "optimizer_states.<i>.state.<parameter index>.<name>", RNG states
///   under "rng.<name>".
/// - `blobs`: opaque serialised parts (the LibTorch archive of an optimizer PyTorch's layout
///   does not cover, "optimizer.<i>").
/// - `meta`: JSON, the rest of Lightning's dictionary: epoch, global_step, loops, callbacks,
///   optimizer_states (without their tensors), lr_schedulers, hyper_parameters, and Volt's own
///   under "volt" (format version, exact loop position, metrics, logger version).
/// TorchCheckpointIO writes it as the dictionary Lightning writes (docs/checkpoints.md).
struct Checkpoint {
  std::map<std::string, at::Tensor> tensors;
  std::map<std::string, std::string> blobs;
  nlohmann::json meta = nlohmann::json::object();

  /// The module's parameters and buffers, without the "state_dict." prefix.
  std::map<std::string, at::Tensor> state_dict() const;
};

/// The file whose presence makes a folder a finished sharded (fsdp) checkpoint
/// (checkpoint_io/sharded_checkpoint.h writes it last).
constexpr const char* kShardedCheckpointMetaFile = "meta.json";

/// True when `path` names something a checkpoint load reads: a regular file, or the folder of a
/// finished sharded save (with its meta.json). Callbacks use it to find existing checkpoints.
bool is_checkpoint_path(const std::string& path);

}  // namespace volt
