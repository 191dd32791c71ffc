#pragma once
#include "volt/checkpoint_io/checkpoint_io.h"

namespace volt::checkpoint_io {

/// The default: one LibTorch pickle archive per checkpoint (a dict that Python's
/// torch.load reads: {"tensors": {name: tensor}, "blobs": {name: uint8 tensor},
/// "meta": JSON text}). Written to a temporary file in the same folder, fsynced,
/// renamed over the target, and the folder fsynced.
class TorchCheckpointIO : public CheckpointIO {
 public:
  void save_checkpoint(const Checkpoint& checkpoint, const std::string& path) override;
  Checkpoint load_checkpoint(const std::string& path) override;
  void remove_checkpoint(const std::string& path) override;
};

/// Writes `bytes` to `path` atomically (temp file in the same folder, fsync, rename,
/// fsync of the folder); creates the folder. Afterwards removes temporary files for the
/// same target that processes which no longer run left behind (they died before their
/// rename). Throws volt::Error naming the path.
void atomic_write(const std::string& path, const void* bytes, size_t size);

/// Called by atomic_write after the temporary file is complete and fsynced, just before
/// it is renamed onto the target: (temporary path, target path).
using BeforeRenameHook = void (*)(const std::string& temp_path, const std::string& target);
/// Installs a hook for crash tests (one that aborts the process there shows that the
/// previous file survives); nullptr removes it. Returns the previous hook. Not for
/// production use: every atomic write in the process calls it.
BeforeRenameHook set_before_rename_hook(BeforeRenameHook hook);

}  // namespace volt::checkpoint_io
