// The CUDA path on a real GPU (label cuda): the accelerator, training on one GPU against the CPU,
// the precisions (16-mixed's scaler on CUDA's fused kernels, bf16-mixed, 16-true, bf16-true), dp,
// the CUDA generator in checkpoints and pinned loader memory. Every test skips, saying why, where
// this build has no CUDA or no GPU is visible. NCCL and Gloo on CUDA tensors are run by
// volt_distributed_tests (CudaDDP.*), since they need the launcher. scripts/gpu-check.sh runs both.
#include <cstdlib>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <ATen/Context.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/dropout.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include "support/boring_module.h"
#include "volt/accelerators/cuda_accelerator.h"
#include "volt/accelerators/devices.h"
#include "volt/callbacks/callback.h"
#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/core/error.h"
#include "volt/core/seed.h"
#include "volt/environments/default_environment.h"
#include "volt/precision/grad_scaler.h"
#include "volt/precision/mixed_precision.h"
#include "volt/precision/precision_registry.h"
#include "volt/strategies/dp_strategy.h"
#include "volt/strategies/fsdp_strategy.h"
#include "volt/trainer/trainer.h"

namespace {

using volt::ConfigError;
using volt::Trainer;
using volt::TrainerOptions;
using volt::accelerators::CUDAAccelerator;
using volt::accelerators::DevicesSpec;
using volt::testing::BoringModule;
using volt::testing::quiet_options;
using volt::testing::random_loader;
using volt::testing::ScratchDir;

/// Empty when this build can train on a visible GPU; else why not.
std::string no_gpu() {
  if (!CUDAAccelerator::compiled_with_cuda()) {
    return "this Volt build has no CUDA code (its LibTorch was built without CUDA: VOLT_WITH_CUDA unset)";
  }
  if (CUDAAccelerator::device_count() == 0) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    return std::string("no GPU is visible") +
           (visible != nullptr ? std::string(" (CUDA_VISIBLE_DEVICES=") + visible + ")" : std::string());
  }
  return "";
}

#define VOLT_NEEDS_GPU()                                                 \
  do {                                                                   \
    if (const std::string why = no_gpu(); !why.empty()) GTEST_SKIP() << why; \
  } while (false)

TrainerOptions on_gpu(const std::string& root) {
  TrainerOptions o = quiet_options(root);
  o.accelerator = "cuda";
  o.devices = "1";
  return o;
}

std::vector<at::Tensor> cpu_params(const volt::Module& m) {
  std::vector<at::Tensor> out;
  for (const auto& p : m.parameters()) out.push_back(p.detach().to(at::kCPU, at::kFloat));
  return out;
}

double max_abs_diff(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, (a[i] - b[i]).abs().max().item<double>());
  return d;
}

/// Records the dtypes of its parameters, inputs and logits in the training step.
class DtypeSpy : public BoringModule {
 public:
  at::Tensor training_step(volt::Batch& batch, volt::StepContext& ctx) override {
    const at::Tensor logits = forward(batch[0]);
    logits_dtype = logits.scalar_type();
    input_device = batch[0].device();
    const at::Tensor loss = at::cross_entropy_loss(logits, batch[1]);
    ctx.log("train_loss", loss);
    return loss;
  }
  at::ScalarType logits_dtype = at::kFloat;
  c10::Device input_device = c10::kCPU;
};

TEST(CudaAccelerator, ParsesDevicesAgainstTheVisibleGpus) {
  VOLT_NEEDS_GPU();
  const int64_t n = CUDAAccelerator::device_count();
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  CUDAAccelerator acc(n, visible != nullptr ? visible : "");
  EXPECT_EQ(acc.parse_devices(DevicesSpec::parse("-1")).size(), static_cast<size_t>(n));
  EXPECT_EQ(acc.parse_devices(DevicesSpec::parse("1")), (std::vector<int64_t>{0}));
  EXPECT_EQ(acc.parse_devices(DevicesSpec::parse("[0]")), (std::vector<int64_t>{0}));
  EXPECT_EQ(acc.get_parallel_devices({0}).front(), c10::Device(c10::kCUDA, 0));
  try {
    acc.parse_devices(DevicesSpec::parse(std::to_string(n + 1)));
    ADD_FAILURE() << "devices=" << n + 1 << " on " << n << " visible GPUs was accepted";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("visible GPU"), std::string::npos) << what;
    if (visible != nullptr && *visible != '\0') {
      EXPECT_NE(what.find(std::string("CUDA_VISIBLE_DEVICES=") + visible), std::string::npos) << what;
    }
  }
}

