// The TPU path on lazy tensors, in one process: the device runtime (CPU emulation and a
// library loaded at run time through the C entry point), the plan, precision rules, bad
// input, and single_xla training against the CPU run of the same model and seed.
#include <dlfcn.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ops/arange.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/pooling.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>

#include "support/boring_module.h"
#include "support/expect.h"
#include "volt/accelerators/tpu_runtime.h"
#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/connectors/accelerator_connector.h"
#include "volt/core/device_placement.h"
#include "volt/core/environ.h"
#include "volt/core/error.h"
#include "volt/core/seed.h"
#include "volt/data/idx.h"
#include "volt/strategies/single_xla_strategy.h"
#include "volt/strategies/xla_gradient_sync.h"
#include "volt/trainer/trainer.h"

namespace {

using volt::ConfigError;
using volt::NotSupportedError;
using volt::Trainer;
using volt::TrainerOptions;
using volt::accelerators::TpuRuntime;
using volt::testing::BoringModule;
using volt::testing::contains;
using volt::testing::error_message;
using volt::testing::quiet_options;
using volt::testing::random_loader;
using volt::testing::ScratchDir;

/// Sets (value) or unsets (nullopt) variables for one test, restoring them afterwards.
class EnvGuard {
 public:
  EnvGuard(std::initializer_list<std::pair<std::string, std::optional<std::string>>> vars) {
    for (const char* k : {"VOLT_TPU_RUNTIME_LIBRARY", "VOLT_TPU_EMULATION", "VOLT_TPU_EMULATION_HOST",
                          "TPU_ACCELERATOR_TYPE", "PJRT_DEVICE", "TPU_NAME", "COLAB_TPU_ADDR", "TPU_WORKER_ID"}) {
      remember(k);
      ::unsetenv(k);
    }
    for (const auto& [k, v] : vars) {
      remember(k);
      if (v)
        ::setenv(k.c_str(), v->c_str(), 1);
      else
        ::unsetenv(k.c_str());
    }
  }
  ~EnvGuard() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second)
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      else
        ::unsetenv(it->first.c_str());
    }
  }

 private:
  void remember(const std::string& k) {
    const char* old = std::getenv(k.c_str());
    saved_.emplace_back(k, old ? std::optional<std::string>(old) : std::nullopt);
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

EnvGuard emulation(const std::string& host = "v3-8") {
  return EnvGuard{{"VOLT_TPU_EMULATION", "lazy"}, {"VOLT_TPU_EMULATION_HOST", host}};
}

TrainerOptions tpu_options(const std::string& root, const std::string& devices = "1") {
  TrainerOptions o = quiet_options(root);
  o.accelerator = "tpu";
  o.devices = devices;
  return o;
}

/// BoringModule that keeps every training loss, read after the step (so after mark_step).
class LossRecorder : public BoringModule {
 public:
  using BoringModule::BoringModule;
  void on_train_batch_end(const at::Tensor& loss, volt::Batch&, int64_t) override {
    losses.push_back(loss.item<double>());
  }
  std::vector<double> losses;
};

std::vector<double> boring_losses(const std::string& accelerator, int64_t steps, const std::string& root,
                                  std::vector<at::Tensor>* weights = nullptr, int64_t in = 32) {
  TrainerOptions o = accelerator == "tpu" ? tpu_options(root) : quiet_options(root);
  o.max_steps = steps;
  o.max_epochs = -1;
  volt::seed_everything(7);
  LossRecorder model(in);
  Trainer trainer(o);
  trainer.fit(model, random_loader(16 * steps, 16, 5, in));
  if (weights) {
    for (const auto& p : model.parameters()) weights->push_back(p.detach().to(c10::kCPU));
  }
  if (accelerator == "tpu") {
    for (const auto& p : model.parameters()) EXPECT_EQ(p.device(), c10::Device(c10::kLazy, 0));
  }
  return model.losses;
}

void expect_close(const std::vector<double>& a, const std::vector<double>& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol) << "step " << i;
}

// ------------------------------------------------------------------ runtime and plan

