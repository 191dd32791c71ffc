#include "volt/checkpoint_io/torch_checkpoint_io.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <vector>

#include <caffe2/serialize/inline_container.h>

#include "checkpoint_io/detail/checkpoint_layout.h"
#include "checkpoint_io/detail/pickle_writer.h"
#include "checkpoint_io/detail/torch_archive.h"
#include "checkpoint_io/detail/zip_writer.h"
#include "volt/checkpoint_io/zip_integrity.h"
#include "volt/core/error.h"
#include "volt/core/error_boundary.h"
#include "volt/core/file_check.h"
#include "volt/core/printable.h"

namespace fs = std::filesystem;

namespace volt::checkpoint_io {
namespace {

std::string os_error(const std::string& what, const std::string& path) {
  return what + " '" + path + "': " + std::strerror(errno);
}

void fsync_dir(const fs::path& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;  // best effort: some filesystems refuse to open folders
  ::fsync(fd);
  ::close(fd);
}

std::atomic<BeforeRenameHook> g_before_rename{nullptr};
std::atomic<bool> g_fsync{true};

/// The writer's pid of a temporary file named ".<target>.tmp.<pid>" or
/// ".<target>.tmp.<pid>.<n>" (for `name` = target; any target when `name` is empty), else 0.
long temp_file_writer(const std::string& entry, const std::string& name) {
  if (entry.size() < 2 || entry[0] != '.') return 0;
  size_t rest_at = 0;
  if (!name.empty()) {
    const std::string prefix = "." + name + ".tmp.";
    if (entry.compare(0, prefix.size(), prefix) != 0) return 0;
    rest_at = prefix.size();
  } else {
    const auto tmp = entry.rfind(".tmp.");
    if (tmp == std::string::npos || tmp == 0) return 0;
    rest_at = tmp + 5;
  }
  const std::string rest = entry.substr(rest_at);
  if (rest.empty() || !std::isdigit(static_cast<unsigned char>(rest[0]))) return 0;
  char* end_ptr = nullptr;
  const long pid = std::strtol(rest.c_str(), &end_ptr, 10);
  if (pid <= 0) return 0;
  if (*end_ptr == '\0') return pid;
  if (*end_ptr != '.') return 0;
  const char* counter = end_ptr + 1;
  if (*counter == '\0') return 0;
  for (const char* c = counter; *c != '\0'; ++c) {
    if (!std::isdigit(static_cast<unsigned char>(*c))) return 0;
  }
  return pid;
}

bool process_is_gone(long pid) {
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

/// Removes ".<name>.tmp.<pid>.<n>" files that a process which no longer exists left
/// behind when it died between creating and renaming them (a crash, SIGKILL). Files of
/// live processes (this one, or another writer) are left alone.
void remove_orphaned_temp_files(const fs::path& dir, const std::string& name) {
  std::error_code ec;
  for (fs::directory_iterator it(dir.empty() ? fs::path(".") : dir, ec), end; !ec && it != end; it.increment(ec)) {
    const long pid = temp_file_writer(it->path().filename().string(), name);
    if (pid > 0 && process_is_gone(pid)) {
      std::error_code ignored;
      fs::remove(it->path(), ignored);
    }
  }
}

int64_t remove_dead_temp_files_under(const fs::path& dir, int depth, int64_t& budget) {
  int64_t removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end && budget > 0; it.increment(ec), --budget) {
    std::error_code kind_ec;
    const auto status = it->symlink_status(kind_ec);
    if (kind_ec) continue;
    if (fs::is_directory(status)) {
      if (depth > 0) removed += remove_dead_temp_files_under(it->path(), depth - 1, budget);
      continue;
    }
    if (!fs::is_regular_file(status)) continue;
    const long pid = temp_file_writer(it->path().filename().string(), "");
    if (pid > 0 && process_is_gone(pid)) {
      std::error_code ignored;
      if (fs::remove(it->path(), ignored)) ++removed;
    }
  }
  return removed;
}

}  // namespace

int64_t remove_dead_writers_temp_files(const std::string& root) {
  if (file_kind(root) != FileKind::kDirectory) return 0;
  // A bounded scan: the root may be a large shared folder.
  int64_t budget = 100000;
  return remove_dead_temp_files_under(fs::path(root), 4, budget);
}

BeforeRenameHook set_before_rename_hook(BeforeRenameHook hook) {
  return g_before_rename.exchange(hook);
}

bool set_fsync_for_benchmark(bool on) {
  return g_fsync.exchange(on);
}

namespace {

/// Receives the file's bytes in pieces; false when the write failed (errno kept).
using ByteSink = std::function<bool(const void*, size_t)>;

/// atomic_write, with the bytes produced piece by piece by `produce` straight into the
/// temporary file (a 400 MB checkpoint is never held twice in memory). An exception from
/// `produce` or a failed write removes the temporary file and leaves the target alone.
void atomic_write_stream(const std::string& path, const std::function<void(const ByteSink&)>& produce) {
  const fs::path target(path);
  const fs::path dir = target.parent_path();
  std::error_code ec;
  if (!dir.empty()) {
    fs::create_directories(dir, ec);
    if (ec) throw Error("cannot create folder '" + dir.string() + "' for '" + path + "': " + ec.message());
  }
  static std::atomic<unsigned> counter{0};
  const fs::path tmp =
      (dir.empty() ? fs::path(".") : dir) /
      ("." + target.filename().string() + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(os_error("cannot create temporary file", tmp.string()));
  int write_errno = 0;
  const bool durable = g_fsync.load();
  // Written so far, and up to where the kernel was asked to start writing back: the disk works while the
  // rest is produced, so the fsync at the end waits only for the tail.
  off_t written = 0, flushed = 0;
  constexpr off_t kWritebackEvery = off_t{8} << 20;
  const ByteSink sink = [&](const void* bytes, size_t size) {
    if (write_errno != 0) return false;
    const char* p = static_cast<const char*>(bytes);
    while (size > 0) {
      const ssize_t n = ::write(fd, p, size);
      if (n < 0) {
        if (errno == EINTR) continue;
        write_errno = errno;
        return false;
      }
      p += n;
      size -= static_cast<size_t>(n);
      written += n;
    }
#if defined(__linux__)
    if (durable && written - flushed >= kWritebackEvery) {
      // Only a hint (it waits for nothing and its failure changes nothing): the fsync below is the guarantee.
      ::sync_file_range(fd, flushed, written - flushed, SYNC_FILE_RANGE_WRITE);
      flushed = written;
    }
#endif
    return true;
  };
  auto fail = [&](const std::string& msg) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw Error(msg);
  };
  try {
    produce(sink);
  } catch (const std::exception& e) {
    if (write_errno != 0) errno = write_errno;
    fail(write_errno != 0 ? os_error("cannot write", tmp.string()) : std::string(e.what()));
  }
  if (write_errno != 0) {
    errno = write_errno;
    fail(os_error("cannot write", tmp.string()));
  }
  if ((durable && ::fsync(fd) != 0) || ::close(fd) != 0) {
    const std::string msg = os_error("cannot flush", tmp.string());
    ::unlink(tmp.c_str());
    throw Error(msg);
  }
  if (const BeforeRenameHook hook = g_before_rename.load()) hook(tmp.string(), path);
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    const std::string msg = os_error("cannot rename temporary file onto", path);
    ::unlink(tmp.c_str());
    throw Error(msg);
  }
  if (durable) fsync_dir(dir);
  remove_orphaned_temp_files(dir, target.filename().string());
}

/// The mapped file as LibTorch's zip reader sees it.
}  // namespace

