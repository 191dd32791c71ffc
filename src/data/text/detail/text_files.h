#pragma once
// Private helpers of src/data/text: UTF-8 decoding, a 64-bit hash, whole-file reads and atomic writes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace volt::data::detail {

/// The code point starting at text[*pos], advancing *pos past it; -1 (and *pos unchanged) when the
/// bytes there are not valid UTF-8 (a stray continuation byte, a truncated or overlong sequence, a
/// surrogate, or a value above U+10FFFF).
int32_t next_code_point(std::string_view text, size_t* pos);
/// Appends the UTF-8 of `cp` to `out`.
void append_utf8(char32_t cp, std::string* out);
/// FNV-1a, 64 bits.
uint64_t fnv1a64(std::string_view bytes, uint64_t seed = 14695981039346656037ull);
/// `bytes` as 16 lower-case hex digits.
std::string hex64(uint64_t value);
/// The whole file; DataError naming it (with `what`, e.g. "corpus") when it is missing, not a regular
/// file or unreadable.
std::string read_file(const std::string& path, const std::string& what);

/// A file written as a whole or not at all: bytes go to a temporary file beside `path`; commit()
/// fsyncs it, renames it over `path` and fsyncs the folder. Destroyed without commit(), the
/// temporary file is removed. Errors are DataErrors naming `path` and `what`.
class AtomicFile {
 public:
  AtomicFile(std::string path, std::string what);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  void write(const void* bytes, size_t size);
  /// Overwrites bytes already written at `offset` (a header completed at the end).
  void write_at(uint64_t offset, const void* bytes, size_t size);
  void commit();

 private:
  [[noreturn]] void fail(const std::string& action, int error);
  std::string path_;
  std::string what_;
  std::string tmp_;
  int fd_ = -1;
};

}  // namespace volt::data::detail