TEST(TpuEmulation, PlanReportsTheRuntimeAndTheHostsChipCount) {
  auto env = emulation("v3-8");
  ScratchDir dir;
  volt::connectors::AcceleratorConnector one(tpu_options(dir.path()));
  const auto& p = one.plan();
  EXPECT_EQ(p.accelerator, "tpu");
  EXPECT_EQ(p.strategy, "single_xla");
  EXPECT_EQ(p.tpu_platform, "emulated");
  EXPECT_EQ(p.tpu_runtime, "emulation:lazy:v3-8");
  EXPECT_TRUE(contains(p.tpu_runtime_info, "v3-8")) << p.tpu_runtime_info;
  EXPECT_TRUE(contains(p.tpu_runtime_info, "8 lazy device")) << p.tpu_runtime_info;
  EXPECT_EQ(p.root_device, "lazy:0");
  EXPECT_TRUE(contains(p.describe(), "tpu_runtime")) << p.describe();
  EXPECT_TRUE(contains(p.to_json(), "\"tpu_runtime\":\"emulation:lazy:v3-8\"")) << p.to_json();

  volt::connectors::AcceleratorConnector all(tpu_options(dir.path(), "auto"));
  EXPECT_EQ(all.plan().num_devices, 8);
  EXPECT_EQ(all.plan().strategy, "xla");
  auto v4 = emulation("v4-8");
  volt::connectors::AcceleratorConnector four(tpu_options(dir.path(), "auto"));
  EXPECT_EQ(four.plan().num_devices, 4);
}

TEST(TpuEmulation, TpuWithNeitherRuntimeIsAnErrorThatSaysWhatWasLookedFor) {
  ScratchDir dir;
  {
    EnvGuard none{};
    const std::string msg = error_message<NotSupportedError>([&] { Trainer t(tpu_options(dir.path())); });
    for (const char* word : {"VOLT_TPU_RUNTIME_LIBRARY", "VOLT_TPU_EMULATION", "TPU_ACCELERATOR_TYPE", "libtpu"}) {
      EXPECT_TRUE(contains(msg, word)) << msg;
    }
  }
  {
    // A TPU host is detected, but no runtime library is named: the plan shows it, the
    // Trainer refuses it at construction.
    EnvGuard host{{"TPU_ACCELERATOR_TYPE", "v3-8"}};
    volt::connectors::AcceleratorConnector connector(tpu_options(dir.path()));
    EXPECT_EQ(connector.plan().tpu_runtime, "none");
    EXPECT_TRUE(contains(connector.plan().tpu_runtime_info, "VOLT_TPU_RUNTIME_LIBRARY"));
    const std::string msg = error_message<NotSupportedError>([&] { Trainer t(tpu_options(dir.path())); });
    EXPECT_TRUE(contains(msg, "VOLT_TPU_RUNTIME_LIBRARY (unset)")) << msg;
    EXPECT_TRUE(contains(msg, "VOLT_TPU_EMULATION (unset)")) << msg;
  }
}

TEST(TpuEmulation, BadSettingsAreConfigErrors) {
  ScratchDir dir;
  {
    EnvGuard bad{{"VOLT_TPU_EMULATION", "xla"}};
    const std::string msg = error_message<ConfigError>([&] { Trainer t(tpu_options(dir.path())); });
    EXPECT_TRUE(contains(msg, "VOLT_TPU_EMULATION=xla") && contains(msg, "lazy")) << msg;
  }
  {
    EnvGuard bad{{"VOLT_TPU_EMULATION", "lazy"}, {"VOLT_TPU_EMULATION_HOST", "v9-8"}};
    const std::string msg = error_message<ConfigError>([&] { Trainer t(tpu_options(dir.path())); });
    EXPECT_TRUE(contains(msg, "v9-8")) << msg;
  }
}

TEST(TpuEmulation, PrecisionOnTpuIs32TrueOrBf16TrueOnly) {
  auto env = emulation();
  ScratchDir dir;
  for (const char* bad : {"16-mixed", "bf16-mixed", "16-true", "64-true"}) {
    TrainerOptions o = tpu_options(dir.path());
    o.precision = bad;
    const std::string msg = error_message<ConfigError>([&] { Trainer t(o); });
    EXPECT_TRUE(contains(msg, std::string("precision='") + bad + "'")) << msg;
    EXPECT_TRUE(contains(msg, "Accepted on TPU: 32-true, bf16-true")) << msg;
  }
  TrainerOptions ok = tpu_options(dir.path());
  ok.precision = "bf16-true";
  EXPECT_NO_THROW(Trainer t(ok));
}