TEST(CudaAccelerator, DeviceStatsReportTheGpuMemory) {
  VOLT_NEEDS_GPU();
  CUDAAccelerator acc(CUDAAccelerator::device_count());
  acc.setup_device(c10::Device(c10::kCUDA, 0));
  const auto stats = acc.get_device_stats(c10::Device(c10::kCUDA, 0));
  ASSERT_EQ(stats.count("memory_total_mb"), 1u);
  EXPECT_GT(stats.at("memory_total_mb"), 1000.0);
  EXPECT_GE(stats.at("memory_free_mb"), 0.0);
  EXPECT_NEAR(stats.at("memory_free_mb") + stats.at("memory_used_mb"), stats.at("memory_total_mb"), 1e-6);
}

TEST(CudaTraining, OneGpuMatchesTheCpuRunWithinTolerance) {
  VOLT_NEEDS_GPU();
  ScratchDir dir;
  volt::seed_everything(7);
  BoringModule cpu;
  Trainer(quiet_options(dir.path() + "/cpu")).fit(cpu, random_loader(64, 8, 3));
  volt::seed_everything(7);
  BoringModule gpu;
  Trainer t(on_gpu(dir.path() + "/gpu"));
  t.fit(gpu, random_loader(64, 8, 3));
  EXPECT_EQ(t.global_step(), 8);
  EXPECT_TRUE(gpu.parameters().front().is_cuda());
  // CUDA and CPU kernels round differently; 8 SGD steps on a Linear(32, 2) stay close.
  EXPECT_LE(max_abs_diff(cpu_params(cpu), cpu_params(gpu)), 1e-5);
}

TEST(CudaPrecision, SixteenMixedForcedOverflowSkipsTheStepAndHalvesTheScale) {
  VOLT_NEEDS_GPU();
  volt::precision::GradScaler::Options so;
  so.init_scale = 1024.0;
  auto scaler = std::make_shared<volt::precision::GradScaler>(so);
  volt::precision::MixedPrecision p("16-mixed", c10::kCUDA, at::kHalf, scaler);
  at::Tensor w = at::zeros({4}, at::TensorOptions().device(at::kCUDA)).set_requires_grad(true);
  torch::optim::SGD sgd(std::vector<at::Tensor>{w}, torch::optim::SGDOptions(1.0));
  const auto on_gpu_tensor = [](std::vector<float> v) { return at::tensor(v).to(at::kCUDA); };

  p.pre_backward((w * on_gpu_tensor({3, 4, 0, 0})).sum()).backward();
  ASSERT_TRUE(p.optimizer_step(sgd, {}));
  EXPECT_TRUE(w.detach().cpu().equal(at::tensor({-3.0f, -4.0f, 0.0f, 0.0f}))) << "the unscaled step";
  EXPECT_EQ(scaler->get_scale(), 1024.0);
  sgd.zero_grad();

  const at::Tensor before = w.detach().clone();
  p.pre_backward((w * on_gpu_tensor({1, INFINITY, 0, 0})).sum()).backward();
  EXPECT_FALSE(p.optimizer_step(sgd, {})) << "an inf gradient must skip the step";
  EXPECT_TRUE(w.detach().equal(before));
  EXPECT_EQ(scaler->get_scale(), 512.0);
}

