#include "volt/checkpoint_io/sharded_checkpoint.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <ATen/ops/cat.h>

#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/core/error.h"

namespace volt::checkpoint_io {
namespace fs = std::filesystem;

std::string shard_file(const std::string& dir, int64_t rank) {
  return (fs::path(dir) / ("rank" + std::to_string(rank) + ".ckpt")).string();
}

bool is_sharded_checkpoint(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && is_checkpoint_path(path);
}

void write_sharded_meta(const std::string& dir, int64_t world_size, const std::vector<ShardedTensorInfo>& tensors,
                        const nlohmann::json& extra) {
  nlohmann::json meta = {{"format", kShardedFormat}, {"version", 1}, {"world_size", world_size}};
  auto files = nlohmann::json::array();
  for (int64_t r = 0; r < world_size; ++r) files.push_back(fs::path(shard_file(dir, r)).filename().string());
  meta["files"] = files;
  auto list = nlohmann::json::object();
  for (const auto& t : tensors) list[t.key] = {{"shape", t.shape}, {"numel", t.numel}, {"shard", t.shard}};
  meta["sharded_tensors"] = list;
  meta["extra"] = extra;
  const std::string text = meta.dump(1) + "\n";
  atomic_write((fs::path(dir) / kShardedMetaFile).string(), text.data(), text.size());
}

namespace {
std::string done_file(const std::string& dir, int64_t rank) {
  return (fs::path(dir) / ("rank" + std::to_string(rank) + ".done")).string();
}
}  // namespace

bool finish_sharded_save_without_collective(const std::string& dir, int64_t rank, int64_t world_size,
                                            int64_t global_step, const std::vector<ShardedTensorInfo>& tensors,
                                            const nlohmann::json& extra) {
  const nlohmann::json mine = {{"world_size", world_size}, {"global_step", global_step}};
  const std::string text = mine.dump() + "\n";
  atomic_write(done_file(dir, rank), text.data(), text.size());
  for (int64_t r = 0; r < world_size; ++r) {
    nlohmann::json other;
    try {
      std::ifstream in(done_file(dir, r));
      if (!in) return false;
      other = nlohmann::json::parse(in);
    } catch (const std::exception&) {
      return false;  // being written: its writer looks again after
    }
    if (!other.is_object() || other != mine) return false;  // another save's marker
  }
  write_sharded_meta(dir, world_size, tensors, extra);
  return true;
}

std::string unfinished_sharded_checkpoint(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec) || fs::exists(fs::path(path) / kShardedMetaFile, ec)) return "";
  std::vector<int64_t> ranks;
  for (int64_t r = 0; fs::is_regular_file(shard_file(path, r), ec); ++r) ranks.push_back(r);
  if (ranks.empty()) return "";
  std::string list;
  for (const int64_t r : ranks) list += (list.empty() ? "" : ", ") + std::to_string(r);
  return "checkpoint '" + path + "' is a sharded fsdp checkpoint whose save did not finish: meta.json is missing. "
         "The pieces of rank" + (ranks.size() > 1 ? "s " : " ") + list + " are there; a rank that failed before "
         "writing its piece leaves it incomplete. Resume from another checkpoint (ModelCheckpoint's).";
}

Checkpoint load_sharded_checkpoint(CheckpointIO& io, const std::string& dir) {
  const std::string meta_path = (fs::path(dir) / kShardedMetaFile).string();
  nlohmann::json meta;
  try {
    std::ifstream in(meta_path);
    meta = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw CheckpointError("sharded checkpoint '" + dir + "': " + meta_path + " is not readable JSON (" + e.what() +
                          "); the save did not finish or the file was damaged. Resume from another checkpoint.");
  }
  const int64_t world = meta.is_object() ? meta.value("world_size", int64_t{0}) : 0;
  if (!meta.is_object() || meta.value("format", std::string()) != kShardedFormat || world < 1 ||
      !meta.contains("sharded_tensors") || !meta["sharded_tensors"].is_object()) {
    throw CheckpointError("sharded checkpoint '" + dir + "': " + meta_path + " is not the metadata of a Volt "
                          "sharded checkpoint (format '" + std::string(kShardedFormat) + "', world_size >= 1, "
                          "sharded_tensors). Give the folder a sharded fsdp save wrote.");
  }
  std::vector<Checkpoint> parts;
  parts.reserve(static_cast<size_t>(world));
  for (int64_t r = 0; r < world; ++r) {
    const std::string file = shard_file(dir, r);
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) {
      throw CheckpointError("sharded checkpoint '" + dir + "' was written by " + std::to_string(world) +
                            " ranks, but rank " + std::to_string(r) + "'s file " + file +
                            " is missing. Copy every rank's file into the folder (on several machines without a "
                            "shared filesystem each rank wrote its own).");
    }
    parts.push_back(io.load_checkpoint(file));
  }
  Checkpoint whole = std::move(parts.front());
  for (const auto& [key, info] : meta["sharded_tensors"].items()) {
    const auto shape = info.value("shape", std::vector<int64_t>());
    const int64_t numel = info.value("numel", int64_t{-1});
    const int64_t shard = info.value("shard", int64_t{-1});
    std::vector<at::Tensor> pieces;
    for (int64_t r = 0; r < world; ++r) {
      const auto& tensors = r == 0 ? whole.tensors : parts[static_cast<size_t>(r)].tensors;
      const auto it = tensors.find(key);
      if (it == tensors.end() || it->second.numel() != shard) {
        throw CheckpointError("sharded checkpoint '" + dir + "': " + shard_file(dir, r) + " " +
                              (it == tensors.end() ? "lacks " + key
                                                   : "holds " + std::to_string(it->second.numel()) +
                                                         " elements of " + key + ", not " + std::to_string(shard)) +
                              ". The folder mixes files of different saves; resume from another checkpoint.");
      }
      pieces.push_back(it->second.reshape(-1));
    }
    at::Tensor joined = at::cat(pieces);
    if (numel < 0 || joined.numel() < numel) {
      throw CheckpointError("sharded checkpoint '" + dir + "': " + key + " has " + std::to_string(joined.numel()) +
                            " elements in its pieces but " + std::to_string(numel) + " in meta.json.");
    }
    whole.tensors[key] = joined.narrow(0, 0, numel).view(shape).clone();
  }
  if (whole.meta.is_object() && whole.meta.contains("volt") && whole.meta["volt"].is_object()) {
    whole.meta["volt"]["fsdp"]["state_dict_type"] = "sharded";
  }
  return whole;
}

}  // namespace volt::checkpoint_io
