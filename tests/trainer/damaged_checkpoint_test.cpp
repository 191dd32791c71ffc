// Resuming from a checkpoint whose metadata or training state has the wrong type (a damaged or hand-edited
// file, found by the fuzz and fault work of tests/fuzz): a CheckpointError naming the file and what is wrong,
// never a nlohmann or LibTorch exception, which ended the program in std::terminate.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include "support/boring_module.h"
#include "support/expect.h"
#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/core/error.h"
#include "volt/trainer/trainer.h"

namespace {

using volt::testing::contains;
using volt::testing::error_message;
using volt::testing::ScratchDir;

/// The checkpoint of a one-epoch run, changed by `damage` and saved as damaged.ckpt beside it.
std::string damaged_checkpoint(const ScratchDir& dir, const std::function<void(volt::Checkpoint&)>& damage) {
  auto o = volt::testing::quiet_options(dir.path() + "/run");
  o.enable_checkpointing = true;
  volt::Trainer trainer(o);
  volt::testing::BoringModule m;
  trainer.fit(m, volt::testing::random_loader(8, 4, 1));
  std::string written;
  for (const auto& f : volt::testing::files_under(dir.path() + "/run")) {
    if (f.size() > 5 && f.compare(f.size() - 5, 5, ".ckpt") == 0) written = dir.path() + "/run/" + f;
  }
  EXPECT_FALSE(written.empty()) << "the run wrote no checkpoint";
  volt::checkpoint_io::TorchCheckpointIO io;
  volt::Checkpoint ckpt = io.load_checkpoint(written);
  damage(ckpt);
  const std::string path = dir.path() + "/damaged.ckpt";
  io.save_checkpoint(ckpt, path);
  return path;
}

std::string resume_error(const ScratchDir& dir, const std::string& path, bool with_logger_and_checkpoints = false) {
  auto o = volt::testing::quiet_options(dir.path() + "/resume");
  if (with_logger_and_checkpoints) {
    o.logger = {"csv", "tensorboard"};  // the version folder they would make must not be made
    o.enable_checkpointing = true;
  }
  volt::Trainer trainer(o);
  volt::testing::BoringModule m;
  return error_message<volt::CheckpointError>(
      [&] { trainer.fit(m, volt::testing::random_loader(8, 4, 1), nullptr, path); });
}

}  // namespace

TEST(DamagedCheckpoint, AFormatVersionThatIsNotANumberIsNamed) {
  ScratchDir dir;
  const std::string path = damaged_checkpoint(dir, [](volt::Checkpoint& c) { c.meta["volt"]["format_version"] = "1"; });
  const std::string message = resume_error(dir, path);
  EXPECT_TRUE(contains(message, path)) << message;
  EXPECT_TRUE(contains(message, "format version \"1\"")) << message;
}

TEST(DamagedCheckpoint, LoopStateOfTheWrongTypeIsACheckpointError) {
  ScratchDir dir;
  const std::string path = damaged_checkpoint(dir, [](volt::Checkpoint& c) { c.meta["volt"]["loops"]["global_step"] = "x"; });
  const std::string message = resume_error(dir, path);
  EXPECT_TRUE(contains(message, path)) << message;
  EXPECT_TRUE(contains(message, "malformed metadata")) << message;
}

TEST(DamagedCheckpoint, AWeightsOnlyFlagThatIsNotABooleanIsACheckpointError) {
  ScratchDir dir;
  const std::string path = damaged_checkpoint(dir, [](volt::Checkpoint& c) { c.meta["volt"]["weights_only"] = "no"; });
  EXPECT_TRUE(contains(resume_error(dir, path), "malformed metadata"));
}

TEST(DamagedCheckpoint, ARandomStateLibTorchRefusesIsACheckpointError) {
  ScratchDir dir;
  const std::string path =
      damaged_checkpoint(dir, [](volt::Checkpoint& c) { c.tensors["rng.cpu"] = at::zeros({3}, at::kFloat); });
  const std::string message = resume_error(dir, path);
  EXPECT_TRUE(contains(message, path)) << message;
  EXPECT_TRUE(contains(message, "cannot restore")) << message;
}

