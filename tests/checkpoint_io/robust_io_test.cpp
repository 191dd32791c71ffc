// Checkpoint files by type before they are opened, non-UTF-8 names in messages, and
// LibTorch errors from malformed archives as CheckpointErrors.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ATen/ops/ones.h>
#include <torch/serialize.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>

#include "support/expect.h"
#include "support/temp_dir.h"
#include "volt/checkpoint_io/async_checkpoint_io.h"
#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/core/error.h"

namespace fs = std::filesystem;
using volt::testing::contains;
using volt::testing::error_message;

namespace {

/// Runs `fn` on another thread; fails the test (instead of hanging it) when it takes longer
/// than 5 s, as an open() of a FIFO would.
std::string message_within_5s(std::function<void()> fn) {
  auto result = std::async(std::launch::async, [fn] { return error_message<volt::CheckpointError>(fn); });
  if (result.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    ADD_FAILURE() << "still blocked after 5 s";
    std::_Exit(1);  // the blocked thread cannot be joined
  }
  return result.get();
}

volt::Checkpoint small_checkpoint() {
  volt::Checkpoint c;
  c.tensors["w"] = at::ones({2, 2});
  c.meta = {{"format_version", 1}};
  return c;
}

}  // namespace

TEST(TorchCheckpointIORobust, AFifoIsRefusedAtOnceNotOpened) {
  volt::testing::TempDir dir;
  const std::string fifo = dir / "model.ckpt";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  volt::checkpoint_io::TorchCheckpointIO io;
  const std::string msg = message_within_5s([&] { io.load_checkpoint(fifo); });
  EXPECT_TRUE(contains(msg, "FIFO")) << msg;
  EXPECT_TRUE(contains(msg, fifo)) << msg;
}

TEST(TorchCheckpointIORobust, AFolderAndACharacterDeviceAreRefusedByType) {
  volt::testing::TempDir dir;
  volt::checkpoint_io::TorchCheckpointIO io;
  EXPECT_TRUE(contains(error_message<volt::CheckpointError>([&] { io.load_checkpoint(dir.str()); }),
                       "is a folder, not a file"));
  EXPECT_TRUE(contains(message_within_5s([&] { io.load_checkpoint("/dev/zero"); }), "character device"));
}

TEST(TorchCheckpointIORobust, NonUtf8NamesAreShownEscaped) {
  volt::testing::TempDir dir;
  const std::string name = dir.str() + "/bad\xff\xfe.ckpt";
  volt::checkpoint_io::TorchCheckpointIO io;
  const std::string msg = error_message<volt::CheckpointError>([&] { io.load_checkpoint(name); });
  EXPECT_TRUE(contains(msg, "bad\\xff\\xfe.ckpt")) << msg;
  EXPECT_FALSE(contains(msg, "\xff")) << "raw byte in the message";
}

TEST(TorchCheckpointIORobust, EntriesOfTheWrongTypeAreACheckpointError) {
  volt::testing::TempDir dir;
  const std::string path = dir / "wrong.ckpt";
  c10::impl::GenericDict root(c10::StringType::get(), c10::AnyType::get());
  root.insert("tensors", int64_t{3});
  root.insert("blobs", int64_t{4});
  root.insert("meta", std::string("{}"));
  const std::vector<char> bytes = torch::pickle_save(root);
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  volt::checkpoint_io::TorchCheckpointIO io;
  const std::string msg = error_message<volt::CheckpointError>([&] { io.load_checkpoint(path); });
  EXPECT_TRUE(contains(msg, "wrong.ckpt")) << msg;
  EXPECT_TRUE(contains(msg, "'tensors' entry that is an integer, not a dict")) << msg;
}

TEST(TorchCheckpointIORobust, SavingOntoAFolderIsRefusedAndLeavesNoTemporaryFile) {
  volt::testing::TempDir dir;
  fs::create_directories(dir / "taken.ckpt");
  volt::checkpoint_io::TorchCheckpointIO io;
  const std::string msg =
      error_message<volt::CheckpointError>([&] { io.save_checkpoint(small_checkpoint(), dir / "taken.ckpt"); });
  EXPECT_TRUE(contains(msg, "a folder")) << msg;
  for (const auto& e : fs::directory_iterator(dir.path())) EXPECT_EQ(e.path().filename(), "taken.ckpt");
}

TEST(TorchCheckpointIORobust, RemoveDeadWritersTempFilesKeepsLiveOnesAndOtherFiles) {
  volt::testing::TempDir dir;
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  fs::create_directories(dir / "a/b");
  const std::string dead = dir / ("a/b/.x.ckpt.tmp." + std::to_string(child) + ".2");
  const std::string live = dir / ("a/.y.ckpt.tmp." + std::to_string(::getpid()) + ".0");
  const std::string other = dir / "a/.hidden.tmp.notapid";
  for (const auto& f : {dead, live, other}) std::ofstream(f) << "x";
  EXPECT_EQ(volt::checkpoint_io::remove_dead_writers_temp_files(dir.str()), 1);
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(other));
}

TEST(AsyncCheckpointIORobust, AFifoIsRefusedThroughTheAsyncWrapperToo) {
  volt::testing::TempDir dir;
  const std::string fifo = dir / "async.ckpt";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  volt::checkpoint_io::AsyncCheckpointIO io;
  EXPECT_TRUE(contains(message_within_5s([&] { io.load_checkpoint(fifo); }), "FIFO"));
}