TEST(CudaPrecision, SixteenMixedAndBf16MixedComputeInHalfWithFloat32Parameters) {
  VOLT_NEEDS_GPU();
  for (const auto& [precision, dtype] : {std::pair<std::string, at::ScalarType>{"16-mixed", at::kHalf},
                                         std::pair<std::string, at::ScalarType>{"bf16-mixed", at::kBFloat16}}) {
    if (dtype == at::kBFloat16 && !CUDAAccelerator::bf16_supported()) continue;
    ScratchDir dir;
    auto o = on_gpu(dir.path());
    o.precision = precision;
    Trainer t(o);
    DtypeSpy m;
    t.fit(m, random_loader(16, 4, 1));
    // 16-mixed's first steps may overflow at the initial scale (2^16) and be skipped.
    if (precision == "bf16-mixed") {
      EXPECT_EQ(t.global_step(), 4);
    }
    EXPECT_EQ(m.logits_dtype, dtype) << precision;
    EXPECT_TRUE(m.input_device.is_cuda()) << precision;
    for (const auto& p : m.parameters()) EXPECT_EQ(p.scalar_type(), at::kFloat) << precision;
  }
}

TEST(CudaPrecision, SixteenTrueAndBf16TrueCastTheWholeModule) {
  VOLT_NEEDS_GPU();
  for (const auto& [precision, dtype] : {std::pair<std::string, at::ScalarType>{"16-true", at::kHalf},
                                         std::pair<std::string, at::ScalarType>{"bf16-true", at::kBFloat16}}) {
    ScratchDir dir;
    auto o = on_gpu(dir.path());
    o.precision = precision;
    Trainer t(o);
    DtypeSpy m;
    t.fit(m, random_loader(16, 4, 1));
    EXPECT_EQ(m.logits_dtype, dtype) << precision;
    for (const auto& p : m.parameters()) {
      EXPECT_EQ(p.scalar_type(), dtype) << precision;
      EXPECT_TRUE(p.is_cuda()) << precision;
    }
  }
}

TEST(CudaDataParallel, OneGpuTrainsExactlyAsSingleDevice) {
  VOLT_NEEDS_GPU();
  ScratchDir dir;
  std::vector<std::vector<at::Tensor>> params;
  for (const std::string strategy : {"single_device", "dp"}) {
    volt::seed_everything(11);
    BoringModule m;
    auto o = on_gpu(dir.path() + "/" + strategy);
    o.strategy = strategy;
    Trainer t(o);
    t.fit(m, random_loader(48, 8, 5));
    EXPECT_EQ(t.global_step(), 6) << strategy;
    params.push_back(cpu_params(m));
  }
  EXPECT_EQ(max_abs_diff(params[0], params[1]), 0.0);
}

// ddp with one rank in this process: the process group and the Reducer on CUDA gradients
// (volt_distributed_tests' CudaDDP.* run the same through the launcher).
TEST(CudaDDP, OneRankOverNcclOrGlooTrainsAsOneGpu) {
  VOLT_NEEDS_GPU();
  ScratchDir dir;
  volt::seed_everything(13);
  BoringModule one;
  Trainer(on_gpu(dir.path() + "/one")).fit(one, random_loader(48, 8, 6));
  std::vector<std::string> backends;
#if __has_include(<gloo/algorithm.h>)  // Volt builds the gloo backend only with Gloo's headers (not in pip's PyTorch)
  backends.push_back("gloo");
#endif
#ifdef VOLT_WITH_NCCL
  backends.push_back("nccl");
#endif
  for (const auto& backend : backends) {
    volt::seed_everything(13);
    BoringModule m;
    auto o = on_gpu(dir.path() + "/" + backend);
    o.strategy = "ddp";
    o.process_group_backend = backend;
    Trainer t(o);
    t.fit(m, random_loader(48, 8, 6));
    EXPECT_EQ(t.global_step(), 6) << backend;
    // One rank: the allreduce averages one gradient; the Reducer's buckets may sum in another order.
    EXPECT_LE(max_abs_diff(cpu_params(one), cpu_params(m)), 1e-6) << backend;
  }
}

#ifdef VOLT_WITH_CUDA