namespace {

/// Every file and folder under `dir`, relative to it, sorted (folders too: an empty version_N counts).
std::vector<std::string> entries_under(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) return out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    out.push_back(std::filesystem::relative(e.path(), dir).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// resume_error, then expects that the refused resume left nothing under its root (no version_N).
std::string refused_resume_leaves_nothing(const ScratchDir& dir, const std::string& path) {
  const std::string message = resume_error(dir, path, /*with_logger_and_checkpoints=*/true);
  const auto left = entries_under(dir.path() + "/resume");
  EXPECT_TRUE(left.empty()) << "the refused resume left " << left.size() << " entries, first " << left.front();
  return message;
}

}  // namespace

TEST(DamagedCheckpoint, ANegativeEpochIsRefusedBeforeAnythingIsWritten) {
  ScratchDir dir;
  const std::string path = damaged_checkpoint(dir, [](volt::Checkpoint& c) {
    c.meta["epoch"] = -4;
    c.meta["volt"]["loops"]["epoch"] = -4;
  });
  const std::string message = refused_resume_leaves_nothing(dir, path);
  EXPECT_TRUE(volt::testing::mentions(message, {path, "epoch is -4, below 0", "volt.loops.epoch is -4, below 0"}));
}

TEST(DamagedCheckpoint, NegativeStepsAndBatchCountersAreEachNamed) {
  ScratchDir dir;
  const std::string path = damaged_checkpoint(dir, [](volt::Checkpoint& c) {
    c.meta["global_step"] = -1;
    c.meta["volt"]["loops"]["global_step"] = -1;
    c.meta["volt"]["loops"]["batches_done"] = -2;
    c.meta["volt"]["loops"]["batches_seen"] = -3;
  });
  const std::string message = refused_resume_leaves_nothing(dir, path);
  EXPECT_TRUE(volt::testing::mentions(message, {"global_step is -1", "volt.loops.global_step is -1",
                                                "volt.loops.batches_done is -2", "volt.loops.batches_seen is -3"}));
}

TEST(DamagedCheckpoint, MissingLoopProgressIsNamed) {
  ScratchDir dir;
  const std::string path = damaged_checkpoint(dir, [](volt::Checkpoint& c) { c.meta["volt"]["loops"].erase("batches_done"); });
  EXPECT_TRUE(volt::testing::mentions(refused_resume_leaves_nothing(dir, path), {"volt.loops.batches_done is missing"}));
}

TEST(DamagedCheckpoint, TensorsOfTheWrongDtypeAreListedNotConverted) {
  ScratchDir dir;
  const std::string path = damaged_checkpoint(dir, [](volt::Checkpoint& c) {
    c.tensors["state_dict.layer.weight"] = c.tensors["state_dict.layer.weight"].to(at::kDouble);
    c.tensors["state_dict.layer.bias"] = c.tensors["state_dict.layer.bias"].to(at::kHalf);
  });
  const std::string message = refused_resume_leaves_nothing(dir, path);
  EXPECT_TRUE(volt::testing::mentions(message, {path, "dtype differs", "layer.bias (checkpoint Half, module Float)",
                                                "layer.weight (checkpoint Double, module Float)"}));
}

TEST(DamagedCheckpoint, TensorsOfTheWrongShapeAndUnknownOrMissingNamesAreListed) {
  ScratchDir dir;
  const std::string path = damaged_checkpoint(dir, [](volt::Checkpoint& c) {
    c.tensors["state_dict.layer.weight"] = at::zeros({3, 3});
    c.tensors.erase("state_dict.layer.bias");
    c.tensors["state_dict.extra"] = at::zeros({1});
  });
  const std::string message = refused_resume_leaves_nothing(dir, path);
  EXPECT_TRUE(volt::testing::mentions(message, {"missing in checkpoint [layer.bias]", "shape differs [layer.weight",
                                                "unexpected in checkpoint [extra]"}));
}

TEST(DamagedCheckpoint, ACorruptFileIsRefusedBeforeAnythingIsWritten) {
  ScratchDir dir;
  const std::string path = damaged_checkpoint(dir, [](volt::Checkpoint&) {});
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[bytes.size() / 2] ^= 0x01;
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  EXPECT_TRUE(volt::testing::mentions(refused_resume_leaves_nothing(dir, path), {path, "is damaged"}));
}