TEST(TpuEmulation, ThreeDevicesOnAnEightCoreHostListsTheAllowedValues) {
  auto env = emulation("v3-8");
  ScratchDir dir;
  const std::string msg = error_message<ConfigError>([&] { Trainer t(tpu_options(dir.path(), "3")); });
  EXPECT_TRUE(contains(msg, "devices=3")) << msg;
  EXPECT_TRUE(contains(msg, "devices=1 or devices=8")) << msg;
}

TEST(TpuEmulation, XlaPlansSpawnInTheParentAndTrainInASpawnedWorker) {
  auto env = emulation("v3-8");
  ScratchDir dir;
  TrainerOptions all_threads = tpu_options(dir.path(), "8");
  all_threads.num_threads = 0;
  volt::connectors::AcceleratorConnector parent(all_threads);
  EXPECT_EQ(parent.plan().strategy, "xla");
  EXPECT_EQ(parent.plan().launcher, "spawn");
  EXPECT_FALSE(parent.plan().processes_started_externally);
  EXPECT_EQ(parent.plan().world_size, 8);
  const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  EXPECT_EQ(parent.plan().num_threads, std::max<int64_t>(1, cores / 8)) << "8 emulated devices share the cores";
  // What the spawn launcher gives worker 5: it trains (no launcher of its own) on its device.
  EnvGuard worker{{"VOLT_TPU_EMULATION", "lazy"}, {"VOLT_TPU_EMULATION_HOST", "v3-8"},
                  {"VOLT_SPAWN_DIR", dir.path()},  {"RANK", "5"},
                  {"LOCAL_RANK", "5"},             {"WORLD_SIZE", "8"},
                  {"GROUP_RANK", "0"},             {"MASTER_ADDR", "127.0.0.1"},
                  {"MASTER_PORT", "29871"}};
  volt::connectors::AcceleratorConnector spawned(tpu_options(dir.path(), "8"));
  const auto& p = spawned.plan();
  EXPECT_TRUE(p.processes_started_externally);
  EXPECT_EQ(p.launcher, "none");
  EXPECT_EQ(p.global_rank, 5);
  EXPECT_EQ(p.root_device, "lazy:5");
  EXPECT_EQ(p.main_port, 29871);
}

// ------------------------------------------------------------------ single_xla training

TEST(SingleXla, BoringModuleLossesMatchTheCpuRunWithin1e4) {
  ScratchDir dir;
  std::vector<at::Tensor> cpu_w, tpu_w;
  const auto cpu = boring_losses("cpu", 40, dir.path(), &cpu_w);
  std::vector<double> tpu;
  {
    auto env = emulation();
    tpu = boring_losses("tpu", 40, dir.path(), &tpu_w);
  }
  ASSERT_EQ(cpu.size(), 40u);
  EXPECT_GT(cpu.front() - cpu.back(), 0.0) << "the model must learn for the comparison to mean anything";
  expect_close(cpu, tpu, 1e-4);
  ASSERT_EQ(cpu_w.size(), tpu_w.size());
  for (size_t i = 0; i < cpu_w.size(); ++i) EXPECT_TRUE(cpu_w[i].allclose(tpu_w[i], 0, 1e-4));
}

TEST(SingleXla, EachStepIsOneCachedGraphNotAGrowingOne) {
  auto env = emulation();
  ScratchDir dir;
  // Input width 29: shapes no other test uses, so the compile cache starts cold here
  // even when every test runs in one process.
  boring_losses("tpu", 5, dir.path(), nullptr, 29);  // warm the compile cache for these shapes
  const int64_t uncached = TpuRuntime::uncached_compiles();
  const int64_t cached = TpuRuntime::cached_compiles();
  boring_losses("tpu", 30, dir.path(), nullptr, 29);
  // 30 steps of the same shapes reuse the graphs compiled before: a graph that grew every
  // step (a missing mark_step) would compile anew each time.
  EXPECT_EQ(TpuRuntime::uncached_compiles() - uncached, 0);
  EXPECT_GE(TpuRuntime::cached_compiles() - cached, 30);
}

