#include "volt/core/file_check.h"

#include <ftw.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>

#include <filesystem>

#include "volt/core/printable.h"

namespace volt {

FileKind file_kind(const std::string& path) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return FileKind::kMissing;
  if (S_ISREG(st.st_mode)) return FileKind::kRegular;
  if (S_ISDIR(st.st_mode)) return FileKind::kDirectory;
  if (S_ISFIFO(st.st_mode)) return FileKind::kFifo;
  if (S_ISCHR(st.st_mode)) return FileKind::kCharDevice;
  if (S_ISBLK(st.st_mode)) return FileKind::kBlockDevice;
  if (S_ISSOCK(st.st_mode)) return FileKind::kSocket;
  return FileKind::kOther;
}

const char* describe(FileKind kind) {
  switch (kind) {
    case FileKind::kMissing: return "missing";
    case FileKind::kRegular: return "a regular file";
    case FileKind::kDirectory: return "a folder";
    case FileKind::kFifo: return "a FIFO (named pipe)";
    case FileKind::kCharDevice: return "a character device";
    case FileKind::kBlockDevice: return "a block device";
    case FileKind::kSocket: return "a socket";
    case FileKind::kOther: return "neither a file nor a folder";
  }
  return "unknown";
}

std::string quote_path(const std::string& path) {
  // One escaping rule for text from users (printable.h), plus the quote that delimits it.
  std::string out = "'";
  for (const char c : printable(path)) {
    if (c == '\'') out += '\\';
    out += c;
  }
  return out + "'";
}

std::string regular_file_problem(const std::string& path, const std::string& what, const std::string& hint) {
  const FileKind kind = file_kind(path);
  if (kind == FileKind::kRegular) return "";
  const std::string tail = hint.empty() ? "" : " " + hint;
  const std::string name = what + " " + quote_path(path);
  if (kind == FileKind::kMissing) return name + " does not exist." + tail;
  if (kind == FileKind::kDirectory) return name + " is a folder, not a file." + tail;
  return name + " is " + describe(kind) + ", not a regular file" +
         (kind == FileKind::kFifo ? " (reading it would wait for a writer)" : "") + "." + tail;
}

std::string folder_problem(const std::string& path, const std::string& what, const std::string& hint) {
  const FileKind kind = file_kind(path);
  if (kind == FileKind::kDirectory) return "";
  const std::string tail = hint.empty() ? "" : " " + hint;
  if (kind == FileKind::kMissing) {
    // It will be created: every part of the path that exists must be a folder.
    for (std::filesystem::path up = std::filesystem::path(path).parent_path(); !up.empty() && up != up.root_path();
         up = up.parent_path()) {
      const FileKind k = file_kind(up.string());
      if (k == FileKind::kDirectory) break;
      if (k != FileKind::kMissing) {
        return what + " " + quote_path(path) + " cannot be created: " + quote_path(up.string()) + " is " +
               (k == FileKind::kRegular ? "a file" : describe(k)) + ", not a folder." + tail;
      }
    }
    return "";
  }
  return what + " " + quote_path(path) + " is " + (kind == FileKind::kRegular ? "a file" : describe(kind)) +
         ", not a folder." + tail;
}

namespace {
// nftw takes a plain function: the walk's count and first error live here, one walk per thread.
thread_local std::uintmax_t removed_count = 0;
thread_local int first_errno = 0;

int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  if (std::remove(path) == 0) {
    ++removed_count;
  } else if (first_errno == 0) {
    first_errno = errno;
  }
  return 0;  // go on: remove what can be removed
}
}  // namespace

std::uintmax_t remove_tree(const std::string& path, std::error_code& ec) {
  ec.clear();
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) ec.assign(errno, std::generic_category());
    return 0;
  }
  removed_count = 0;
  first_errno = 0;
  // Depth first (a folder after its contents), links not followed, the walk stays on its file system.
  if (::nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) != 0 && first_errno == 0) {
    first_errno = errno;
  }
  if (first_errno != 0) ec.assign(first_errno, std::generic_category());
  return removed_count;
}

}  // namespace volt
