// WorkerGroup (volt/strategies/launchers/worker_group.h), the processes a launcher starts:
// a worker that says it is done is ended and counts as a success; a failure is reported
// with the worker's stderr; nothing is left running.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/types.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <string>

#include "support/expect.h"
#include "support/temp_dir.h"
#include "volt/strategies/launchers/worker_group.h"

namespace {

using volt::strategies::launchers::WorkerGroup;
using volt::strategies::launchers::WorkerSpec;

WorkerSpec shell(int64_t rank, const std::string& script) {
  WorkerSpec spec;
  spec.rank = rank;
  spec.argv = {"/bin/sh", "-c", script};
  return spec;
}

bool alive(pid_t pid) {
  return ::kill(pid, 0) == 0 || errno != ESRCH;
}

}  // namespace

TEST(WorkerGroup, AWorkerThatSaysItIsDoneIsEndedAndCountsAsASuccess) {
  volt::testing::TempDir dir;
  const std::string marker = dir.file("done.0");
  WorkerGroup group;
  // Done, then it waits forever, as a spawned worker after its hand-back does.
  group.start(shell(0, "touch '" + marker + "'; exec sleep 600"));
  group.start(shell(1, "exit 0"));
  const auto start = std::chrono::steady_clock::now();
  const auto failure =
      group.wait([&](int64_t rank) { return std::filesystem::exists(dir.file("done." + std::to_string(rank))); });
  EXPECT_FALSE(failure.has_value()) << failure->describe();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  const auto exits = group.exits();
  ASSERT_EQ(exits.size(), 2u);
  for (const auto& e : exits) {
    EXPECT_FALSE(e.failed()) << e.describe();
    if (e.rank == 0) {
      EXPECT_TRUE(e.ended_by_launcher);
      EXPECT_EQ(e.signal, SIGKILL);
    } else {
      EXPECT_FALSE(e.ended_by_launcher);
    }
    EXPECT_FALSE(alive(e.pid)) << "pid " << e.pid << " is still there";
  }
}

TEST(WorkerGroup, AFailureStopsTheWorkersThatAreNotDoneAndNamesTheFailedOne) {
  volt::testing::TempDir dir;
  WorkerGroup group(std::chrono::milliseconds(500));
  group.start(shell(0, "exec sleep 600"));
  group.start(shell(1, "echo 'rank 1 gives up' >&2; exit 4"));
  const auto failure = group.wait([](int64_t) { return false; });
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->rank, 1);
  EXPECT_EQ(failure->exit_code, 4);
  EXPECT_TRUE(volt::testing::contains(failure->describe(), "rank 1 gives up")) << failure->describe();
  for (const auto& e : group.exits()) EXPECT_FALSE(alive(e.pid)) << "rank " << e.rank << " is still there";
  EXPECT_FALSE(group.any_running());
}