void atomic_write(const std::string& path, const void* bytes, size_t size) {
  atomic_write_stream(path, [&](const ByteSink& sink) { sink(bytes, size); });
}

void TorchCheckpointIO::save_checkpoint(const Checkpoint& checkpoint, const std::string& path) {
  const FileKind kind = file_kind(path);
  if (path.empty() || (kind != FileKind::kMissing && kind != FileKind::kRegular)) {
    throw CheckpointError("cannot save a checkpoint to " + quote_path(path) + ": " +
                          (path.empty() ? std::string("the path is empty") : std::string("it is ") + describe(kind)) +
                          ". Give a file path such as runs/last.ckpt.");
  }
  if (const std::string why = folder_problem(fs::path(path).parent_path().string(), "the checkpoint's folder");
      !why.empty()) {
    throw CheckpointError("cannot save a checkpoint to " + quote_path(path) + ": " + why);
  }
  try {
    save_archive(checkpoint, path);
  } catch (...) {
    rethrow_as_volt_error("saving the checkpoint " + quote_path(path), ErrorKind::kCheckpoint);
  }
}

void TorchCheckpointIO::save_archive(const Checkpoint& checkpoint, const std::string& path) {
  // The dictionary Lightning writes, pickled as torch.save pickles it (every check before the file is made).
  std::vector<at::Tensor> storages;
  const std::string pickle = detail::write_pickle(*detail::checkpoint_to_tree(checkpoint), storages);
  std::vector<std::pair<size_t, uint64_t>> sizes = {{8, pickle.size()}, {9, 6}};
  for (size_t i = 0; i < storages.size(); ++i) {
    sizes.emplace_back(5 + std::to_string(i).size(), static_cast<uint64_t>(storages[i].nbytes()));
  }
  const bool small = detail::ZipWriter::fits(sizes);
  try {
    atomic_write_stream(path, [&](const ByteSink& sink) {
      // torch.save's records and order: data.pkl, byteorder (PyTorch 2.x), data/<key>; the writer adds version.
      static const char kLittle[] = "little";
      auto records = [&](auto& writer) {
        writer.writeRecord("data.pkl", pickle.data(), pickle.size());
        writer.writeRecord("byteorder", kLittle, sizeof(kLittle) - 1);
        for (size_t i = 0; i < storages.size(); ++i) {
          const at::Tensor& t = storages[i];
          writer.writeRecord("data/" + std::to_string(i), t.data_ptr(),
                             static_cast<size_t>(t.numel()) * t.element_size());
        }
        writer.writeEndOfFile();
      };
      if (small) {
        // Below 4 GiB: Volt's writer (the same bytes, a fast CRC-32, no copy; zip_writer.h).
        struct Adapter {
          detail::ZipWriter zip;
          void writeRecord(const std::string& name, const void* data, size_t size) {
            zip.write_record(name, data, size);
          }
          void writeEndOfFile() { zip.finish(); }
        } writer{detail::ZipWriter([&](const void* bytes, size_t size) { sink(bytes, size); })};
        records(writer);
      } else {
        // Zip64 sizes and offsets: LibTorch's writer. A failed write is remembered by the sink and raised after
        // the archive is done: reporting it to the zip writer would make its destructor throw (terminate).
        caffe2::serialize::PyTorchStreamWriter writer([&](const void* bytes, size_t size) -> size_t {
          sink(bytes, size);
          return size;
        });
        records(writer);
      }
    });
  } catch (const Error& e) {
    throw CheckpointError(std::string("saving checkpoint failed: ") + e.what());
  }
}