/// Builds its layers in configure_model, on the module's device.
class ConfiguredModule : public BoringModule {
 public:
  ConfiguredModule() : BoringModule(32, 2) {}
  void configure_model() override {
    ++configure_calls;
    if (hidden) return;  // every stage calls it; build once
    built_on = device();
    hidden = register_module("hidden", volt::on_device(torch::nn::Linear(32, 2), device()));
  }
  at::Tensor training_step(volt::Batch& batch, volt::StepContext& ctx) override {
    for (const auto& p : parameters()) seen_devices.push_back(p.device());
    at::Tensor loss = at::cross_entropy_loss(hidden->forward(batch[0]) + layer->forward(batch[0]), batch[1]);
    ctx.log("train_loss", loss);
    return loss;
  }
  torch::nn::Linear hidden{nullptr};
  std::optional<c10::Device> built_on;
  std::vector<c10::Device> seen_devices;
  int configure_calls = 0;
};

TEST(SingleXla, ConfigureModelBuildsLayersOnTheDeviceAndConstructorLayersAreMoved) {
  auto env = emulation();
  ScratchDir dir;
  TrainerOptions o = tpu_options(dir.path());
  o.max_steps = 4;
  ConfiguredModule model;
  Trainer trainer(o);
  trainer.fit(model, random_loader(64, 16, 1));
  ASSERT_TRUE(model.built_on.has_value());
  EXPECT_EQ(*model.built_on, c10::Device(c10::kLazy, 0));
  ASSERT_FALSE(model.seen_devices.empty());
  for (const auto& d : model.seen_devices) EXPECT_EQ(d, c10::Device(c10::kLazy, 0));
  const auto metrics = trainer.test(model, random_loader(32, 16, 2));
  EXPECT_EQ(model.configure_calls, 2);
  EXPECT_TRUE(std::isfinite(metrics.at("test_loss")));
  // predict returns host tensors
  const auto preds = trainer.predict(model, random_loader(32, 16, 3));
  ASSERT_EQ(preds.size(), 2u);
  EXPECT_TRUE(preds[0].device().is_cpu());
}

/// Registers its own tensor in the constructor: Volt cannot re-point its member.
class OwnTensorModule : public BoringModule {
 public:
  OwnTensorModule() { scale = register_parameter("scale", at::ones({1})); }
  at::Tensor scale;
};

TEST(SingleXla, AModuleWhoseOwnTensorsCannotBeMovedIsRefusedWithTheFix) {
  auto env = emulation();
  ScratchDir dir;
  TrainerOptions o = tpu_options(dir.path());
  o.max_steps = 1;
  OwnTensorModule model;
  Trainer trainer(o);
  const std::string msg = error_message<NotSupportedError>([&] { trainer.fit(model, random_loader(16, 16, 1)); });
  EXPECT_TRUE(contains(msg, "scale")) << msg;
  EXPECT_TRUE(contains(msg, "configure_model")) << msg;
  EXPECT_TRUE(model.scale.device().is_cpu());
}

/// BoringModule with Adam, whose state lives on the device.
class TpuAdamModule : public LossRecorder {
 public:
  volt::OptimizerConfig configure_optimizers() override {
    return std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(1e-2));
  }
};

