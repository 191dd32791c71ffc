// AsyncCheckpointIO (background writes, failures re-raised) and crashes during a write:
// a process killed between write and rename, or by SIGKILL at random moments of a save
// loop, always leaves the last good checkpoint loadable.
#include <signal.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>

#include <ATen/Parallel.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/full.h>
#include <gtest/gtest.h>

#include "support/temp_dir.h"
#include "support/expect.h"
#include "volt/checkpoint_io/async_checkpoint_io.h"
#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/core/error.h"

namespace {

namespace fs = std::filesystem;
using volt::Checkpoint;
using volt::CheckpointError;
using volt::checkpoint_io::AsyncCheckpointIO;
using volt::checkpoint_io::CheckpointIO;
using volt::checkpoint_io::TorchCheckpointIO;
using volt::testing::contains;
using volt::testing::error_message;

using volt::testing::TempDir;

/// A checkpoint whose every value says which save it is: a tensor filled with `step` and
/// meta["step"] = step, so a reader can tell a consistent file from a mixed one.
Checkpoint numbered(int64_t step, int64_t numel = 1 << 16) {
  Checkpoint c;
  c.tensors["state_dict.w"] = at::full({numel}, static_cast<double>(step), at::kDouble);
  c.blobs["optimizer.0"] = std::string(64, static_cast<char>('a' + step % 26));
  c.meta["step"] = step;
  return c;
}

int64_t consistent_step(const Checkpoint& c) {
  const int64_t step = c.meta.at("step").get<int64_t>();
  const at::Tensor w = c.tensors.at("state_dict.w");
  EXPECT_TRUE(w.eq(static_cast<double>(step)).all().item<bool>()) << "tensor and meta disagree at step " << step;
  EXPECT_EQ(c.blobs.at("optimizer.0"), std::string(64, static_cast<char>('a' + step % 26)));
  return step;
}

size_t temp_files(const fs::path& dir) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().find(".tmp.") != std::string::npos) ++n;
  }
  return n;
}

/// A CheckpointIO whose writes wait until release() (or fail when told to), so that a
/// test can observe what happens while a background write is in flight.
class GatedIO : public CheckpointIO {
 public:
  void save_checkpoint(const Checkpoint& checkpoint, const std::string& path) override {
    std::unique_lock<std::mutex> lock(mutex_);
    started_ = true;
    cv_.notify_all();
    if (!cv_.wait_for(lock, std::chrono::seconds(10), [&] { return released_; })) return;
    if (fail_) throw CheckpointError("disk full while writing '" + path + "'");
    inner_.save_checkpoint(checkpoint, path);
    ++written_;
  }
  Checkpoint load_checkpoint(const std::string& path) override { return inner_.load_checkpoint(path); }
  void remove_checkpoint(const std::string& path) override { inner_.remove_checkpoint(path); }

  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    released_ = true;
    cv_.notify_all();
  }
  bool wait_started() {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return started_; });
  }
  int written() {
    std::lock_guard<std::mutex> lock(mutex_);
    return written_;
  }
  bool fail_ = false;

 private:
  TorchCheckpointIO inner_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool started_ = false;
  bool released_ = false;
  int written_ = 0;
};

// ---------------------------------------------------------------- AsyncCheckpointIO

TEST(AsyncCheckpointIO, SaveReturnsWhileTheWriteIsStillInFlight) {
  TempDir dir;
  auto gated = std::make_shared<GatedIO>();
  AsyncCheckpointIO io(gated);
  io.save_checkpoint(numbered(3), dir / "a.ckpt");  // would block for 10 s if synchronous
  ASSERT_TRUE(gated->wait_started());
  EXPECT_EQ(gated->written(), 0);
  EXPECT_FALSE(fs::exists(dir / "a.ckpt"));
  gated->release();
  io.teardown();
  EXPECT_EQ(gated->written(), 1);
  EXPECT_EQ(consistent_step(TorchCheckpointIO().load_checkpoint(dir / "a.ckpt")), 3);
}

TEST(AsyncCheckpointIO, SnapshotsTensorsSoLaterInPlaceChangesDoNotReachTheFile) {
  TempDir dir;
  auto gated = std::make_shared<GatedIO>();
  AsyncCheckpointIO io(gated);
  Checkpoint c = numbered(5);
  io.save_checkpoint(c, dir / "a.ckpt");
  c.tensors["state_dict.w"].add_(100);  // the next optimizer step, while the write waits
  c.meta["step"] = 105;
  gated->release();
  io.wait();
  EXPECT_EQ(consistent_step(io.load_checkpoint(dir / "a.ckpt")), 5);
}

TEST(AsyncCheckpointIO, AFailedWriteIsRaisedAtTheNextSaveAndThenCleared) {
  TempDir dir;
  auto gated = std::make_shared<GatedIO>();
  gated->fail_ = true;
  gated->release();
  AsyncCheckpointIO io(gated);
  io.save_checkpoint(numbered(1), dir / "a.ckpt");  // the failure happens in the background
  const std::string msg = error_message<CheckpointError>([&] { io.save_checkpoint(numbered(2), dir / "b.ckpt"); });
  EXPECT_TRUE(contains(msg, "disk full")) << msg;
  EXPECT_TRUE(contains(msg, "a.ckpt")) << msg;
  EXPECT_FALSE(fs::exists(dir / "b.ckpt")) << "a save that reports an earlier failure must not start";
  gated->fail_ = false;
  io.save_checkpoint(numbered(2), dir / "b.ckpt");
  io.teardown();
  EXPECT_EQ(consistent_step(io.load_checkpoint(dir / "b.ckpt")), 2);
}