/// A step context that only counts what is logged (dp's steps called directly).
class CountingContext final : public volt::StepContext {
 public:
  using StepContext::log;
  void log(const std::string&, const at::Tensor&, const volt::LogOptions&) override { ++logged; }
  volt::RunningStage stage() const override { return volt::RunningStage::kTraining; }
  int64_t batch_idx() const override { return 0; }
  int64_t current_epoch() const override { return 0; }
  int64_t global_step() const override { return 0; }
  bool is_global_zero() const override { return true; }
  int64_t world_size() const override { return 1; }
  const std::vector<std::shared_ptr<torch::optim::Optimizer>>& optimizers() const override { return none_; }
  const std::vector<volt::LRSchedulerConfig>& lr_schedulers() const override { return schedulers_; }
  void manual_backward(const at::Tensor& loss) override { loss.backward(); }
  void optimizer_step(size_t) override {}
  void optimizer_zero_grad(size_t) override {}
  int logged = 0;

 private:
  std::vector<std::shared_ptr<torch::optim::Optimizer>> none_;
  std::vector<volt::LRSchedulerConfig> schedulers_;
};

/// The argument type of torch::nn::Module::clone (c10::optional or std::optional by version).
template <typename T>
struct FirstArgument;
template <typename R, typename C, typename A>
struct FirstArgument<R (C::*)(A) const> {
  using type = A;
};
using CloneDevice = FirstArgument<decltype(&torch::nn::Module::clone)>::type;

/// BoringModule with clone(device), as dp needs for two GPUs or more; counts the rows it saw.
class CloneableModule : public BoringModule {
 public:
  CloneableModule() : BoringModule(8, 3) {}
  std::shared_ptr<torch::nn::Module> clone(CloneDevice device) const override {
    auto copy = std::make_shared<CloneableModule>();
    if (device) copy->to(*device);
    at::NoGradGuard no_grad;
    auto dst = copy->named_parameters();
    for (const auto& p : named_parameters()) dst[p.key()].copy_(p.value());
    copy->rows_seen = rows_seen;
    return copy;
  }
  at::Tensor training_step(volt::Batch& batch, volt::StepContext& ctx) override {
    rows_seen->push_back(batch[0].size(0));
    at::Tensor loss = loss_of(batch);
    ctx.log("train_loss", loss);
    return loss;
  }
  std::shared_ptr<std::vector<int64_t>> rows_seen = std::make_shared<std::vector<int64_t>>();
};

std::shared_ptr<volt::strategies::DataParallelStrategy> dp_on(std::vector<c10::Device> devices) {
  return std::make_shared<volt::strategies::DataParallelStrategy>(
      std::move(devices), std::make_shared<CUDAAccelerator>(CUDAAccelerator::device_count()),
      volt::precision::precision_factory("32-true")("cuda"), std::make_shared<volt::environments::DefaultEnvironment>(),
      std::make_shared<volt::checkpoint_io::TorchCheckpointIO>());
}

// Two shards on the same GPU run the whole dp path (scatter, copies, gradient edges, the
// mean of the losses) on a one-GPU machine: equal shards give the full batch's gradient.
TEST(CudaDataParallel, TwoShardsGiveTheGradientOfTheWholeBatch) {
  VOLT_NEEDS_GPU();
  const c10::Device gpu(c10::kCUDA, 0);
  volt::seed_everything(3);
  CloneableModule whole;
  CloneableModule shared;
  {
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < whole.parameters().size(); ++i) shared.parameters()[i].copy_(whole.parameters()[i]);
  }
  whole.to(gpu);
  volt::Batch batch{at::randn({6, 8}), at::tensor(std::vector<int64_t>{0, 1, 2, 2, 1, 0})};
  volt::Batch on_device{batch[0].to(gpu), batch[1].to(gpu)};
  whole.loss_of(on_device).backward();

  auto dp = dp_on({gpu, gpu});
  dp->setup(shared);
  CountingContext ctx;
  volt::Batch b = batch;
  dp->batch_to_device(b);
  const at::Tensor loss = dp->training_step(shared, b, ctx);
  EXPECT_EQ(*shared.rows_seen, (std::vector<int64_t>{3, 3})) << "two shards of three rows";
  EXPECT_EQ(ctx.logged, 2);
  EXPECT_NEAR(loss.item<double>(), whole.loss_of(on_device).item<double>(), 1e-6);
  loss.backward();
  for (size_t i = 0; i < whole.parameters().size(); ++i) {
    const at::Tensor g = shared.parameters()[i].grad();
    ASSERT_TRUE(g.defined()) << "parameter " << i << " got no gradient through the copies";
    EXPECT_LE((g - whole.parameters()[i].grad()).abs().max().item<double>(), 1e-6) << "parameter " << i;
  }
}

