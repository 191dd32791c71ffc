#pragma once
/// The loggers' one loop around write(2).
#include <unistd.h>

#include <cerrno>
#include <cstddef>

namespace volt::loggers::detail {

/// Writes all `size` bytes to `fd`, going on after short writes and EINTR. False, with
/// errno set, when a write fails.
inline bool write_fully(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace volt::loggers::detail
