#pragma once
#include <map>
#include "volt/checkpoint_io/checkpoint_io.h"

namespace volt::checkpoint_io {

/// The default: the dictionary PyTorch Lightning 2.x writes (epoch, global_step, pytorch-lightning_version,
/// state_dict, loops, callbacks, optimizer_states, lr_schedulers, hyper_parameters; Volt's own under "volt",
/// "volt_tensors", "volt_blobs" and "volt_format_version"), pickled and zipped as torch.save writes it, so that
/// torch.load(path, weights_only=True) and Lightning read it (docs/checkpoints.md). load_checkpoint refuses a
/// path that is not a regular file before opening it, checks the zip archive's integrity (verify_zip: every
/// record's CRC-32 and size), then reads data.pkl with a weights-only reader that runs nothing; it also reads
/// Lightning's files and Volt's format 1 ({"tensors", "blobs", "meta"}), both in format 2's layout. Every
/// failure is a CheckpointError naming the file. Written to a temporary file in the same folder, fsynced,
/// renamed over the target, and the folder fsynced.
class TorchCheckpointIO : public CheckpointIO {
 public:
  void save_checkpoint(const Checkpoint& checkpoint, const std::string& path) override;
  Checkpoint load_checkpoint(const std::string& path) override;
  void remove_checkpoint(const std::string& path) override;

 private:
  static void save_archive(const Checkpoint& checkpoint, const std::string& path);
};

/// Writes `bytes` to `path` atomically (temp file in the same folder, fsync, rename,
/// fsync of the folder); creates the folder. Afterwards removes temporary files for the
/// same target that processes which no longer run left behind (they died before their
/// rename). Throws volt::Error naming the path.
void atomic_write(const std::string& path, const void* bytes, size_t size);

/// Removes, under `root` (and its folders, at most 4 levels down), the temporary files that
/// atomic writers (checkpoints, metrics.csv, hparams.yaml) which no longer run left behind:
/// names ".<target>.tmp.<pid>[.<n>]" whose process <pid> does not exist on this machine.
/// Files of live processes are kept. Returns how many files were removed; errors while
/// scanning are ignored (a folder that cannot be listed is skipped). The Trainer calls it on
/// rank 0 when fit starts.
int64_t remove_dead_writers_temp_files(const std::string& root);

/// Called by atomic_write after the temporary file is complete and fsynced, just before
/// it is renamed onto the target: (temporary path, target path).
using BeforeRenameHook = void (*)(const std::string& temp_path, const std::string& target);
/// Installs a hook for crash tests (one that aborts the process there shows that the
/// previous file survives); nullptr removes it. Returns the previous hook. Not for
/// production use: every atomic write in the process calls it.
BeforeRenameHook set_before_rename_hook(BeforeRenameHook hook);

/// For bench/checkpoint_io only, to time a save the way torch.save writes (which never fsyncs): false makes
/// every atomic write in the process skip its fsyncs (the temporary file and rename stay). A power loss may
/// then leave a checkpoint empty or partial, so nothing but that benchmark turns it off; the default is
/// true. Returns the previous setting.
bool set_fsync_for_benchmark(bool on);

}  // namespace volt::checkpoint_io
