// Resuming from a checkpoint whose metadata or training state has the wrong type (a damaged or hand-edited
// file, found by the fuzz and fault work of tests/fuzz): a CheckpointError naming the file and what is wrong,
// never a nlohmann or LibTorch exception, which ended the program in std::terminate.
#include <filesystem>
#include <functional>
#include <string>

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

std::string resume_error(const ScratchDir& dir, const std::string& path) {
  volt::Trainer trainer(volt::testing::quiet_options(dir.path() + "/resume"));
  volt::testing::BoringModule m;
  return error_message<volt::CheckpointError>([&] { trainer.fit(m, volt::testing::random_loader(8, 4, 1), nullptr, path); });
}

}  // namespace

TEST(DamagedCheckpoint, AFormatVersionThatIsNotANumberIsNamed) {
  ScratchDir dir;
  const std::string path = damaged_checkpoint(dir, [](volt::Checkpoint& c) { c.meta["format_version"] = "1"; });
  const std::string message = resume_error(dir, path);
  EXPECT_TRUE(contains(message, path)) << message;
  EXPECT_TRUE(contains(message, "format version \"1\"")) << message;
}

TEST(DamagedCheckpoint, LoopStateOfTheWrongTypeIsACheckpointError) {
  ScratchDir dir;
  const std::string path = damaged_checkpoint(dir, [](volt::Checkpoint& c) { c.meta["loops"]["global_step"] = "x"; });
  const std::string message = resume_error(dir, path);
  EXPECT_TRUE(contains(message, path)) << message;
  EXPECT_TRUE(contains(message, "malformed metadata")) << message;
}

TEST(DamagedCheckpoint, AWeightsOnlyFlagThatIsNotABooleanIsACheckpointError) {
  ScratchDir dir;
  const std::string path = damaged_checkpoint(dir, [](volt::Checkpoint& c) { c.meta["weights_only"] = "no"; });
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
