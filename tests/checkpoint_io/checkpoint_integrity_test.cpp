// Checkpoint integrity on read (issue 17): every zip record's CRC-32 and sizes, the central directory, the
// local headers and the end records, checked before LibTorch reads the file. A bit flipped at 100 seeded
// positions of each part, and truncation at 100 offsets, is a CheckpointError naming the file, and nothing
// is written.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <ATen/ops/arange.h>
#include <ATen/ops/ones.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include "support/expect.h"
#include "support/temp_dir.h"
#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/checkpoint_io/zip_integrity.h"
#include "volt/core/error.h"

namespace fs = std::filesystem;
using volt::testing::contains;
using volt::testing::error_message;

namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<std::string> listing(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

uint32_t le32(const std::string& b, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

/// A Volt checkpoint with a few tensors, and where each part of its archive lies.
struct Archive {
  std::string bytes;
  std::vector<volt::checkpoint_io::ZipRecord> records;
  size_t cd_begin = 0, cd_end = 0;

  /// [begin, end) ranges of one kind of part.
  std::vector<std::pair<size_t, size_t>> tensor_data() const {
    std::vector<std::pair<size_t, size_t>> out;
    for (const auto& r : records) {
      if (contains(r.name, "/data/") && r.size > 0) out.emplace_back(r.data_offset, r.data_offset + r.size);
    }
    return out;
  }
  std::vector<std::pair<size_t, size_t>> pickle() const {
    for (const auto& r : records) {
      if (contains(r.name, "data.pkl")) return {{r.data_offset, r.data_offset + r.size}};
    }
    return {};
  }
  std::vector<std::pair<size_t, size_t>> local_headers() const {
    std::vector<std::pair<size_t, size_t>> out;
    for (const auto& r : records) out.emplace_back(r.header_offset, r.data_offset);
    return out;
  }
  std::vector<std::pair<size_t, size_t>> central_directory() const { return {{cd_begin, cd_end}}; }
};

Archive saved_archive(const volt::testing::TempDir& dir) {
  volt::Checkpoint c;
  c.tensors["state_dict.w"] = at::arange(64, at::kFloat).reshape({8, 8});
  c.tensors["state_dict.b"] = at::ones({8});
  c.tensors["state_dict.steps"] = at::arange(5, at::kLong);
  c.blobs["optimizer.0"] = std::string(100, 'x');
  c.meta = {{"format_version", 1}, {"epoch", 2}, {"global_step", 20}};
  const std::string path = dir / "good.ckpt";
  volt::checkpoint_io::TorchCheckpointIO().save_checkpoint(c, path);
  Archive a;
  a.bytes = read_bytes(path);
  fs::remove(path);
  const auto* p = reinterpret_cast<const unsigned char*>(a.bytes.data());
  a.records = volt::checkpoint_io::verify_zip(p, a.bytes.size(), "test archive");
  const size_t eocd = a.bytes.size() - 22;
  a.cd_begin = le32(a.bytes, eocd + 16);
  a.cd_end = a.cd_begin + le32(a.bytes, eocd + 12);
  return a;
}

/// Flips one bit at each of 100 seeded positions of `ranges` (a fresh copy each time), loads the result and
/// expects a CheckpointError that names the file and says it is damaged; the folder stays as it was.
void expect_every_flip_refused(const Archive& a, const std::vector<std::pair<size_t, size_t>>& ranges,
                               const std::string& kind, uint32_t seed) {
  ASSERT_FALSE(ranges.empty()) << kind;
  size_t total = 0;
  for (const auto& [b, e] : ranges) total += e - b;
  volt::testing::TempDir dir;
  const std::string path = dir / "flipped.ckpt";
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 100; ++trial) {
    size_t k = std::uniform_int_distribution<size_t>(0, total - 1)(rng);
    size_t pos = 0;
    for (const auto& [b, e] : ranges) {
      if (k < e - b) {
        pos = b + k;
        break;
      }
      k -= e - b;
    }
    const int bit = std::uniform_int_distribution<int>(0, 7)(rng);
    std::string bytes = a.bytes;
    bytes[pos] = static_cast<char>(bytes[pos] ^ (1 << bit));
    write_bytes(path, bytes);
    const auto before = listing(dir.str());
    const std::string msg =
        error_message<volt::CheckpointError>([&] { volt::checkpoint_io::TorchCheckpointIO().load_checkpoint(path); });
    EXPECT_TRUE(contains(msg, "flipped.ckpt") && contains(msg, "damaged"))
        << kind << ": bit " << bit << " of byte " << pos << ": " << msg;
    EXPECT_EQ(listing(dir.str()), before) << kind << ": the load wrote something";
  }
}

}  // namespace

