#pragma once
// Reading a torch.save-style zip archive (Volt checkpoints, Lightning checkpoints, torch.save(state_dict)
// files) with every check done before a value is trusted: the file's type, the zip's integrity
// (zip_integrity.h), then data.pkl through the weights-only reader (python_pickle.h), which runs nothing and
// checks every storage against its record and every tensor against its storage.
#include <memory>
#include <string>

#include "checkpoint_io/detail/python_pickle.h"
#include "volt/checkpoint_io/zip_integrity.h"

namespace volt::checkpoint_io::detail {

/// Throws CheckpointError "<role> '<path>' ..." when `path` is not a readable regular file (a folder, FIFO,
/// device, missing or unreadable), saying how to fix it.
void check_readable_file(const std::string& path, const std::string& role);

/// The root of the data.pkl of the archive mapped in `file` (already known to start like a zip), after
/// verify_zip. Tensors point into the mapping (and keep it alive) where their record is 64-byte aligned.
/// Throws CheckpointError naming `name` for a damaged archive or pickle, records outside the archive's
/// folder, a storage without a record.
PyValuePtr read_archive_pickle(const std::shared_ptr<const MappedFile>& file, const std::string& name);

/// "<role> '<path>' (<n> bytes)": how messages name a file.
std::string file_label(const std::string& path, const std::string& role);

}  // namespace volt::checkpoint_io::detail
