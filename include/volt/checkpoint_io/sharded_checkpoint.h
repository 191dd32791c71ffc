#pragma once
#include <string>
#include <vector>

#include "volt/checkpoint_io/checkpoint_io.h"
#include "volt/core/checkpoint.h"

namespace volt::checkpoint_io {

/// A sharded checkpoint (fsdp with state_dict_type "sharded", docs/checkpoints.md): a folder holding
/// one ordinary checkpoint file per rank, "rank<r>.ckpt", in which every sharded tensor is that rank's
/// 1-D piece, and "meta.json", written last (a folder without it is an unfinished save), naming the
/// world size, the files and each sharded tensor's shape and piece size.
constexpr const char* kShardedMetaFile = kShardedCheckpointMetaFile;
constexpr const char* kShardedFormat = "volt-fsdp-sharded";

/// One sharded tensor of the checkpoint: its key, whole shape and the elements of each rank's piece
/// (ceil(numel / world size); the last piece zero-padded).
struct ShardedTensorInfo {
  std::string key;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  int64_t shard = 0;
};

/// "rank<r>.ckpt" in `dir`.
std::string shard_file(const std::string& dir, int64_t rank);
/// True when `path` is a folder with a meta.json of a sharded checkpoint.
bool is_sharded_checkpoint(const std::string& path);
/// Writes meta.json into `dir` atomically (rank 0, after every rank's file is there).
void write_sharded_meta(const std::string& dir, int64_t world_size, const std::vector<ShardedTensorInfo>& tensors,
                        const nlohmann::json& extra);
/// A save without collectives (OnExceptionCheckpoint after a rank failed: no barrier can be trusted).
/// After writing its own file, each rank writes "rank<r>.done" ({"world_size", "global_step"}) and
/// looks at every rank's marker: the rank that finds all `world_size` of them naming this save's
/// global step writes meta.json (two that find them at once write the same file, atomically). Markers
/// of an older save name another step and are not counted; a rank that never wrote its piece leaves
/// the folder without meta.json, which a load refuses, naming the ranks whose pieces are there.
/// Returns whether this rank wrote meta.json.
bool finish_sharded_save_without_collective(const std::string& dir, int64_t rank, int64_t world_size,
                                            int64_t global_step, const std::vector<ShardedTensorInfo>& tensors,
                                            const nlohmann::json& extra);
/// Empty unless `path` is a folder holding rank<r>.ckpt files but no meta.json (a sharded save that did
/// not finish); then a message naming the ranks whose files are there.
std::string unfinished_sharded_checkpoint(const std::string& path);
/// Reads every rank's file through `io` and joins the pieces: the ordinary checkpoint (rank 0's
/// file for everything not sharded), loadable by any strategy on any number of ranks. A missing
/// or short file, or a piece of the wrong size, is a CheckpointError naming it.
Checkpoint load_sharded_checkpoint(CheckpointIO& io, const std::string& dir);

}  // namespace volt::checkpoint_io