TEST(SingleXla, CheckpointsAreWrittenFromTheCpuAndTrainingResumes) {
  auto env = emulation();
  ScratchDir dir;
  TrainerOptions o = tpu_options(dir.path());
  o.max_steps = 6;
  o.max_epochs = -1;
  volt::seed_everything(3);
  TpuAdamModule model;
  Trainer trainer(o);
  trainer.fit(model, random_loader(160, 16, 4));
  const std::string path = dir / "mid.ckpt";
  trainer.save_checkpoint(path);
  ASSERT_TRUE(std::filesystem::exists(path));
  const volt::Checkpoint ckpt = volt::checkpoint_io::TorchCheckpointIO().load_checkpoint(path);
  for (const auto& [name, t] : ckpt.tensors) EXPECT_TRUE(t.device().is_cpu()) << name;
  for (const auto& p : model.parameters()) EXPECT_EQ(p.device().type(), c10::kLazy);

  // Resume in a fresh process-like setting: a new module and Trainer continue to step 10.
  TrainerOptions more = o;
  more.max_steps = 10;
  volt::seed_everything(3);
  TpuAdamModule resumed;
  Trainer again(more);
  again.fit(resumed, random_loader(160, 16, 4), nullptr, path);
  EXPECT_EQ(again.global_step(), 10);
  EXPECT_EQ(resumed.losses.size(), 4u);
}

TEST(SingleXla, Bf16TrueTrainsWithBfloat16WeightsOnTheDevice) {
  auto env = emulation();
  ScratchDir dir;
  TrainerOptions o = tpu_options(dir.path());
  o.precision = "bf16-true";
  o.max_steps = 10;
  o.max_epochs = -1;
  volt::seed_everything(7);
  LossRecorder model;
  Trainer trainer(o);
  trainer.fit(model, random_loader(160, 16, 5));
  for (const auto& p : model.parameters()) {
    EXPECT_EQ(p.scalar_type(), at::kBFloat16);
    EXPECT_EQ(p.to(c10::kCPU).scalar_type(), at::kBFloat16) << "the data, not only the metadata";
    EXPECT_EQ(p.device().type(), c10::kLazy);
  }
  ASSERT_EQ(model.losses.size(), 10u);
  EXPECT_LT(model.losses.back(), model.losses.front());
}

TEST(SingleXla, Bf16TrueAlsoConvertsLayersBuiltOnTheDeviceInConfigureModel) {
  auto env = emulation();
  ScratchDir dir;
  TrainerOptions o = tpu_options(dir.path());
  o.precision = "bf16-true";
  o.max_steps = 3;
  ConfiguredModule model;
  Trainer trainer(o);
  trainer.fit(model, random_loader(64, 16, 1));
  for (const auto& p : model.hidden->parameters()) {
    EXPECT_EQ(p.device().type(), c10::kLazy);
    EXPECT_EQ(p.to(c10::kCPU).scalar_type(), at::kBFloat16) << "Module::to(dtype) on lazy tensors keeps the data";
  }
}

TEST(PlaceOnDevice, BatchNormBuffersAndEmbeddingFollowAndASecondCallKeepsThem) {
  auto env = emulation();
  auto runtime = TpuRuntime::open(volt::accelerators::TpuRuntimeSpec::from_environ(volt::Environ::current()));
  const c10::Device lazy(c10::kLazy, 0);
  torch::nn::BatchNorm1d bn(4);
  torch::nn::Embedding emb(10, 4);
  const at::Tensor emb_before = emb->weight.detach().clone();
  volt::place_on_device(*bn, lazy);
  volt::place_on_device(*emb, lazy);
  for (const auto& b : bn->buffers()) EXPECT_EQ(b.device(), lazy);
  EXPECT_EQ(bn->running_mean.device(), lazy);
  EXPECT_TRUE(emb->weight.requires_grad());
  EXPECT_TRUE(emb->weight.to(c10::kCPU).equal(emb_before));
  // The members are the registered tensors: a training-mode forward updates the buffer
  // the module reports.
  bn->train();
  auto out = bn->forward(emb->forward(at::arange(6, at::TensorOptions().dtype(at::kLong)).to(lazy)));
  runtime->mark_step(lazy);
  EXPECT_FALSE(bn->named_buffers()["running_mean"].to(c10::kCPU).equal(at::zeros({4})));
  const auto* impl = bn->weight.unsafeGetTensorImpl();
  volt::place_on_device(*bn, lazy);  // already there: nothing is re-created
  EXPECT_EQ(bn->weight.unsafeGetTensorImpl(), impl);

  torch::optim::Adam adam(emb->parameters(), torch::optim::AdamOptions(0.1));
  out.sum().backward();
  adam.step();
  volt::move_optimizer_state(adam, c10::Device(c10::kCPU));
  for (auto& [key, state] : adam.state()) {
    EXPECT_TRUE(static_cast<torch::optim::AdamParamState&>(*state).exp_avg().device().is_cpu());
  }
  volt::move_optimizer_state(adam, lazy);
  for (auto& [key, state] : adam.state()) {
    EXPECT_EQ(static_cast<torch::optim::AdamParamState&>(*state).exp_avg().device(), lazy);
  }
}

