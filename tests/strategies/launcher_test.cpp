// Strategy::launcher() and the launchers' decisions that need no second process: which
// strategy gets which launcher, and what a spawn launcher does in a process that is not its
// parent. (Launching real workers: tests/distributed/distributed_test.cpp.)
#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>
#include <memory>
#include <string>

#include "support/expect.h"
#include "support/temp_dir.h"
#include "volt/accelerators/hardware_probe.h"
#include "volt/connectors/accelerator_connector.h"
#include "volt/core/error.h"
#include "volt/strategies/launchers/spawn_launcher.h"
#include "volt/strategies/launchers/subprocess_launcher.h"
#include "volt/strategies/launchers/xla_launcher.h"

namespace {

using volt::Environ;
using volt::connectors::AcceleratorConnector;
using Vars = std::map<std::string, std::string>;

std::shared_ptr<volt::strategies::Strategy> stack(const std::string& strategy, const std::string& devices,
                                                  const Vars& vars = {}) {
  volt::TrainerOptions o;
  o.accelerator = "cpu";
  o.strategy = strategy;
  o.devices = devices;
  volt::accelerators::HardwareProbe hw = volt::accelerators::HardwareProbe::assume("cpu", Environ());
  hw.cpu_cores = 4;
  return AcceleratorConnector(o, Environ(vars), hw).create_strategy();
}

const Vars kTorchrun{{"RANK", "1"},
                     {"WORLD_SIZE", "2"},
                     {"LOCAL_RANK", "1"},
                     {"LOCAL_WORLD_SIZE", "2"},
                     {"MASTER_ADDR", "127.0.0.1"},
                     {"MASTER_PORT", "29561"}};

/// A job's layout, as a test wants it.
class FakeEnvironment : public volt::environments::ClusterEnvironment {
 public:
  explicit FakeEnvironment(bool external) : external_(external) {}
  std::string name() const override { return "fake"; }
  bool creates_processes_externally() const override { return external_; }
  std::string main_address() const override { return "127.0.0.1"; }
  int main_port() const override { return 29562; }
  int64_t world_size() const override { return 2; }
  int64_t global_rank() const override { return 1; }
  int64_t local_rank() const override { return 1; }
  int64_t node_rank() const override { return 0; }
  void set_world_size(int64_t) override {}
  void set_global_rank(int64_t) override {}

 private:
  bool external_;
};

/// Counts what a launcher asked of it.
class CountingStage : public volt::strategies::launchers::LaunchedStage {
 public:
  std::string name() const override { return "fit"; }
  void run(const std::string& dir) override {
    ++runs;
    last_dir = dir;
  }
  void save_start(const std::string&) override { ++saves; }
  void hand_back(const std::string&) override { ++hand_backs; }
  void take_back(const std::string&) override { ++take_backs; }
  int runs = 0, saves = 0, hand_backs = 0, take_backs = 0;
  std::string last_dir;
};

/// Sets (or, with nullptr, removes) a variable while it lives.
class ScopedVar {
 public:
  ScopedVar(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedVar() {
    if (had_) {
      ::setenv(name_, old_.c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

}  // namespace

TEST(StrategyLauncher, EachStrategyHasTheLauncherItsProcessesNeed) {
  EXPECT_EQ(stack("single_device", "1")->launcher(), nullptr) << "one process needs no launcher";

  auto ddp = stack("ddp", "2");
  ASSERT_NE(ddp->launcher(), nullptr);
  EXPECT_NE(dynamic_cast<volt::strategies::launchers::SubprocessLauncher*>(ddp->launcher()), nullptr);
  EXPECT_EQ(ddp->launcher()->name(), "subprocess");
  EXPECT_FALSE(ddp->launcher()->is_interactive_compatible()) << "it re-runs the program";

  EXPECT_EQ(stack("ddp", "2", kTorchrun)->launcher(), nullptr) << "torchrun started the processes";

  auto spawn = stack("ddp_spawn", "2");
  ASSERT_NE(spawn->launcher(), nullptr);
  EXPECT_EQ(spawn->launcher()->name(), "spawn");
  EXPECT_EQ(dynamic_cast<volt::strategies::launchers::XLALauncher*>(spawn->launcher()), nullptr);

  // A worker of the spawn launcher runs its stage call through the launcher too.
  Vars worker = kTorchrun;
  worker["VOLT_SPAWN_DIR"] = "/nonexistent";
  auto spawned = stack("ddp_spawn", "2", worker);
  ASSERT_NE(spawned->launcher(), nullptr);
  EXPECT_EQ(spawned->launcher()->name(), "spawn");
}

TEST(SpawnLauncher, AProcessAnotherLauncherStartedIsRefusedNamingTheEnvironment) {
  ScopedVar dir("VOLT_SPAWN_DIR", nullptr);
  volt::strategies::launchers::SpawnLauncher launcher(std::make_shared<FakeEnvironment>(true), 2);
  CountingStage stage;
  try {
    launcher.launch(stage);
    FAIL() << "launch ran in a process the fake environment started";
  } catch (const volt::ConfigError& e) {
    EXPECT_TRUE(volt::testing::mentions(e.what(), {"spawn launcher", "fake environment", "rank 1", "ddp"})) << e.what();
  }
  EXPECT_EQ(stage.runs + stage.saves + stage.hand_backs + stage.take_backs, 0);
}

TEST(SpawnLauncher, AWorkerLeavesTheStageCallsItWasNotStartedFor) {
  volt::testing::TempDir tmp;
  ScopedVar dir("VOLT_SPAWN_DIR", tmp.str().c_str());
  ScopedVar call("VOLT_SPAWN_CALL", "0");  // calls count from 1: none of this process's is the worker's
  volt::strategies::launchers::XLALauncher launcher(std::make_shared<FakeEnvironment>(true), 2);
  EXPECT_EQ(launcher.name(), "xla");
  CountingStage stage;
  launcher.launch(stage);
  launcher.launch(stage);
  EXPECT_EQ(stage.runs + stage.saves + stage.hand_backs + stage.take_backs, 0);
  launcher.kill(15);  // no workers of its own: nothing to end
}
