// Reading a torch.save-style archive with every check done first (see torch_archive.h).
#include "checkpoint_io/detail/torch_archive.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>

#include "volt/core/error.h"
#include "volt/core/file_check.h"
#include "volt/core/printable.h"

namespace fs = std::filesystem;

namespace volt::checkpoint_io::detail {

std::string file_label(const std::string& path, const std::string& role) {
  std::error_code size_ec;
  const auto size = static_cast<int64_t>(fs::file_size(path, size_ec));
  return role + " " + quote_path(path) + " (" + std::to_string(size) + " bytes)";
}

void check_readable_file(const std::string& path, const std::string& role) {
  // By type first: opening a FIFO would wait for a writer, a folder or device is no checkpoint.
  if (const std::string why =
          regular_file_problem(path, role, "Check the path (ckpt_path) or list the folder for .ckpt files.");
      !why.empty()) {
    throw CheckpointError(why);
  }
  if (::access(path.c_str(), R_OK) != 0) {
    throw CheckpointError(role + " " + quote_path(path) + " cannot be opened: " + std::strerror(errno) +
                          ". Check the file's permissions.");
  }
}

PyValuePtr read_archive_pickle(const std::shared_ptr<const MappedFile>& mapping, const std::string& name) {
  const MappedFile& file = *mapping;
  const auto records = verify_zip(file.data(), file.size(), name);
  // The archive's folder is the prefix of its data.pkl record ("archive/" in PyTorch 2.x).
  std::string prefix;
  const ZipRecord* pickle = nullptr;
  for (const auto& r : records) {
    const auto slash = r.name.find('/');
    if (slash != std::string::npos && r.name.compare(slash, std::string::npos, "/data.pkl") == 0) {
      if (pickle) throw CheckpointError(name + " has two data.pkl records; it is not one torch.save archive.");
      pickle = &r;
      prefix = r.name.substr(0, slash + 1);
    }
  }
  if (!pickle)
    throw CheckpointError(name +
                          " is not a readable Volt checkpoint (nor any torch.save file): it is a zip archive without a "
                          "data.pkl record, which torch.save, Lightning and Volt always write.");
  std::map<std::string, const ZipRecord*> by_name;
  for (const auto& r : records) {
    if (r.name.compare(0, prefix.size(), prefix) != 0) {
      throw CheckpointError(name + " has record " + quote_path(r.name) + " outside its folder " + quote_path(prefix) +
                            "; it is not one torch.save archive.");
    }
    by_name[r.name] = &r;
  }
  const StorageLoader storage = [&](const std::string& key) -> StorageBytes {
    const auto it = by_name.find(prefix + "data/" + key);
    if (it == by_name.end()) {
      throw CheckpointError(name + " names a storage " + quote_path(key) + " that has no record; the file is damaged.");
    }
    return {file.data() + it->second->data_offset, static_cast<size_t>(it->second->size), mapping};
  };
  return read_python_pickle(file.data() + pickle->data_offset, static_cast<size_t>(pickle->size), storage, name);
}

}  // namespace volt::checkpoint_io::detail
