// The hardware stack below a run: CPUAccelerator, DefaultEnvironment, Registry,
// AcceleratorConnector (flags -> Plan -> strategy) and SingleDeviceStrategy.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <ATen/Parallel.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include "support/temp_dir.h"
#include "support/expect.h"
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include "volt/accelerators/cpu_accelerator.h"
#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/core/error.h"
#include "volt/core/registry.h"
#include "volt/core/trainer_options.h"
#include "volt/environments/default_environment.h"
#include "volt/precision/precision.h"
#include "volt/strategies/single_device_strategy.h"

namespace {

namespace fs = std::filesystem;
using volt::ConfigError;
using volt::TrainerOptions;
using volt::accelerators::CPUAccelerator;
using volt::environments::DefaultEnvironment;
using volt::precision::ClipAlgorithm;
using volt::strategies::ReduceOp;
using volt::strategies::SingleDeviceStrategy;

int64_t hardware_threads() {
  return static_cast<int64_t>(std::max(1u, std::thread::hardware_concurrency()));
}

// Clears torchrun's variables for the guard's lifetime, sets the given ones, and puts the
// previous values back on destruction (tests in one binary share one environment).
class ScopedEnv {
 public:
  ScopedEnv() : ScopedEnv(std::initializer_list<std::pair<const char*, const char*>>{}) {}
  explicit ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> set) {
    for (const char* name :
         {"MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "NODE_RANK"}) {
      const char* old = std::getenv(name);
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
      ::unsetenv(name);
    }
    for (const auto& [k, v] : set) ::setenv(k, v, 1);
  }
  ~ScopedEnv() {
    for (const auto& [k, v] : saved_) {
      if (v) {
        ::setenv(k.c_str(), v->c_str(), 1);
      } else {
        ::unsetenv(k.c_str());
      }
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

using volt::testing::contains;
using volt::testing::error_message;

// ---------------------------------------------------------------- CPUAccelerator

TEST(CPUAccelerator, SetupDeviceSetsRequestedThreadsAndTeardownRestoresPrevious) {
  const int previous = at::get_num_threads();
  const int requested = previous > 1 ? previous - 1 : 2;
  CPUAccelerator accelerator(requested);
  EXPECT_EQ(accelerator.num_threads(), requested);
  accelerator.setup_device(c10::Device(c10::kCPU));
  EXPECT_EQ(at::get_num_threads(), requested);
  accelerator.teardown();
  EXPECT_EQ(at::get_num_threads(), previous);
}

TEST(CPUAccelerator, ZeroThreadsMeansEveryHardwareThread) {
  const int previous = at::get_num_threads();
  CPUAccelerator accelerator(0);
  EXPECT_EQ(accelerator.num_threads(), hardware_threads());
  accelerator.setup_device(c10::Device(c10::kCPU));
  EXPECT_EQ(at::get_num_threads(), hardware_threads());
  accelerator.teardown();
  EXPECT_EQ(at::get_num_threads(), previous);
}

TEST(CPUAccelerator, NegativeThreadCountThrowsConfigError) {
  const std::string msg = error_message<ConfigError>([] { CPUAccelerator accelerator(-2); });
  EXPECT_TRUE(contains(msg, "-2")) << msg;
}

TEST(CPUAccelerator, SetupDeviceRejectsNonCpuDevice) {
  CPUAccelerator accelerator(1);
  const int previous = at::get_num_threads();
  const std::string msg = error_message<ConfigError>([&] { accelerator.setup_device(c10::Device(c10::kCUDA, 0)); });
  EXPECT_TRUE(contains(msg, "cuda:0")) << msg;
  EXPECT_EQ(at::get_num_threads(), previous);
}

TEST(CPUAccelerator, DeviceStatsReportCpuAndMemory) {
  CPUAccelerator accelerator(1);
  const auto stats = accelerator.get_device_stats(c10::Device(c10::kCPU));
  ASSERT_TRUE(stats.count("cpu_percent"));
  ASSERT_TRUE(stats.count("rss_mb"));
  ASSERT_TRUE(stats.count("vm_total_mb"));
  EXPECT_GE(stats.at("cpu_percent"), 0.0);
  EXPECT_GT(stats.at("rss_mb"), 0.0);
  EXPECT_GT(stats.at("vm_total_mb"), 0.0);
  EXPECT_LE(stats.at("rss_mb"), stats.at("vm_total_mb"));
}

// BUG (src/accelerators/cpu_accelerator.cpp, get_device_stats): the first call on a
// thread divides the process's whole CPU time (since start) by the microseconds since the
// thread_local clock was initialised in that same call, so cpu_percent comes out in the
// millions. Expected: a share no larger than every core busy (e.g. measure the first
// interval from process start, or report 0 on the first call).
TEST(CPUAccelerator, FirstDeviceStatsReadingIsAPlausiblePercentage) {
  // Burn a little CPU so the process has CPU time to report.
  volatile double sink = 0;
  for (int i = 0; i < 2000000; ++i) sink = sink + i * 1e-9;
  CPUAccelerator accelerator(1);
  double first = -1;
  // A fresh thread: its thread_local sampling state starts empty, as on a first call.
  std::thread([&] { first = accelerator.get_device_stats(c10::Device(c10::kCPU)).at("cpu_percent"); }).join();
  EXPECT_GE(first, 0.0);
  EXPECT_LE(first, 100.0 * static_cast<double>(hardware_threads()) * 1.5);
}

TEST(CPUAccelerator, ParallelDevicesAreOneCpuPerId) {
  CPUAccelerator accelerator(1);
  EXPECT_EQ(accelerator.name(), "cpu");
  EXPECT_TRUE(accelerator.is_available());
  EXPECT_EQ(accelerator.auto_device_count(), 1);
  const auto devices = accelerator.get_parallel_devices({0, 1, 2});
  ASSERT_EQ(devices.size(), 3u);
  for (const auto& d : devices) EXPECT_TRUE(d.is_cpu());
}

// ---------------------------------------------------------------- DefaultEnvironment

TEST(DefaultEnvironment, DefaultsToOneLocalProcess) {
  ScopedEnv env;
  DefaultEnvironment e;
  EXPECT_EQ(e.name(), "default");
  EXPECT_FALSE(e.creates_processes_externally());
  EXPECT_EQ(e.world_size(), 1);
  EXPECT_EQ(e.global_rank(), 0);
  EXPECT_EQ(e.local_rank(), 0);
  EXPECT_EQ(e.node_rank(), 0);
  EXPECT_EQ(e.main_address(), "127.0.0.1");
  // No MASTER_PORT: a port nobody listens on is picked for the job Volt will launch.
  EXPECT_GT(e.main_port(), 0);
  EXPECT_LE(e.main_port(), 65535);
}

TEST(DefaultEnvironment, ReadsTorchrunVariables) {
  ScopedEnv env({{"MASTER_ADDR", "10.1.2.3"},
                 {"MASTER_PORT", "12345"},
                 {"RANK", "5"},
                 {"LOCAL_RANK", "1"},
                 {"WORLD_SIZE", "8"},
                 {"GROUP_RANK", "2"}});
  DefaultEnvironment e;
  EXPECT_TRUE(e.creates_processes_externally());
  EXPECT_EQ(e.main_address(), "10.1.2.3");
  EXPECT_EQ(e.main_port(), 12345);
  EXPECT_EQ(e.global_rank(), 5);
  EXPECT_EQ(e.local_rank(), 1);
  EXPECT_EQ(e.world_size(), 8);
  EXPECT_EQ(e.node_rank(), 2);
}

TEST(DefaultEnvironment, NodeRankFallsBackToNodeRankVariable) {
  ScopedEnv env({{"NODE_RANK", "3"}, {"WORLD_SIZE", "8"}, {"RANK", "7"}});
  DefaultEnvironment e;
  EXPECT_EQ(e.node_rank(), 3);
}

TEST(DefaultEnvironment, SettersOverrideLayout) {
  ScopedEnv env;
  DefaultEnvironment e;
  e.set_world_size(4);
  e.set_global_rank(3);
  EXPECT_EQ(e.world_size(), 4);
  EXPECT_EQ(e.global_rank(), 3);
}

TEST(DefaultEnvironment, NonNumericRankThrowsNamingTheVariable) {
  ScopedEnv env({{"RANK", "abc"}, {"WORLD_SIZE", "2"}});
  const std::string msg = error_message<ConfigError>([] { DefaultEnvironment e; });
  EXPECT_TRUE(contains(msg, "RANK")) << msg;
  EXPECT_TRUE(contains(msg, "abc")) << msg;
}

TEST(DefaultEnvironment, PortOutOfRangeThrowsNamingTheVariable) {
  ScopedEnv env({{"MASTER_PORT", "70000"}});
  const std::string msg = error_message<ConfigError>([] { DefaultEnvironment e; });
  EXPECT_TRUE(contains(msg, "MASTER_PORT")) << msg;
  EXPECT_TRUE(contains(msg, "70000")) << msg;
}

TEST(DefaultEnvironment, RankNotBelowWorldSizeThrows) {
  ScopedEnv env({{"RANK", "4"}, {"WORLD_SIZE", "4"}});
  const std::string msg = error_message<ConfigError>([] { DefaultEnvironment e; });
  EXPECT_TRUE(contains(msg, "RANK")) << msg;
  EXPECT_TRUE(contains(msg, "WORLD_SIZE")) << msg;
}

TEST(DefaultEnvironment, NegativeLocalRankThrowsNamingTheVariable) {
  ScopedEnv env({{"LOCAL_RANK", "-1"}});
  const std::string msg = error_message<ConfigError>([] { DefaultEnvironment e; });
  EXPECT_TRUE(contains(msg, "LOCAL_RANK")) << msg;
}

TEST(DefaultEnvironment, DetectNeedsBothWorldSizeAndRank) {
  {
    ScopedEnv env;
    EXPECT_FALSE(DefaultEnvironment::detect());
  }
  {
    ScopedEnv env({{"WORLD_SIZE", "2"}});
    EXPECT_FALSE(DefaultEnvironment::detect());
  }
  {
    ScopedEnv env({{"RANK", "0"}});
    EXPECT_FALSE(DefaultEnvironment::detect());
  }
  {
    ScopedEnv env({{"WORLD_SIZE", "2"}, {"RANK", "1"}});
    EXPECT_TRUE(DefaultEnvironment::detect());
  }
}

// ---------------------------------------------------------------- Registry

struct Shape {
  virtual ~Shape() = default;
  virtual int sides() const = 0;
};
struct Polygon : Shape {
  explicit Polygon(int n) : n_(n) {}
  int sides() const override { return n_; }
  int n_;
};

TEST(Registry, AddCreateContainsListAndKnownKeys) {
  volt::Registry<Shape, int> registry("shape");
  EXPECT_FALSE(registry.contains("square"));
  EXPECT_EQ(registry.known_keys(), "");
  registry.add("square", "four sides", [](int scale) { return std::make_shared<Polygon>(4 * scale); });
  registry.add("triangle", "three sides", [](int scale) { return std::make_shared<Polygon>(3 * scale); });
  EXPECT_TRUE(registry.contains("square"));
  EXPECT_TRUE(registry.contains("triangle"));
  EXPECT_EQ(registry.create("square", 1)->sides(), 4);
  EXPECT_EQ(registry.create("triangle", 2)->sides(), 6);
  EXPECT_EQ(registry.description("triangle"), "three sides");
  const std::vector<std::pair<std::string, std::string>> expected = {{"square", "four sides"},
                                                                     {"triangle", "three sides"}};
  EXPECT_EQ(registry.list(), expected);
  EXPECT_EQ(registry.known_keys(), "square, triangle");
}

TEST(Registry, AddReplacesAnExistingKey) {
  volt::Registry<Shape, int> registry("shape");
  registry.add("square", "old", [](int) { return std::make_shared<Polygon>(0); });
  registry.add("square", "new", [](int) { return std::make_shared<Polygon>(4); });
  EXPECT_EQ(registry.list().size(), 1u);
  EXPECT_EQ(registry.description("square"), "new");
  EXPECT_EQ(registry.create("square", 1)->sides(), 4);
}

TEST(Registry, UnknownKeyThrowsConfigErrorListingKnownKeys) {
  volt::Registry<Shape, int> registry("shape");
  registry.add("square", "", [](int) { return std::make_shared<Polygon>(4); });
  registry.add("hexagon", "", [](int) { return std::make_shared<Polygon>(6); });
  const std::string msg = error_message<ConfigError>([&] { registry.create("circle", 1); });
  EXPECT_TRUE(contains(msg, "circle")) << msg;
  EXPECT_TRUE(contains(msg, "shape")) << msg;
  EXPECT_TRUE(contains(msg, "hexagon, square")) << msg;
  EXPECT_THROW(registry.description("circle"), ConfigError);
}

// ---------------------------------------------------------------- SingleDeviceStrategy

// A module that builds its layer in configure_model, as Lightning recommends.
class LazyModule : public volt::Module {
 public:
  at::Tensor training_step(volt::Batch&, volt::StepContext&) override { return {}; }
  volt::OptimizerConfig configure_optimizers() override { return {}; }
  void configure_model() override {
    ++configure_model_calls;
    if (!fc) fc = register_module("fc", torch::nn::Linear(3, 2));
  }
  int configure_model_calls = 0;
  torch::nn::Linear fc{nullptr};
};

using volt::testing::TempDir;

std::shared_ptr<SingleDeviceStrategy> make_strategy(int64_t threads = 1) {
  ScopedEnv env;
  return std::make_shared<SingleDeviceStrategy>(
      c10::Device(c10::kCPU), std::make_shared<CPUAccelerator>(threads), std::make_shared<volt::precision::Precision>(),
      std::make_shared<DefaultEnvironment>(), std::make_shared<volt::checkpoint_io::TorchCheckpointIO>());
}

TEST(SingleDeviceStrategy, NullComponentThrowsConfigError) {
  EXPECT_THROW(SingleDeviceStrategy(c10::Device(c10::kCPU), nullptr, std::make_shared<volt::precision::Precision>(),
                                    std::make_shared<DefaultEnvironment>(),
                                    std::make_shared<volt::checkpoint_io::TorchCheckpointIO>()),
               ConfigError);
}

TEST(SingleDeviceStrategy, BatchToDeviceLeavesCpuTensorsInPlace) {
  auto strategy = make_strategy();
  volt::Batch batch = {at::ones({4, 3}), at::zeros({4}, at::kLong), at::Tensor()};
  const void* p0 = batch[0].data_ptr();
  const void* p1 = batch[1].data_ptr();
  strategy->batch_to_device(batch);
  ASSERT_EQ(batch.size(), 3u);
  EXPECT_EQ(batch[0].data_ptr(), p0);
  EXPECT_EQ(batch[1].data_ptr(), p1);
  EXPECT_EQ(batch[1].scalar_type(), at::kLong);
  EXPECT_FALSE(batch[2].defined());
}

TEST(SingleDeviceStrategy, SetupCallsConfigureModelAndKeepsCpuModuleInPlace) {
  auto strategy = make_strategy();
  LazyModule module;
  strategy->setup(module);
  EXPECT_EQ(module.configure_model_calls, 1);
  ASSERT_TRUE(module.fc);
  const void* before = module.fc->weight.data_ptr();
  for (const auto& p : module.parameters()) EXPECT_TRUE(p.device().is_cpu());
  strategy->setup(module);  // a second stage: already on the device, nothing moves
  EXPECT_EQ(module.configure_model_calls, 2);
  EXPECT_EQ(module.fc->weight.data_ptr(), before);
}

TEST(SingleDeviceStrategy, SetupEnvironmentAppliesThreadsAndTeardownRestores) {
  const int previous = at::get_num_threads();
  const int requested = previous > 1 ? previous - 1 : 2;
  auto strategy = make_strategy(requested);
  strategy->setup_environment();
  EXPECT_EQ(at::get_num_threads(), requested);
  strategy->teardown();
  EXPECT_EQ(at::get_num_threads(), previous);
}

TEST(SingleDeviceStrategy, BackwardComputesGradients) {
  auto strategy = make_strategy();
  at::Tensor w = at::ones({3}).requires_grad_();
  const at::Tensor x = at::tensor({1.0f, 2.0f, 3.0f});
  strategy->backward((w * x).sum());
  ASSERT_TRUE(w.grad().defined());
  EXPECT_TRUE(w.grad().equal(x));
}

TEST(SingleDeviceStrategy, ClipGradientsByNormScalesTotalNormToMax) {
  auto strategy = make_strategy();
  at::Tensor a = at::zeros({2}).requires_grad_();
  at::Tensor b = at::zeros({3}).requires_grad_();
  torch::optim::SGD sgd({a, b}, torch::optim::SGDOptions(0.1));
  a.mutable_grad() = at::tensor({3.0f, 4.0f});
  b.mutable_grad() = at::tensor({0.0f, 0.0f, 12.0f});  // total norm 13
  strategy->clip_gradients(sgd, 1.3, ClipAlgorithm::kNorm);
  const double total = std::sqrt(a.grad().pow(2).sum().item<double>() + b.grad().pow(2).sum().item<double>());
  EXPECT_NEAR(total, 1.3, 1e-5);
  // Direction kept: each gradient scaled by the same factor.
  EXPECT_NEAR(a.grad()[0].item<double>(), 0.3, 1e-5);
  EXPECT_NEAR(b.grad()[2].item<double>(), 1.2, 1e-5);
}

TEST(SingleDeviceStrategy, ClipGradientsByValueBoundsEveryEntry) {
  auto strategy = make_strategy();
  at::Tensor a = at::zeros({4}).requires_grad_();
  torch::optim::SGD sgd({a}, torch::optim::SGDOptions(0.1));
  a.mutable_grad() = at::tensor({-5.0f, 0.25f, 3.0f, -0.5f});
  strategy->clip_gradients(sgd, 1.0, ClipAlgorithm::kValue);
  EXPECT_LE(a.grad().abs().max().item<double>(), 1.0);
  EXPECT_TRUE(a.grad().equal(at::tensor({-1.0f, 0.25f, 1.0f, -0.5f})));
}

TEST(SingleDeviceStrategy, OptimizerStepStepsThroughPrecision) {
  auto strategy = make_strategy();
  at::Tensor w = at::ones({2}).requires_grad_();
  torch::optim::SGD sgd({w}, torch::optim::SGDOptions(0.5));
  w.mutable_grad() = at::tensor({1.0f, -2.0f});
  EXPECT_TRUE(strategy->optimizer_step(sgd));
  EXPECT_TRUE(w.detach().equal(at::tensor({0.5f, 2.0f})));
}

TEST(SingleDeviceStrategy, CollectivesAreIdentityOnOneProcess) {
  auto strategy = make_strategy();
  EXPECT_EQ(strategy->world_size(), 1);
  EXPECT_EQ(strategy->global_rank(), 0);
  EXPECT_EQ(strategy->local_rank(), 0);
  EXPECT_TRUE(strategy->is_global_zero());
  EXPECT_EQ(strategy->launcher_kind(), volt::strategies::LauncherKind::kNone);
  for (ReduceOp op : {ReduceOp::kMean, ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
    EXPECT_DOUBLE_EQ(strategy->reduce(2.5, op), 2.5);
  }
  EXPECT_NO_THROW(strategy->barrier("test"));
  EXPECT_TRUE(strategy->reduce_boolean_decision(true, true));
  EXPECT_FALSE(strategy->reduce_boolean_decision(false, true));
  EXPECT_TRUE(strategy->reduce_boolean_decision(true, false));
  EXPECT_FALSE(strategy->reduce_boolean_decision(false, false));
}

TEST(SingleDeviceStrategy, SaveLoadAndRemoveCheckpointGoThroughCheckpointIO) {
  TempDir dir;
  auto strategy = make_strategy();
  volt::Checkpoint ckpt;
  ckpt.tensors["state_dict.w"] = at::tensor({1.0f, 2.0f});
  ckpt.meta["format_version"] = volt::kCheckpointFormatVersion;
  const std::string path = (dir.path() / "a.ckpt").string();
  strategy->save_checkpoint(ckpt, path);
  ASSERT_TRUE(fs::exists(path));
  const volt::Checkpoint loaded = strategy->load_checkpoint(path);
  ASSERT_TRUE(loaded.tensors.count("state_dict.w"));
  EXPECT_TRUE(loaded.tensors.at("state_dict.w").equal(ckpt.tensors.at("state_dict.w")));
  strategy->remove_checkpoint(path);
  EXPECT_FALSE(fs::exists(path));
  EXPECT_NO_THROW(strategy->remove_checkpoint(path));
}

}  // namespace
