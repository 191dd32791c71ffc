#pragma once
// Files a user names (--config FILE, volt inspect FILE, volt new --options FILE): the type is
// checked before anything reads them. open() on a FIFO blocks until a writer comes, /dev/zero
// never ends, and a folder opens but reads as an error that does not say "folder". Header-only
// and free of LibTorch: the `volt` front end and the project generator use it too.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>

#include "volt/core/printable.h"

namespace volt {

/// What kind of thing st is, for a message: "a folder", "a FIFO (named pipe)", ...
inline std::string stat_kind_text(const struct stat& st) {
  if (S_ISREG(st.st_mode)) return "a regular file";
  if (S_ISDIR(st.st_mode)) return "a folder";
  if (S_ISFIFO(st.st_mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(st.st_mode)) return "a character device";
  if (S_ISBLK(st.st_mode)) return "a block device";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  return "not a regular file";
}

/// Why path cannot be read as an input file, or "" when it is a regular file (symbolic links
/// are followed). The text follows the quoted path: "'x' is a folder, not a file". Never opens it.
inline std::string input_file_problem(const std::string& path) {
  if (path.empty()) return "is an empty path; give a file name";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return "does not exist";
    if (errno == ENOTDIR) return "does not exist (a part of the path before the file name is a file, not a folder)";
    return std::string("cannot be examined: ") + std::strerror(errno);
  }
  if (S_ISREG(st.st_mode)) return "";
  return "is " + stat_kind_text(st) + ", not a regular file";
}

/// Reads path whole into out when it is a regular file of at most max_bytes. Returns "" on
/// success, else why not (as input_file_problem). Opened with O_NONBLOCK and checked with fstat,
/// so a FIFO put in the file's place after a check does not block the reader either.
inline std::string read_input_file(const std::string& path, std::string& out, std::size_t max_bytes) {
  if (std::string problem = input_file_problem(path); !problem.empty()) return problem;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::string("cannot be opened: ") + std::strerror(errno);
  struct stat st {};
  std::string problem;
  if (::fstat(fd, &st) != 0) {
    problem = std::string("cannot be examined: ") + std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    problem = "is " + stat_kind_text(st) + ", not a regular file";
  } else if (static_cast<unsigned long long>(st.st_size) > max_bytes) {
    problem = "has " + std::to_string(st.st_size) + " bytes, more than the " + std::to_string(max_bytes) +
              " this reader accepts";
  } else {
    std::string text;
    char buf[65536];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        problem = std::string("cannot be read: ") + std::strerror(errno);
        break;
      }
      if (n == 0) break;
      text.append(buf, static_cast<std::size_t>(n));
      if (text.size() > max_bytes) {
        problem = "has more than the " + std::to_string(max_bytes) + " bytes this reader accepts";
        break;
      }
    }
    if (problem.empty()) out = std::move(text);
  }
  ::close(fd);
  return problem;
}

}  // namespace volt