TEST(AsyncCheckpointIO, AFailedWriteIsRaisedAtTeardown) {
  TempDir dir;
  auto gated = std::make_shared<GatedIO>();
  gated->fail_ = true;
  gated->release();
  AsyncCheckpointIO io(gated);
  io.save_checkpoint(numbered(1), dir / "a.ckpt");
  const std::string msg = error_message<CheckpointError>([&] { io.teardown(); });
  EXPECT_TRUE(contains(msg, "a.ckpt")) << msg;
  io.teardown();  // reported once
}

TEST(AsyncCheckpointIO, AnIOErrorOfTheRealWriterReachesTheCaller) {
  TempDir dir;
  {
    std::ofstream(dir / "file") << "x";
  }
  AsyncCheckpointIO io;  // TorchCheckpointIO underneath
  io.save_checkpoint(numbered(1), dir / "file/sub/a.ckpt");
  const std::string msg = error_message<CheckpointError>([&] { io.teardown(); });
  EXPECT_TRUE(contains(msg, "file/sub")) << msg;
}

TEST(AsyncCheckpointIO, LoadAndRemoveWaitForTheWriteInFlight) {
  TempDir dir;
  AsyncCheckpointIO io;
  for (int64_t step = 0; step < 5; ++step) {
    io.save_checkpoint(numbered(step, 1 << 20), dir / "a.ckpt");
    EXPECT_EQ(consistent_step(io.load_checkpoint(dir / "a.ckpt")), step);
  }
  io.save_checkpoint(numbered(9), dir / "b.ckpt");
  io.remove_checkpoint(dir / "b.ckpt");
  io.teardown();
  EXPECT_FALSE(fs::exists(dir / "b.ckpt"));
  EXPECT_EQ(temp_files(dir.path()), 0u);
}

// ---------------------------------------------------------------- crashes during a write

void abort_before_rename(const std::string&, const std::string&) {
  std::abort();
}

/// Runs `body` in a child process (which must end by dying or _exit) and returns its
/// wait status. The child uses one intra-op thread: the parent's thread pool is not
/// usable after fork.
template <typename Body>
int in_child(Body&& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    at::set_num_threads(1);
    body();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(CheckpointCrash, AbortBetweenWriteAndRenameKeepsThePreviousCheckpoint) {
  TempDir dir;
  const std::string path = dir / "last.ckpt";
  TorchCheckpointIO().save_checkpoint(numbered(1), path);
  const int status = in_child([&] {
    volt::checkpoint_io::set_before_rename_hook(abort_before_rename);
    TorchCheckpointIO().save_checkpoint(numbered(2), path);
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << "the hook must have killed the writer, status " << status;
  EXPECT_EQ(WTERMSIG(status), SIGABRT);
  EXPECT_EQ(temp_files(dir.path()), 1u) << "the dead writer's complete temporary file is left behind";
  EXPECT_EQ(consistent_step(TorchCheckpointIO().load_checkpoint(path)), 1);
  // The next good save replaces the file and clears the dead process's temporary file.
  TorchCheckpointIO().save_checkpoint(numbered(3), path);
  EXPECT_EQ(consistent_step(TorchCheckpointIO().load_checkpoint(path)), 3);
  EXPECT_EQ(temp_files(dir.path()), 0u);
}

TEST(CheckpointCrash, AbortInTheBackgroundWriterKeepsThePreviousCheckpoint) {
  TempDir dir;
  const std::string path = dir / "last.ckpt";
  TorchCheckpointIO().save_checkpoint(numbered(1), path);
  const int status = in_child([&] {
    volt::checkpoint_io::set_before_rename_hook(abort_before_rename);
    AsyncCheckpointIO io;
    io.save_checkpoint(numbered(2), path);
    io.teardown();
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(consistent_step(TorchCheckpointIO().load_checkpoint(path)), 1);
}

TEST(CheckpointCrash, SigkillAtRandomMomentsOfASaveLoopAlwaysLeavesTheLastGoodCheckpoint) {
  TempDir dir;
  const std::string path = dir / "last.ckpt";
  TorchCheckpointIO().save_checkpoint(numbered(0), path);
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> delay_us(0, 40000);
  int64_t last = 0;
  for (int round = 0; round < 25; ++round) {
    const int64_t start = last + 1;
    int done[2];
    ASSERT_EQ(::pipe(done), 0);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(done[0]);
      at::set_num_threads(1);
      TorchCheckpointIO io;
      for (int64_t step = start;; ++step) {
        io.save_checkpoint(numbered(step, 1 << 18), path);  // 2 MB each
        const char byte = 1;
        if (::write(done[1], &byte, 1) != 1) ::_exit(1);
      }
    }
    ::close(done[1]);
    // Wait for the child's first complete save (however loaded the machine is), then
    // kill it at a random moment of the saves that follow.
    pollfd pfd{done[0], POLLIN, 0};
    const bool saved = ::poll(&pfd, 1, 60000) == 1;
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us(rng)));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ::close(done[0]);
    ASSERT_TRUE(saved) << "round " << round << ": the writer never finished a save";
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "round " << round;
    const int64_t step = consistent_step(TorchCheckpointIO().load_checkpoint(path));
    ASSERT_GE(step, start) << "round " << round << ": a completed save is missing, or an older one replaced it";
    last = step;
  }
  TorchCheckpointIO().save_checkpoint(numbered(last + 1), path);
  EXPECT_EQ(temp_files(dir.path()), 0u) << "temporary files of killed writers are cleaned up by the next save";
}

}  // namespace