TEST(XlaGradientSync, AveragesLazyGradientsThroughAHostBufferInTheirOwnDtype) {
  auto env = emulation();
  auto runtime = TpuRuntime::open(volt::accelerators::TpuRuntimeSpec::from_environ(volt::Environ::current()));
  const c10::Device lazy(c10::kLazy, 0);
  torch::nn::Linear fc(3, 2);
  torch::nn::Linear unused(2, 2);
  fc->to(at::kBFloat16);
  volt::place_on_device(*fc, lazy);
  volt::place_on_device(*unused, lazy);
  fc->forward(at::ones({4, 3}).to(lazy, at::kBFloat16)).sum().backward();
  runtime->mark_step(lazy);
  std::vector<at::Tensor> params = fc->parameters();
  for (const auto& p : unused->parameters()) params.push_back(p);
  const at::Tensor w_grad = fc->weight.grad().to(c10::kCPU, at::kFloat);  // 4 in every entry
  // The other process of a world of 2 contributes 2.0 for every element.
  int calls = 0;
  const int64_t n = volt::strategies::average_gradients_on_host(params, 2, [&](at::Tensor& buffer) {
    ++calls;
    EXPECT_TRUE(buffer.device().is_cpu());
    EXPECT_EQ(buffer.scalar_type(), at::kFloat);
    buffer.add_(2.0);
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(n, 3 * 2 + 2 + 2 * 2 + 2);
  EXPECT_EQ(fc->weight.grad().device(), lazy);
  EXPECT_EQ(fc->weight.grad().scalar_type(), at::kBFloat16);
  EXPECT_TRUE(fc->weight.grad().to(c10::kCPU, at::kFloat).allclose((w_grad + 2.0) / 2.0));
  ASSERT_TRUE(unused->weight.grad().defined());
  EXPECT_EQ(unused->weight.grad().device(), lazy);
  EXPECT_TRUE(unused->weight.grad().to(c10::kCPU).allclose(at::ones({2, 2})));  // (0 + 2) / 2
  EXPECT_THROW(volt::strategies::average_gradients_on_host(params, 0, [](at::Tensor&) {}), ConfigError);
}

// ------------------------------------------------------------------ the runtime library

TEST(TpuRuntimeLibrary, LoadsThroughTheEntryPointAndTrainsWithItsMarkStep) {
  EnvGuard env{{"VOLT_TPU_RUNTIME_LIBRARY", std::string(VOLT_TEST_TPU_RUNTIME)}};
  ScratchDir dir;
  TrainerOptions o = tpu_options(dir.path());
  o.max_steps = 5;
  o.max_epochs = -1;
  Trainer trainer(o);
  EXPECT_EQ(trainer.plan().tpu_runtime, std::string("library:") + VOLT_TEST_TPU_RUNTIME);
  EXPECT_TRUE(contains(trainer.plan().tpu_runtime_info, "volt-test-runtime")) << trainer.plan().tpu_runtime_info;
  // The library fills the version-2 table, collective included; the plan says so.
  EXPECT_TRUE(contains(trainer.plan().tpu_runtime_info, "its own all-reduce")) << trainer.plan().tpu_runtime_info;
  EXPECT_EQ(trainer.strategy().name(), "single_xla");
  void* lib = ::dlopen(VOLT_TEST_TPU_RUNTIME, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(lib, nullptr) << "the Trainer did not load the runtime library";
  auto mark_steps = reinterpret_cast<int (*)()>(::dlsym(lib, "volt_test_runtime_mark_steps"));
  ASSERT_NE(mark_steps, nullptr);
  const int before = mark_steps();
  LossRecorder model;
  trainer.fit(model, random_loader(80, 16, 5));
  EXPECT_EQ(model.losses.size(), 5u);
  // One step boundary after each optimizer step, one before each logged value is read.
  EXPECT_GE(mark_steps() - before, 10);
  for (const auto& p : model.parameters()) EXPECT_EQ(p.device().type(), c10::kLazy);
}

TEST(TpuRuntimeLibrary, ALibraryThatCannotBeLoadedOrHasNoEntryPointIsAConfigError) {
  ScratchDir dir;
  {
    EnvGuard env{{"VOLT_TPU_RUNTIME_LIBRARY", "/nonexistent/libtpu_runtime.so"}};
    const std::string msg = error_message<ConfigError>([&] { Trainer t(tpu_options(dir.path())); });
    EXPECT_TRUE(contains(msg, "could not be loaded") && contains(msg, "/nonexistent/libtpu_runtime.so")) << msg;
  }
  {
    Dl_info info{};
    ASSERT_NE(::dladdr(reinterpret_cast<void*>(&volt::place_on_device), &info), 0);
    EnvGuard env{{"VOLT_TPU_RUNTIME_LIBRARY", info.dli_fname}};  // libvolt itself: no entry point
    const std::string msg = error_message<ConfigError>([&] { Trainer t(tpu_options(dir.path())); });
    EXPECT_TRUE(contains(msg, "volt_tpu_runtime_init")) << msg;
  }
}

// ------------------------------------------------------------------ slow: Fashion-MNIST

/// The Fashion-MNIST example's CNN without dropout (random masks differ between devices).
class FashionCnn : public volt::Module {
 public:
  FashionCnn() {
    conv1_ = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 3).padding(1)));
    conv2_ = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 3).padding(1)));
    fc1_ = register_module("fc1", torch::nn::Linear(32 * 7 * 7, 64));
    fc2_ = register_module("fc2", torch::nn::Linear(64, 10));
  }
  at::Tensor training_step(volt::Batch& b, volt::StepContext& ctx) override {
    namespace F = torch::nn::functional;
    auto h = F::max_pool2d(F::relu(conv1_->forward(b[0])), F::MaxPool2dFuncOptions(2));
    h = F::max_pool2d(F::relu(conv2_->forward(h)), F::MaxPool2dFuncOptions(2));
    auto loss = at::cross_entropy_loss(fc2_->forward(F::relu(fc1_->forward(h.flatten(1)))), b[1]);
    ctx.log("train_loss", loss);
    return loss;
  }
  void on_train_batch_end(const at::Tensor& loss, volt::Batch&, int64_t) override {
    losses.push_back(loss.item<double>());
  }
  volt::OptimizerConfig configure_optimizers() override {
    return std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(1e-3));
  }
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
  std::vector<double> losses;
};