TEST(Crc32, MatchesTheStandardCheckValue) {
  const std::string check = "123456789";
  EXPECT_EQ(volt::checkpoint_io::crc32(check.data(), check.size()), 0xCBF43926u);
  EXPECT_EQ(volt::checkpoint_io::crc32(nullptr, 0), 0u);
  // Continued in pieces, as over a large record.
  const uint32_t first = volt::checkpoint_io::crc32(check.data(), 4);
  EXPECT_EQ(volt::checkpoint_io::crc32(check.data() + 4, 5, first), 0xCBF43926u);
}

TEST(Crc32, EqualsZlibsForEveryLengthAndAlignment) {
  // The carry-less-multiplication path (64 bytes and more, on x86-64) against zlib's table.
  std::mt19937 rng(7);
  std::string bytes(5000, '\0');
  for (auto& c : bytes) c = static_cast<char>(rng());
  for (size_t offset = 0; offset < 16; ++offset) {
    for (size_t len : {0, 1, 15, 16, 63, 64, 65, 79, 80, 127, 128, 129, 255, 256, 1000, 4095, 4096, 4900}) {
      const auto* p = reinterpret_cast<const Bytef*>(bytes.data() + offset);
      const uint32_t expected = static_cast<uint32_t>(::crc32_z(::crc32_z(0, nullptr, 0), p, len));
      ASSERT_EQ(volt::checkpoint_io::crc32(p, len), expected) << "length " << len << " at offset " << offset;
      ASSERT_EQ(volt::checkpoint_io::crc32(p + len / 2, len - len / 2, volt::checkpoint_io::crc32(p, len / 2)),
                expected)
          << "in two pieces, length " << len;
    }
  }
}

TEST(CheckpointIntegrity, AnIntactArchiveVerifiesAndLoads) {
  volt::testing::TempDir dir;
  const Archive a = saved_archive(dir);
  EXPECT_GE(a.records.size(), 5u);  // data.pkl, 4 tensors, version
  write_bytes(dir / "ok.ckpt", a.bytes);
  const volt::Checkpoint c = volt::checkpoint_io::TorchCheckpointIO().load_checkpoint(dir / "ok.ckpt");
  EXPECT_EQ(c.tensors.at("state_dict.w").sum().item<float>(), 2016.0f);
  EXPECT_EQ(c.blobs.at("optimizer.0"), std::string(100, 'x'));
}

TEST(CheckpointIntegrity, ATensorBitFlipNamesTheRecordAndItsCrc) {
  volt::testing::TempDir dir;
  const Archive a = saved_archive(dir);
  const auto tensors = a.tensor_data();
  std::string bytes = a.bytes;
  bytes[tensors.front().first + 3] ^= 0x10;
  write_bytes(dir / "one.ckpt", bytes);
  const std::string msg = error_message<volt::CheckpointError>(
      [&] { volt::checkpoint_io::TorchCheckpointIO().load_checkpoint(dir / "one.ckpt"); });
  std::string record;
  for (const auto& r : a.records) {
    if (r.data_offset == tensors.front().first) record = r.name;
  }
  EXPECT_TRUE(volt::testing::mentions(msg, {"one.ckpt", "'" + record + "'", "CRC-32", "damaged"}));
}

