#include "volt/core/file_check.h"

#include <sys/stat.h>

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

}  // namespace volt
