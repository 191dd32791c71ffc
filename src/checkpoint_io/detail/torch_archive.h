#pragma once
// Reading a torch.save-style zip archive (Volt checkpoints, Lightning checkpoints, torch.save(state_dict)
// files) with every check done before LibTorch's unpickler trusts it: the file's type, the zip's integrity
// (zip_integrity.h), the pickle's opcodes, and every tensor against the record that holds its bytes.
#include <map>
#include <string>

#include <ATen/core/ivalue.h>

namespace volt::checkpoint_io::detail {

/// The root object of an archive's data.pkl.
struct TorchArchive {
  c10::IValue root;
};

/// Reads `path`. `role` names it in messages ("checkpoint", "weights file"), `kind` is what it should be
/// ("Volt checkpoint") and `expected` what to give instead ("a .ckpt file that Volt wrote"). Throws CheckpointError
/// "<role> '<path>' (<n> bytes) ..." for a path that is not a readable regular file, a damaged archive or pickle, a
/// tensor whose shape reaches past the bytes of its record, or anything LibTorch's reader refuses (its first line,
/// never an internal assert).
TorchArchive read_torch_archive(const std::string& path, const std::string& role, const std::string& kind,
                                const std::string& expected);

/// "<role> '<path>' (<n> bytes)": how messages name a file.
std::string file_label(const std::string& path, const std::string& role);

}  // namespace volt::checkpoint_io::detail
