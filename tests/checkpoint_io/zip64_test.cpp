// A checkpoint past 4 GiB (issue 17): torch.save's zip writer then gives the large entry Zip64 sizes and the
// records after it Zip64 offsets; the integrity check reads both and still finds a flipped bit past 4 GiB.
// Slow (about 4.3 GB written and read), labelled slow; skipped with the reason when the machine lacks the
// memory or disk.
#include <sys/statvfs.h>

#include <cstdint>
#include <fstream>
#include <string>

#include <ATen/ops/arange.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include "support/expect.h"
#include "support/temp_dir.h"
#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/core/error.h"

namespace {

constexpr int64_t kBig = (int64_t{1} << 32) + 4096;  // past UINT32_MAX: Zip64 sizes

int64_t available_memory() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit) {
    if (key == "MemAvailable:") return kb * 1024;
  }
  return 0;
}

int64_t free_disk(const std::string& dir) {
  struct statvfs s {};
  if (::statvfs(dir.c_str(), &s) != 0) return 0;
  return static_cast<int64_t>(s.f_bavail) * static_cast<int64_t>(s.f_frsize);
}

TEST(Zip64Slow, ACheckpointPast4GiBRoundTripsAndAFlipPastItIsFound) {
  volt::testing::TempDir dir;
  if (available_memory() < 3 * kBig) GTEST_SKIP() << "needs 13 GB of available memory (/proc/meminfo)";
  if (free_disk(dir.str()) < 3 * kBig) GTEST_SKIP() << "needs 13 GB free on " << dir.str();
  volt::Checkpoint c;
  {
    at::Tensor big = at::zeros({kBig}, at::kByte);
    big.narrow(0, kBig - 16, 16).copy_(at::arange(16, at::kByte));
    c.tensors["state_dict.a_big"] = big;  // written first: the records after it start past 4 GiB
  }
  c.tensors["state_dict.b_small"] = at::arange(8, at::kFloat);
  c.meta["epoch"] = 1;
  volt::checkpoint_io::TorchCheckpointIO io;
  const std::string path = dir / "big.ckpt";
  io.save_checkpoint(c, path);
  c.tensors.clear();
  {
    const volt::Checkpoint back = io.load_checkpoint(path);
    const at::Tensor& big = back.tensors.at("state_dict.a_big");
    ASSERT_EQ(big.numel(), kBig);
    EXPECT_TRUE(big.narrow(0, kBig - 16, 16).equal(at::arange(16, at::kByte)));
    EXPECT_TRUE(back.tensors.at("state_dict.b_small").equal(at::arange(8, at::kFloat)));
    EXPECT_EQ(back.meta.at("epoch"), 1);
  }
  // One bit of the small tensor's bytes, which lie past 4 GiB: its record's CRC no longer matches.
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(0, std::ios::end);
    const int64_t size = f.tellg();
    ASSERT_GT(size, kBig);
    // The small tensor's record is the last data record: search back from the end records for its bytes.
    std::string tail(static_cast<size_t>(std::min<int64_t>(size, 1 << 16)), '\0');
    f.seekg(size - static_cast<int64_t>(tail.size()));
    f.read(tail.data(), static_cast<std::streamsize>(tail.size()));
    float values[8];
    for (int i = 0; i < 8; ++i) values[i] = static_cast<float>(i);
    const std::string needle(reinterpret_cast<const char*>(values), sizeof values);
    const auto at = tail.rfind(needle);
    ASSERT_NE(at, std::string::npos);
    const int64_t offset = size - static_cast<int64_t>(tail.size()) + static_cast<int64_t>(at);
    ASSERT_GT(offset, int64_t{1} << 32);
    f.seekp(offset + 11);  // inside 2.0f
    const char flipped = static_cast<char>(needle[11] ^ 0x01);
    f.write(&flipped, 1);
  }
  const std::string msg = volt::testing::error_message<volt::CheckpointError>([&] { io.load_checkpoint(path); });
  EXPECT_TRUE(volt::testing::mentions(msg, {"big.ckpt", "is damaged", "CRC-32"})) << msg;
}

}  // namespace
