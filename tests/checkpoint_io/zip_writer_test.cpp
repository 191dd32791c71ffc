// Volt's zip writer (src/checkpoint_io/detail/zip_writer.h) against LibTorch's PyTorchStreamWriter: the same
// records give the same archive byte for byte on LibTorch 1.13 (and on 2.x, which adds records of its own,
// the same records at the same offsets with the same bytes), for records that start on and off a 64-byte
// boundary, of 0 bytes, and spanning several of the CRC's pieces; the result passes verify_zip.
#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>

#include "checkpoint_io/detail/zip_writer.h"
#include "volt/checkpoint_io/zip_integrity.h"
#include "volt/core/compat.h"

namespace {

using volt::checkpoint_io::detail::ZipWriter;

std::vector<std::pair<std::string, std::string>> records() {
  std::vector<std::pair<std::string, std::string>> r;
  r.emplace_back("data.pkl", std::string("\x80\x02}q\x00.", 6));
  r.emplace_back("byteorder", "little");
  r.emplace_back("data/0", "");
  std::string big(ZipWriter::kPiece * 2 + 77, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 2654435761u) >> 13);
  r.emplace_back("data/1", big);
  r.emplace_back("data/2", std::string(63, 'x'));
  r.emplace_back("data/3", std::string(64 - 30 - 14 - 4, 'y'));  // the next header lands so its data needs no pad
  r.emplace_back("data/4", "z");
  return r;
}

std::string with_volt() {
  std::string out;
  ZipWriter w([&](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); });
  for (const auto& [name, bytes] : records()) w.write_record(name, bytes.data(), bytes.size());
  w.finish();
  return out;
}

std::string with_libtorch() {
  std::string out;
  {
    caffe2::serialize::PyTorchStreamWriter w([&](const void* p, size_t n) -> size_t {
      out.append(static_cast<const char*>(p), n);
      return n;
    });
    for (const auto& [name, bytes] : records()) w.writeRecord(name, bytes.data(), bytes.size());
    w.writeEndOfFile();
  }
  return out;
}

TEST(ZipWriter, WritesTheArchiveLibTorchsWriterWritesForTheSameRecords) {
  const std::string mine = with_volt();
  const std::string theirs = with_libtorch();
  const auto* m = reinterpret_cast<const unsigned char*>(mine.data());
  const auto* t = reinterpret_cast<const unsigned char*>(theirs.data());
  const auto a = volt::checkpoint_io::verify_zip(m, mine.size(), "volt's");
  const auto b = volt::checkpoint_io::verify_zip(t, theirs.size(), "libtorch's");
  ASSERT_EQ(a.size(), records().size() + 1);  // and version
  for (const auto& r : a) {
    const auto same = std::find_if(b.begin(), b.end(), [&](const auto& x) { return x.name == r.name; });
    ASSERT_NE(same, b.end()) << r.name;
    EXPECT_EQ(r.crc, same->crc) << r.name;
    EXPECT_EQ(r.size, same->size) << r.name;
    EXPECT_EQ(r.data_offset % 64, 0u) << r.name;
    EXPECT_EQ(std::memcmp(m + r.data_offset, t + same->data_offset, r.size), 0) << r.name;
    if (a.size() == b.size()) {
      EXPECT_EQ(r.header_offset, same->header_offset) << r.name;
    }
  }
#if !VOLT_TORCH_VERSION_AT_LEAST(2, 0)
  // Byte for byte (the first difference, not the archives, when they differ).
  EXPECT_EQ(mine.size(), theirs.size());
  const auto diff = std::mismatch(mine.begin(), mine.end(), theirs.begin(), theirs.end());
  EXPECT_TRUE(diff.first == mine.end()) << "first difference at byte " << (diff.first - mine.begin());
#endif
}

TEST(ZipWriter, FitsOnlyArchivesBelow4GiB) {
  EXPECT_TRUE(ZipWriter::fits({{8, 1000}, {6, uint64_t{1} << 31}}));
  EXPECT_FALSE(ZipWriter::fits({{8, 1000}, {6, 0xFFFFFFFFull}}));
  EXPECT_FALSE(ZipWriter::fits({{6, uint64_t{1} << 31}, {6, uint64_t{1} << 31}}));
}

}  // namespace
