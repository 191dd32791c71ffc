#pragma once
#include <memory>
#include <string>

#include "volt/checkpoint_io/checkpoint_io.h"
#include "volt/core/registry.h"

namespace volt::checkpoint_io {

/// Names for the Trainer's `checkpoint_io` option: how checkpoint files are written and read.
using CheckpointIORegistry = Registry<CheckpointIO>;

/// The registry, with the built-ins on first use: "torch" (TorchCheckpointIO, the default)
/// and "async" (AsyncCheckpointIO around TorchCheckpointIO).
CheckpointIORegistry& checkpoint_io_registry();
/// Adds Volt's checkpoint IO names to `registry` (what checkpoint_io_registry() calls once).
void register_builtin_checkpoint_ios(CheckpointIORegistry& registry);

/// Adds (or replaces) a checkpoint IO name:
///
///     volt::checkpoint_io::register_checkpoint_io("s3", "checkpoints in a bucket",
///         [] { return std::make_shared<S3CheckpointIO>(); });
///     options.checkpoint_io = "s3";   // async_checkpoint=true wraps it in AsyncCheckpointIO
void register_checkpoint_io(const std::string& key, std::string description, CheckpointIORegistry::Factory factory);

}  // namespace volt::checkpoint_io