TEST(CudaDataParallel, AModuleWithoutCloneIsRefusedAtSetup) {
  VOLT_NEEDS_GPU();
  const c10::Device gpu(c10::kCUDA, 0);
  BoringModule m;
  auto dp = dp_on({gpu, gpu});
  try {
    dp->setup(m);
    ADD_FAILURE() << "dp over two GPUs accepted a module without clone()";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("clone"), std::string::npos) << what;
    EXPECT_NE(what.find("strategy=\"ddp\""), std::string::npos) << what;
  }
}

#else

TEST(CudaDataParallel, TwoShardsGiveTheGradientOfTheWholeBatch) {
  GTEST_SKIP() << "this Volt build has no CUDA code (VOLT_WITH_CUDA unset): dp is not built";
}

#endif

/// Dropout on the GPU: the CUDA generator decides every step.
class DropoutModule : public BoringModule {
 public:
  at::Tensor training_step(volt::Batch& batch, volt::StepContext& ctx) override {
    const at::Tensor h = at::dropout(batch[0], 0.5, /*train=*/true);
    at::Tensor loss = at::cross_entropy_loss(forward(h), batch[1]);
    ctx.log("train_loss", loss);
    return loss;
  }
};

// 16 rows in batches of 4: max_steps=4 ends the first epoch, so the save after fit resumes at the start
// of the second, as the 8-step run goes on (a save after fit resumes at the next epoch, as Lightning's
// does; mid-epoch, the resumed run would start that epoch's batches again and differ from the full run).
TEST(CudaCheckpoint, ResumeRestoresTheCudaGeneratorExactly) {
  VOLT_NEEDS_GPU();
  ScratchDir dir;
  auto options = [&](const std::string& name, int64_t steps) {
    auto o = on_gpu(dir.path() + "/" + name);
    o.max_steps = steps;
    o.max_epochs = -1;
    return o;
  };
  volt::seed_everything(5);
  DropoutModule full;
  Trainer(options("full", 8)).fit(full, random_loader(16, 4, 2));

  volt::seed_everything(5);
  DropoutModule part;
  Trainer first(options("part", 4));
  first.fit(part, random_loader(16, 4, 2));
  const std::string ckpt = dir.path() + "/step4.ckpt";
  first.save_checkpoint(ckpt);
  // Resumed at once (the generators are where the checkpoint has them anyway), then again after
  // moving both generators on, as another program would start with other states.
  DropoutModule at_once;
  Trainer second(options("at_once", 8));
  second.fit(at_once, random_loader(16, 4, 2), nullptr, ckpt);
  EXPECT_EQ(second.global_step(), 8);
  volt::seed_everything(99);
  (void)at::randn({1000}, at::TensorOptions().device(at::kCUDA));
  DropoutModule moved_on;
  Trainer third(options("moved_on", 8));
  third.fit(moved_on, random_loader(16, 4, 2), nullptr, ckpt);
  EXPECT_EQ(max_abs_diff(cpu_params(at_once), cpu_params(moved_on)), 0.0)
      << "after the generators moved on, the resumed steps drew other dropout masks";
  EXPECT_EQ(max_abs_diff(cpu_params(full), cpu_params(at_once)), 0.0) << "the resume is not exact";
}