TEST(CheckpointIntegrity, ABitFlippedInTensorDataIsRefusedAt100Positions) {
  volt::testing::TempDir dir;
  const Archive a = saved_archive(dir);
  expect_every_flip_refused(a, a.tensor_data(), "tensor data", 1);
}

TEST(CheckpointIntegrity, ABitFlippedInDataPklIsRefusedAt100Positions) {
  volt::testing::TempDir dir;
  const Archive a = saved_archive(dir);
  expect_every_flip_refused(a, a.pickle(), "data.pkl", 2);
}

TEST(CheckpointIntegrity, ABitFlippedInTheCentralDirectoryIsRefusedAt100Positions) {
  volt::testing::TempDir dir;
  const Archive a = saved_archive(dir);
  expect_every_flip_refused(a, a.central_directory(), "central directory", 3);
}

TEST(CheckpointIntegrity, ABitFlippedInALocalHeaderIsRefusedAt100Positions) {
  volt::testing::TempDir dir;
  const Archive a = saved_archive(dir);
  expect_every_flip_refused(a, a.local_headers(), "local headers", 4);
}

// LibTorch 2.6 found it: a bit flipped in the local compressed-size field of the 2-byte
// archive/version record turned PyTorch's 0 into 2, the entry's own size, and was accepted.
TEST(CheckpointIntegrity, ALocalHeaderSizeOrCrcEqualToTheEntrysIsRefusedWhenADescriptorFollows) {
  volt::testing::TempDir dir;
  const Archive a = saved_archive(dir);
  const std::string path = dir / "flipped.ckpt";
  for (const auto& r : a.records) {
    for (const size_t field : {14, 18, 22}) {  // CRC-32, compressed size, size
      std::string bytes = a.bytes;
      const uint32_t value = field == 14 ? r.crc : static_cast<uint32_t>(r.size);
      if (value == 0) continue;
      for (int k = 0; k < 4; ++k) bytes[r.header_offset + field + k] = static_cast<char>((value >> (8 * k)) & 0xFF);
      write_bytes(path, bytes);
      const std::string msg = error_message<volt::CheckpointError>(
          [&] { volt::checkpoint_io::TorchCheckpointIO().load_checkpoint(path); });
      EXPECT_TRUE(contains(msg, r.name) && contains(msg, "PyTorch writes 0 here")) << r.name << " " << field << ": "
                                                                                  << msg;
    }
  }
}

TEST(CheckpointIntegrity, ABitFlippedInTheEndRecordsIsRefusedAt100Positions) {
  volt::testing::TempDir dir;
  const Archive a = saved_archive(dir);
  expect_every_flip_refused(a, {{a.cd_end, a.bytes.size()}}, "end records", 5);
}

TEST(CheckpointIntegrity, TruncationAt100OffsetsIsRefused) {
  volt::testing::TempDir dir;
  const Archive a = saved_archive(dir);
  const std::string path = dir / "cut.ckpt";
  std::mt19937 rng(6);
  for (int trial = 0; trial < 100; ++trial) {
    const size_t keep = std::uniform_int_distribution<size_t>(0, a.bytes.size() - 1)(rng);
    write_bytes(path, a.bytes.substr(0, keep));
    const auto before = listing(dir.str());
    const std::string msg =
        error_message<volt::CheckpointError>([&] { volt::checkpoint_io::TorchCheckpointIO().load_checkpoint(path); });
    EXPECT_TRUE(contains(msg, "cut.ckpt")) << keep << " bytes kept: " << msg;
    EXPECT_EQ(listing(dir.str()), before);
  }
}

