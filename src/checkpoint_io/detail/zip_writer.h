#pragma once
// The zip archive torch.save writes (PyTorch's PyTorchStreamWriter over miniz), streamed: per record a local
// header with PyTorch's "FB" padding block that puts the data at a multiple of 64 bytes, the bytes, a data
// descriptor with their CRC-32; then the central directory and the Zip64 end record, locator and end record
// PyTorch always writes. Byte for byte LibTorch 1.13's output for the same records (ZipWriter.* tests), but
// the CRC-32 is computed by checkpoint_io::crc32 (carry-less multiplication) on each piece just before it is
// written, while it is in cache, and big records are handed to the sink in pieces of kPiece bytes.
// For archives under 4 GiB only (no Zip64 sizes or offsets): fits() says whether one does.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace volt::checkpoint_io::detail {

class ZipWriter {
 public:
  /// Receives the archive's bytes in order.
  using Sink = std::function<void(const void*, size_t)>;
  /// Bytes of a record handed to the sink at once (CRC-32 computed over them first).
  static constexpr size_t kPiece = size_t{1} << 20;

  /// Whether records of these name lengths and sizes (with the "version" record) make an archive below
  /// 4 GiB, which this writer handles; otherwise use LibTorch's writer (Zip64 sizes and offsets).
  static bool fits(const std::vector<std::pair<size_t, uint64_t>>& name_and_data_sizes);

  /// `archive` is the folder every record goes in ("archive", as torch.save names it).
  ZipWriter(Sink sink, std::string archive = "archive");

  /// Appends the record `<archive>/<name>` with `size` bytes at `data`.
  void write_record(const std::string& name, const void* data, size_t size);
  /// Appends the "version" record LibTorch writes (its minimum produced format, "3\n"), the central
  /// directory and the end records. Nothing may be written after it.
  void finish();

 private:
  struct Entry {
    std::string name;
    uint32_t crc;
    uint64_t size;
    uint64_t offset;
    uint16_t flags;
  };
  void emit(const void* data, size_t size);

  Sink sink_;
  std::string archive_;
  uint64_t at_ = 0;
  std::vector<Entry> entries_;
  bool finished_ = false;
};

}  // namespace volt::checkpoint_io::detail