/// Between the backward and the optimizer step: where each parameter and its gradient are.
class WhereParametersLive final : public volt::callbacks::Callback {
 public:
  std::string state_key() const override { return "WhereParametersLive"; }
  void on_before_optimizer_step(volt::TrainerView&, torch::optim::Optimizer& optimizer, size_t) override {
    for (const auto& group : optimizer.param_groups()) {
      for (const auto& p : group.params()) {
        ++checked;
        if (!p.device().is_cpu() || !p.is_pinned()) ++not_pinned_host;
        if (!p.grad().defined() || !p.grad().device().is_cpu()) ++grad_not_host;
      }
    }
  }
  int64_t checked = 0, not_pinned_host = 0, grad_not_host = 0;
};

/// Records the device of its parameters inside the training step.
class DeviceSpy : public BoringModule {
 public:
  DeviceSpy() : BoringModule(8, 3) {}
  at::Tensor training_step(volt::Batch& batch, volt::StepContext& ctx) override {
    for (const auto& p : parameters()) on_gpu_in_step = on_gpu_in_step && p.device().is_cuda();
    return BoringModule::training_step(batch, ctx);
  }
  bool on_gpu_in_step = true;
};

// fsdp.cpu_offload on a GPU: an FSDPStrategy object on one rank (its pieces whole; strategy="fsdp" needs two
// processes, and fsdp over NCCL a GPU each). Between steps the parameters and their gradients are page-locked
// host buffers and the optimizer steps them there; inside the step they are on the GPU; after fit the module
// is whole on the GPU again, with the weights of a plain one-GPU run.
TEST(CudaFSDP, CpuOffloadKeepsPiecesInPinnedHostMemoryAndTrainsAsOneGpu) {
  VOLT_NEEDS_GPU();
  ScratchDir dir;
  volt::seed_everything(17);
  DeviceSpy one;
  Trainer(on_gpu(dir.path() + "/one")).fit(one, random_loader(48, 8, 6));
  volt::seed_everything(17);
  DeviceSpy m;
  volt::strategies::FSDPOptions f;
  f.cpu_offload = true;
  volt::strategies::DDPOptions ddp;
#ifdef VOLT_WITH_NCCL
  ddp.backend = "nccl";
#endif
  auto where = std::make_shared<WhereParametersLive>();
  volt::TrainerPlugins plugins;
  plugins.strategy = std::make_shared<volt::strategies::FSDPStrategy>(f, ddp);
  auto o = on_gpu(dir.path() + "/fsdp");
  Trainer t(o, plugins, {where});
  t.fit(m, random_loader(48, 8, 6));
  EXPECT_EQ(t.global_step(), 6);
  EXPECT_TRUE(m.on_gpu_in_step) << "inside a step the gathered parameters are on the GPU";
  EXPECT_GT(where->checked, 0);
  EXPECT_EQ(where->not_pinned_host, 0) << "between steps the pieces are page-locked host memory";
  EXPECT_EQ(where->grad_not_host, 0) << "the reduce-scattered gradient pieces are copied next to them";
  for (const auto& p : m.parameters()) EXPECT_TRUE(p.device().is_cuda()) << "after fit the module is whole on the GPU";
  EXPECT_LE(max_abs_diff(cpu_params(one), cpu_params(m)), 1e-5);
}

TEST(CudaDataLoader, PinnedBatchesCopyToTheGpuWithoutBlocking) {
  VOLT_NEEDS_GPU();
  volt::data::DataLoaderOptions o;
  o.batch_size = 4;
  o.pin_memory = true;
  o.num_workers = 2;
  volt::data::DataLoader loader(volt::testing::random_dataset(16, 4), o);
  int64_t batches = 0;
  const auto stream = loader.stream();
  while (const auto batch = stream->next()) {
    ++batches;
    for (const auto& t : *batch) {
      ASSERT_TRUE(t.is_pinned()) << "batch " << batches << " is in pageable memory";
      const at::Tensor g = t.to(at::kCUDA, /*non_blocking=*/true);
      EXPECT_TRUE(g.cpu().equal(t));
    }
  }
  EXPECT_EQ(batches, 4);
}

}  // namespace
