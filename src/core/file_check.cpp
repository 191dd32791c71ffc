#include "volt/core/file_check.h"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>

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

namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 when it is not one.
size_t utf8_length(const std::string& s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  size_t n = 0;
  unsigned min = 0;
  unsigned cp = 0;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) n = 2, min = 0x80, cp = c & 0x1F;
  else if ((c & 0xF0) == 0xE0) n = 3, min = 0x800, cp = c & 0x0F;
  else if ((c & 0xF8) == 0xF0) n = 4, min = 0x10000, cp = c & 0x07;
  else return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;  // overlong, too big, surrogate
  return n;
}

}  // namespace

std::string quote_path(const std::string& path) {
  std::string out = "'";
  char hex[5];
  for (size_t i = 0; i < path.size();) {
    const auto c = static_cast<unsigned char>(path[i]);
    const size_t n = utf8_length(path, i);
    if (n == 0 || c < 0x20 || c == 0x7F) {
      std::snprintf(hex, sizeof(hex), "\\x%02x", c);
      out += hex;
      ++i;
    } else if (c == '\'' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else {
      out.append(path, i, n);
      i += n;
    }
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