Checkpoint TorchCheckpointIO::load_checkpoint(const std::string& path) {
  detail::check_readable_file(path, "checkpoint");
  const std::string name = detail::file_label(path, "checkpoint");
  // One mapping for the integrity check and the read: what was verified is what is read, and tensors point
  // into it (copy-on-write) instead of being copied.
  const auto file = std::make_shared<const MappedFile>(path, name);
  if (!looks_like_zip(file->data(), file->size())) {
    throw CheckpointError(name +
                          " is not a readable Volt checkpoint (truncated or not a checkpoint): it is not a zip "
                          "archive, which torch.save, Lightning and Volt write. Give a .ckpt file that Volt or "
                          "Lightning wrote.");
  }
  try {
    return detail::checkpoint_from_tree(*detail::read_archive_pickle(file, name), name);
  } catch (const CheckpointError&) {
    throw;
  } catch (...) {
    rethrow_as_volt_error(name + " has entries of the wrong type; it was not written by Volt or is damaged",
                          ErrorKind::kCheckpoint);
  }
}

void TorchCheckpointIO::remove_checkpoint(const std::string& path) {
  std::error_code ec;
  fs::remove(path, ec);
  if (ec) throw CheckpointError("cannot remove checkpoint '" + path + "': " + ec.message());
}

}  // namespace volt::checkpoint_io
