#pragma once
#include <string>

#include "volt/core/checkpoint.h"

namespace volt::checkpoint_io {

/// Turns a Checkpoint into a file and back. Strategies call it on the ranks that write.
class CheckpointIO {
 public:
  virtual ~CheckpointIO() = default;
  /// Writes `checkpoint` to `path`. After it returns the file is complete and durable;
  /// if the process dies during the call, whatever was at `path` before is intact.
  virtual void save_checkpoint(const Checkpoint& checkpoint, const std::string& path) = 0;
  /// Reads a file written by save_checkpoint. Throws CheckpointError naming the file.
  virtual Checkpoint load_checkpoint(const std::string& path) = 0;
  /// Deletes a checkpoint file (no error if it is already gone).
  virtual void remove_checkpoint(const std::string& path) = 0;
  /// Waits for pending writes (async variants) and re-raises their failures.
  virtual void teardown() {}
};

}  // namespace volt::checkpoint_io
