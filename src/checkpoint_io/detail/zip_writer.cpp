#include "checkpoint_io/detail/zip_writer.h"

#include <algorithm>
#include <string>

#include <caffe2/serialize/versions.h>

#include "volt/checkpoint_io/zip_integrity.h"
#include "volt/core/error.h"

namespace volt::checkpoint_io::detail {
namespace {

constexpr size_t kLocalSize = 30, kCentralSize = 46, kDescriptorSize = 16;
constexpr size_t kZip64EndSize = 56, kLocatorSize = 20, kEndSize = 22;
constexpr size_t kAlignment = 64;    // PyTorch's kFieldAlignment
constexpr uint16_t kFlags = 0x0808;  // data descriptor follows; UTF-8 names
constexpr uint16_t kUtf8 = 0x0800;
constexpr uint64_t kLimit = 0xFFFFFFFF;  // past it, Zip64 fields (LibTorch's writer)

void put16(std::string& out, uint64_t v) {
  out += static_cast<char>(v & 0xff);
  out += static_cast<char>((v >> 8) & 0xff);
}
void put32(std::string& out, uint64_t v) {
  put16(out, v & 0xffff);
  put16(out, (v >> 16) & 0xffff);
}
void put64(std::string& out, uint64_t v) {
  put32(out, v & 0xffffffff);
  put32(out, v >> 32);
}

/// Bytes of 'Z' padding after the "FB" block header so that data starting after a local header at `at`
/// with a name of `name_size` bytes begins at a multiple of 64 (PyTorch's getPadding).
size_t padding(uint64_t at, size_t name_size) {
  const uint64_t start = at + kLocalSize + name_size + 4;
  return static_cast<size_t>((kAlignment - start % kAlignment) % kAlignment);
}

std::string version_text() {
  return std::to_string(caffe2::serialize::kMinProducedFileFormatVersion) + "\n";
}

}  // namespace

bool ZipWriter::fits(const std::vector<std::pair<size_t, uint64_t>>& name_and_data_sizes) {
  // A bound: every record's header, the most padding, data and descriptor, its central entry; the ends.
  uint64_t total = kZip64EndSize + kLocatorSize + kEndSize;
  auto add = [&](size_t name, uint64_t size) {
    if (size >= kLimit) return false;
    total += kLocalSize + 2 * (std::string("archive/").size() + name) + 4 + kAlignment + size + kDescriptorSize +
             kCentralSize;
    return total < kLimit;
  };
  for (const auto& [name, size] : name_and_data_sizes) {
    if (!add(name, size)) return false;
  }
  return add(std::string("version").size(), version_text().size());
}

ZipWriter::ZipWriter(Sink sink, std::string archive) : sink_(std::move(sink)), archive_(std::move(archive)) {}

void ZipWriter::emit(const void* data, size_t size) {
  if (size == 0) return;
  sink_(data, size);
  at_ += size;
}

void ZipWriter::write_record(const std::string& name, const void* data, size_t size) {
  if (finished_) throw Error("ZipWriter::write_record after finish");
  const std::string full = archive_ + "/" + name;
  const uint64_t offset = at_;
  if (offset >= kLimit || size >= kLimit || full.size() > 0xffff) {
    throw Error("ZipWriter: record '" + full + "' needs Zip64 fields; check ZipWriter::fits first");
  }
  const size_t pad = padding(offset, full.size());
  std::string header;
  header.reserve(kLocalSize + full.size() + 4 + pad);
  put32(header, 0x04034b50);
  // An empty record has no data descriptor (miniz writes its zero CRC and sizes in the headers).
  const uint16_t flags = size == 0 ? kUtf8 : kFlags;
  put16(header, 0);      // version needed
  put16(header, flags);  // sizes and CRC follow in the data descriptor (when there are bytes)
  put16(header, 0);      // stored
  put32(header, 0);      // time and date
  put32(header, 0);      // CRC-32
  put32(header, 0);      // compressed size
  put32(header, 0);      // size
  put16(header, full.size());
  put16(header, 4 + pad);
  header += full;
  put16(header, 0x4246);  // "FB"
  put16(header, pad);
  header.append(pad, 'Z');
  emit(header.data(), header.size());
  // The CRC of each piece just before it goes out, while it is in cache.
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t crc = 0;
  for (size_t done = 0; done < size;) {
    const size_t n = std::min(kPiece, size - done);
    crc = crc32(p + done, n, crc);
    emit(p + done, n);
    done += n;
  }
  if (size != 0) {
    std::string descriptor;
    put32(descriptor, 0x08074b50);
    put32(descriptor, crc);
    put32(descriptor, size);
    put32(descriptor, size);
    emit(descriptor.data(), descriptor.size());
  }
  entries_.push_back({full, crc, size, offset, flags});
}

void ZipWriter::finish() {
  if (finished_) return;
  const std::string version = version_text();
  write_record("version", version.data(), version.size());
  finished_ = true;
  const uint64_t cd_offset = at_;
  std::string cd;
  for (const Entry& e : entries_) {
    put32(cd, 0x02014b50);
    put16(cd, 0);  // version made by
    put16(cd, 0);  // version needed
    put16(cd, e.flags);
    put16(cd, 0);  // stored
    put32(cd, 0);  // time and date
    put32(cd, e.crc);
    put32(cd, e.size);
    put32(cd, e.size);
    put16(cd, e.name.size());
    put16(cd, 0);  // extra
    put16(cd, 0);  // comment
    put16(cd, 0);  // disk
    put16(cd, 0);  // internal attributes
    put32(cd, 0);  // external attributes
    put32(cd, e.offset);
    cd += e.name;
  }
  const uint64_t cd_size = cd.size();
  const uint64_t zip64_at = cd_offset + cd_size;
  const uint64_t n = entries_.size();
  put32(cd, 0x06064b50);  // Zip64 end of central directory
  put64(cd, kZip64EndSize - 12);
  put16(cd, 0x031e);  // made by
  put16(cd, 0x002d);  // needed
  put32(cd, 0);
  put32(cd, 0);
  put64(cd, n);
  put64(cd, n);
  put64(cd, cd_size);
  put64(cd, cd_offset);
  put32(cd, 0x07064b50);  // its locator
  put32(cd, 0);
  put64(cd, zip64_at);
  put32(cd, 1);
  put32(cd, 0x06054b50);  // end of central directory
  put16(cd, 0);
  put16(cd, 0);
  put16(cd, std::min<uint64_t>(n, 0xffff));
  put16(cd, std::min<uint64_t>(n, 0xffff));
  put32(cd, cd_size);
  put32(cd, cd_offset);
  put16(cd, 0);
  emit(cd.data(), cd.size());
}

}  // namespace volt::checkpoint_io::detail
