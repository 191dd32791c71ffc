// TokenFile and TokenWindowDataset: a token file written by write_token_file (64-byte header, then uint16 or
// uint32 ids), memory-mapped. The input's first byte is the window's context (1..16) and stride (0..3); the
// rest is the file. An accepted file must have exactly header + count * width bytes, and every window must be
// servable.
#include <filesystem>
#include <string>

#include <ATen/core/Tensor.h>

#include "fuzz_target.h"
#include "volt/core/error.h"
#include "volt/data/text/token_window_dataset.h"

namespace {
constexpr const char* kTarget = "token_file";
}  // namespace

VOLT_FUZZ_TARGET(token_file) {
  if (size < 1) return 0;
  const int64_t context = 1 + (data[0] & 0x0F);
  const int64_t stride = (data[0] >> 4) & 0x03;
  const std::string path = volt::fuzz::scratch_path("input.tok");
  volt::fuzz::write_file(path, data + 1, size - 1);
  try {
    volt::data::TokenWindowDataset ds(path, context, stride);
    const auto& info = ds.tokens().info();
    if (64 + static_cast<uint64_t>(info.tokens) * static_cast<uint64_t>(info.token_bytes) != size - 1) {
      volt::fuzz::crash(kTarget, "an accepted token file's size does not match its header");
    }
    const int64_t step = stride == 0 ? context : stride;
    if (ds.size() < 1 || (ds.size() - 1) * step + context + 1 > info.tokens) {
      volt::fuzz::crash(kTarget, "the windows leave the token file");
    }
    std::vector<int64_t> all;
    for (int64_t i = 0; i < std::min<int64_t>(ds.size(), 64); ++i) all.push_back(i);
    all.push_back(ds.size() - 1);
    const volt::Batch b = ds.get_batch(all);
    if (b.size() != 2 || b[0].size(1) != context) volt::fuzz::crash(kTarget, "a batch of the wrong shape");
    (void)ds.get(ds.size() - 1);
  } catch (const volt::Error&) {
    return 0;
  } catch (const std::exception& e) {
    volt::fuzz::crash_on_exception(kTarget, e);
  }
  return 0;
}