TEST(CheckpointIntegrity, BytesAppendedAfterTheArchiveAreRefused) {
  volt::testing::TempDir dir;
  const Archive a = saved_archive(dir);
  write_bytes(dir / "long.ckpt", a.bytes + "trailing");
  const std::string msg = error_message<volt::CheckpointError>(
      [&] { volt::checkpoint_io::TorchCheckpointIO().load_checkpoint(dir / "long.ckpt"); });
  EXPECT_TRUE(volt::testing::mentions(msg, {"long.ckpt", "followed by 8 bytes"}));
}

TEST(CheckpointIntegrity, LoadedTensorsCanBeChangedInPlaceWithoutTouchingTheFile) {
  // Tensors point into a private mapping of the file (no copy): writes go to their own pages.
  volt::testing::TempDir dir;
  const Archive a = saved_archive(dir);
  write_bytes(dir / "cow.ckpt", a.bytes);
  at::Tensor w;
  {
    volt::Checkpoint c = volt::checkpoint_io::TorchCheckpointIO().load_checkpoint(dir / "cow.ckpt");
    w = c.tensors.at("state_dict.w");
  }
  w.add_(1);  // outlives the Checkpoint, written in place
  EXPECT_EQ(w.sum().item<float>(), 2016.0f + 64.0f);
  EXPECT_EQ(read_bytes(dir / "cow.ckpt"), a.bytes);
  EXPECT_EQ(volt::checkpoint_io::TorchCheckpointIO()
                .load_checkpoint(dir / "cow.ckpt")
                .tensors.at("state_dict.w")
                .sum()
                .item<float>(),
            2016.0f);
}

TEST(CheckpointIntegrity, AnArchiveRepackedWithoutAlignmentStillLoads) {
  // Python's zipfile, set to write the fields as PyTorch does, packs the records without the 64-byte
  // alignment padding: the tensors are then copied out of the mapping instead of pointing into it.
  if (std::system("/usr/bin/python3 -c 'import zipfile' 2>/dev/null") != 0) GTEST_SKIP() << "no /usr/bin/python3";
  volt::testing::TempDir dir;
  const Archive a = saved_archive(dir);
  write_bytes(dir / "aligned.ckpt", a.bytes);
  std::ofstream(dir / "repack.py") << R"(
import struct, sys, zipfile
src, dst = zipfile.ZipFile(sys.argv[1]), zipfile.ZipFile(sys.argv[2], "w")
for info in src.infolist():
    out = zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0))
    out.create_system, out.create_version, out.extract_version, out.external_attr = 0, 45, 0, 0
    out.compress_type = zipfile.ZIP_STORED
    dst.writestr(out, src.read(info.filename))
dst.close()
# zipfile always writes Unix permissions into the attributes, which PyTorch leaves 0: clear them.
b = bytearray(open(sys.argv[2], "rb").read())
count, size, at = struct.unpack("<HII", b[len(b) - 12:len(b) - 2])
for _ in range(count):
    b[at + 38:at + 42] = bytes(4)
    at += 46 + sum(struct.unpack("<HHH", b[at + 28:at + 34]))
open(sys.argv[2], "wb").write(b)
)";
  const std::string cmd =
      "/usr/bin/python3 " + (dir / "repack.py") + " " + (dir / "aligned.ckpt") + " " + (dir / "packed.ckpt");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const auto packed = read_bytes(dir / "packed.ckpt");
  const auto* p = reinterpret_cast<const unsigned char*>(packed.data());
  bool unaligned = false;
  for (const auto& r : volt::checkpoint_io::verify_zip(p, packed.size(), "packed")) {
    unaligned = unaligned || (contains(r.name, "/data/") && r.data_offset % 64 != 0);
  }
  EXPECT_TRUE(unaligned) << "the repacked archive should have unaligned tensor records";
  const volt::Checkpoint c = volt::checkpoint_io::TorchCheckpointIO().load_checkpoint(dir / "packed.ckpt");
  EXPECT_TRUE(c.tensors.at("state_dict.w").equal(at::arange(64, at::kFloat).reshape({8, 8})));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(c.tensors.at("state_dict.w").data_ptr()) % 64, 0u);
}
