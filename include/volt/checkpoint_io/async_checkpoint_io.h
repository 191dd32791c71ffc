#pragma once
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "volt/checkpoint_io/checkpoint_io.h"

namespace volt::checkpoint_io {

/// Writes checkpoints in the background (Lightning's AsyncCheckpointIO), wrapping another
/// CheckpointIO (default: TorchCheckpointIO) that does the actual, atomic write.
///
/// save_checkpoint snapshots the checkpoint on the caller's thread (every tensor is copied
/// to a CPU tensor the run cannot touch, blobs and metadata are copied), then returns
/// while one background thread writes the snapshot. At most one write is in flight: the
/// next save first waits for the previous one. A failed write is re-raised (as the
/// CheckpointError the wrapped CheckpointIO threw) by the next save_checkpoint,
/// load_checkpoint, remove_checkpoint or wait, or by teardown at the end of the stage.
/// The file itself is still written atomically, so a crash mid-write leaves the previous
/// checkpoint intact; what is lost is only the write in flight.
class AsyncCheckpointIO : public CheckpointIO {
 public:
  /// `inner`: the CheckpointIO that writes and reads files; nullptr: TorchCheckpointIO.
  explicit AsyncCheckpointIO(std::shared_ptr<CheckpointIO> inner = nullptr);
  /// Waits for a write in flight; a failure at this point is printed, not thrown.
  ~AsyncCheckpointIO() override;
  AsyncCheckpointIO(const AsyncCheckpointIO&) = delete;
  AsyncCheckpointIO& operator=(const AsyncCheckpointIO&) = delete;

  /// Re-raises a previous failure, snapshots `checkpoint`, starts the write, returns.
  void save_checkpoint(const Checkpoint& checkpoint, const std::string& path) override;
  /// Waits for a write in flight (it may be this file), then reads through `inner`.
  Checkpoint load_checkpoint(const std::string& path) override;
  /// Waits for a write in flight, then removes through `inner`.
  void remove_checkpoint(const std::string& path) override;
  /// Waits for the write in flight and re-raises its failure.
  void teardown() override;

  /// Blocks until no write is in flight; re-raises the failure of the last one.
  void wait();
  /// The wrapped CheckpointIO.
  CheckpointIO& inner() const { return *inner_; }

  /// A copy of `checkpoint` that shares no tensor memory with it (contiguous CPU tensors).
  static Checkpoint snapshot(const Checkpoint& checkpoint);

 private:
  void join();

  std::shared_ptr<CheckpointIO> inner_;
  std::thread worker_;
  std::mutex mutex_;
  std::exception_ptr error_;
};

}  // namespace volt::checkpoint_io
