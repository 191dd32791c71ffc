#include "data/text/detail/text_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "volt/core/error.h"

namespace volt::data::detail {

int32_t next_code_point(std::string_view text, size_t* pos) {
  const size_t i = *pos;
  const auto b0 = static_cast<unsigned char>(text[i]);
  if (b0 < 0x80) {
    *pos = i + 1;
    return b0;
  }
  int length;
  uint32_t cp;
  if ((b0 & 0xE0) == 0xC0) {
    length = 2, cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    length = 3, cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    length = 4, cp = b0 & 0x07;
  } else {
    return -1;
  }
  if (i + length > text.size()) return -1;
  for (int k = 1; k < length; ++k) {
    const auto b = static_cast<unsigned char>(text[i + k]);
    if ((b & 0xC0) != 0x80) return -1;
    cp = (cp << 6) | (b & 0x3F);
  }
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[length] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
  *pos = i + length;
  return static_cast<int32_t>(cp);
}

void append_utf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

uint64_t fnv1a64(std::string_view bytes, uint64_t seed) {
  uint64_t h = seed;
  for (char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

std::string hex64(uint64_t value) {
  static const char* kDigits = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4) out[i] = kDigits[value & 0xF];
  return out;
}

std::string read_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    throw DataError("the " + what + " '" + path + "' does not exist. Check the path.");
  }
  if (!std::filesystem::is_regular_file(status)) {
    throw DataError("the " + what + " '" + path + "' is not a regular file (a folder, device or FIFO).");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError("the " + what + " '" + path + "' cannot be opened: " + std::strerror(errno) + ".");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw DataError("reading the " + what + " '" + path + "' failed.");
  return std::move(buffer).str();
}

AtomicFile::AtomicFile(std::string path, std::string what) : path_(std::move(path)), what_(std::move(what)) {
  tmp_ = path_ + ".tmp-XXXXXX";
  fd_ = ::mkstemp(tmp_.data());
  if (fd_ < 0) {
    const int e = errno;
    throw DataError("cannot write the " + what_ + " '" + path_ + "': " + std::strerror(e) +
                    ". Check that its folder exists and is writable.");
  }
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

void AtomicFile::fail(const std::string& action, int error) {
  ::close(fd_);
  ::unlink(tmp_.c_str());
  fd_ = -1;
  throw DataError("cannot write the " + what_ + " '" + path_ + "' (" + action + "): " + std::strerror(error) + ".");
}

void AtomicFile::write(const void* bytes, size_t size) {
  const auto* p = static_cast<const char*>(bytes);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write", n < 0 ? errno : ENOSPC);
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void AtomicFile::write_at(uint64_t offset, const void* bytes, size_t size) {
  const auto* p = static_cast<const char*>(bytes);
  while (size > 0) {
    const ssize_t n = ::pwrite(fd_, p, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write", n < 0 ? errno : ENOSPC);
    p += n;
    offset += static_cast<uint64_t>(n);
    size -= static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  if (::fchmod(fd_, 0644) != 0) fail("chmod", errno);  // mkstemp makes it 0600
  if (::fsync(fd_) != 0) fail("fsync", errno);
  if (::close(fd_) != 0) {
    const int e = errno;
    fd_ = -1;
    ::unlink(tmp_.c_str());
    throw DataError("cannot write the " + what_ + " '" + path_ + "' (close): " + std::strerror(e) + ".");
  }
  fd_ = -1;
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp_.c_str());
    throw DataError("cannot write the " + what_ + " '" + path_ + "' (rename): " + std::strerror(e) + ".");
  }
  std::string folder = std::filesystem::path(path_).parent_path().string();
  if (folder.empty()) folder = ".";
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

}  // namespace volt::data::detail