std::vector<double> fashion_losses(const std::string& accelerator, const std::string& root, int64_t steps) {
  auto train = volt::data::load_mnist_format(volt::data::kFashionMnistDir, true);
  volt::data::DataLoaderOptions lo;
  lo.batch_size = 64;
  lo.shuffle = true;
  lo.seed = 3;
  TrainerOptions o = accelerator == "tpu" ? tpu_options(root) : quiet_options(root);
  o.max_steps = steps;
  o.max_epochs = -1;
  volt::seed_everything(11);
  FashionCnn model;
  Trainer trainer(o);
  trainer.fit(model, std::make_shared<volt::data::DataLoader>(train, lo));
  return model.losses;
}

TEST(SingleXlaSlow, FashionMnistCnnLossesMatchTheCpuRunWithin1e4) {
  if (!std::filesystem::exists(volt::data::kFashionMnistDir)) {
    GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed (" << volt::data::kFashionMnistDir << ")";
  }
  ScratchDir dir;
  const auto cpu = fashion_losses("cpu", dir.path(), 30);
  std::vector<double> tpu;
  {
    auto env = emulation();
    tpu = fashion_losses("tpu", dir.path(), 30);
  }
  ASSERT_EQ(cpu.size(), 30u);
  EXPECT_LT(cpu.back(), cpu.front());
  expect_close(cpu, tpu, 1e-4);
}

}  // namespace
