#pragma once
/// Integrity of the zip archives that torch.save and Volt write (checkpoints, state_dict
/// files), checked before LibTorch reads a byte of them. LibTorch's reader skips the
/// CRC-32 that every zip record carries, so a flipped bit in a tensor went unnoticed.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace volt::checkpoint_io {

/// The zip CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320) of `size` bytes, continuing
/// from `crc` (0 to start). crc32("123456789") is 0xCBF43926. zlib's implementation.
uint32_t crc32(const void* data, size_t size, uint32_t crc = 0);

/// One record (file) of a zip archive, as its central directory describes it.
struct ZipRecord {
  std::string name;            ///< e.g. "archive/data/3"
  uint64_t header_offset = 0;  ///< where its local header starts
  uint64_t data_offset = 0;    ///< where its bytes start
  uint64_t size = 0;           ///< its bytes (records are stored, not compressed)
  uint32_t crc = 0;            ///< CRC-32 of its bytes
};

/// Checks an archive as PyTorch's zip writer makes it, byte for byte: the end of central
/// directory record (and the Zip64 end record and locator), every central directory entry,
/// every local header (and data descriptor) against its entry, that the records, the
/// central directory and the end records tile the file without gap, overlap or trailing
/// bytes, and every record's CRC-32 and size. Fields PyTorch writes as constants (version
/// made by, attributes, disk numbers, the alignment padding "FB" extra field full of 'Z')
/// must hold them, so a flipped bit anywhere is found. Returns the records in file order.
/// Throws CheckpointError "<what> is damaged: <the record or structure> <what differs>."
/// `what` names the file in messages, e.g. "checkpoint 'a.ckpt' (1234 bytes)".
std::vector<ZipRecord> verify_zip(const unsigned char* bytes, size_t size, const std::string& what);

/// Whether `bytes` look like a zip archive: a local header signature "PK\3\4" or an end record first (an
/// empty archive), or an end-of-central-directory record as its last 22 bytes (a damaged start).
bool looks_like_zip(const unsigned char* bytes, size_t size);

/// A regular file mapped into memory, private: the mapping may be written (copy on write, for tensors that
/// point into it), the file never is. The whole file is mapped and its pages read at once (MAP_POPULATE).
/// One open file descriptor for the check and the read, so what was verified is what is
/// read even if another writer renames a new file over the path meanwhile.
class MappedFile {
 public:
  /// Opens and maps `path`. Throws CheckpointError naming `what` when it cannot.
  MappedFile(const std::string& path, const std::string& what);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace volt::checkpoint_io
