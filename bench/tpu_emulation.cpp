// single_xla on the TPU stand-in (LibTorch's TorchScript lazy backend on the CPU) against
// the same model through the CPU accelerator: steady steps/s of each, alternating rounds
// in one process, the first lazy step (graph compilation included), and how many graphs
// were compiled versus reused. The stand-in is not meant to be fast: the figures are
// there to catch a graph that grows from step to step (a missing mark_step).
//
//   tpu_emulation [--model mlp|cnn] [--steps N] [--rounds R] [--threads T]
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/pooling.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "volt/accelerators/tpu_runtime.h"
#include "volt/data/idx.h"
#include "volt/volt.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string model = "mlp";
  int64_t steps = 200;
  int64_t rounds = 3;
  int64_t threads = 0;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw volt::ConfigError(k + " needs a value; see --help");
      return argv[++i];
    };
    if (k == "--model")
      a.model = next();
    else if (k == "--steps")
      a.steps = std::stoll(next());
    else if (k == "--rounds")
      a.rounds = std::stoll(next());
    else if (k == "--threads")
      a.threads = std::stoll(next());
    else if (k == "--help" || k == "-h") {
      std::cout << "tpu_emulation [--model mlp|cnn] [--steps N] [--rounds R] [--threads T]\n";
      std::exit(0);
    } else {
      throw volt::ConfigError("unknown argument " + k + "; see --help");
    }
  }
  if (a.model != "mlp" && a.model != "cnn") throw volt::ConfigError("--model must be mlp or cnn, got " + a.model);
  if (a.steps < 3) throw volt::ConfigError("--steps must be at least 3, got " + std::to_string(a.steps));
  if (a.rounds < 1) throw volt::ConfigError("--rounds must be at least 1, got " + std::to_string(a.rounds));
  if (a.threads <= 0) a.threads = std::max(1u, std::thread::hardware_concurrency());
  return a;
}

/// MLP 784-128-10 or CNN conv16-conv32-fc10, SGD; standard layers built in the
/// constructor (single_xla re-creates them on the device).
class BenchModule : public volt::Module {
 public:
  explicit BenchModule(const std::string& kind) : cnn_(kind == "cnn") {
    if (cnn_) {
      conv1_ = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 3).padding(1)));
      conv2_ = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 3).padding(1)));
      fc1_ = register_module("fc1", torch::nn::Linear(32 * 7 * 7, 10));
    } else {
      fc1_ = register_module("fc1", torch::nn::Linear(784, 128));
      fc2_ = register_module("fc2", torch::nn::Linear(128, 10));
    }
  }
  at::Tensor training_step(volt::Batch& b, volt::StepContext&) override {
    namespace F = torch::nn::functional;
    at::Tensor logits;
    if (cnn_) {
      auto h = F::max_pool2d(F::relu(conv1_->forward(b[0])), F::MaxPool2dFuncOptions(2));
      h = F::max_pool2d(F::relu(conv2_->forward(h)), F::MaxPool2dFuncOptions(2));
      logits = fc1_->forward(h.flatten(1));
    } else {
      logits = fc2_->forward(F::relu(fc1_->forward(b[0].flatten(1))));
    }
    return at::cross_entropy_loss(logits, b[1]);
  }
  volt::OptimizerConfig configure_optimizers() override {
    return std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  }

 private:
  bool cnn_;
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
};

/// Time of every optimizer step's end.
class StepClock : public volt::callbacks::Callback {
 public:
  std::string state_key() const override { return "StepClock"; }
  void on_train_batch_end(volt::TrainerView&, const at::Tensor&, const volt::Batch&, int64_t) override {
    ends.push_back(Clock::now());
  }
  std::vector<Clock::time_point> ends;
};

struct Run {
  double first_step_s = 0;  ///< fit start (Trainer built) to the end of step 1
  double steps_per_s = 0;   ///< steps 2..N
};

Run run(const Args& a, const std::string& accelerator, const std::shared_ptr<volt::data::DataLoader>& loader,
        const std::string& root) {
  at::manual_seed(1);
  BenchModule module(a.model);
  volt::TrainerOptions o;
  o.accelerator = accelerator;
  o.devices = "1";
  o.max_steps = a.steps;
  o.max_epochs = -1;
  o.num_threads = a.threads;
  o.enable_checkpointing = false;
  o.enable_model_summary = false;
  o.enable_progress_bar = false;
  o.logger = false;
  o.num_sanity_val_steps = 0;
  o.default_root_dir = root;
  auto clock = std::make_shared<StepClock>();
  const auto t0 = Clock::now();
  volt::Trainer trainer(o, {clock});
  trainer.fit(module, loader);
  Run r;
  r.first_step_s = std::chrono::duration<double>(clock->ends.front() - t0).count();
  r.steps_per_s = static_cast<double>(clock->ends.size() - 1) /
                  std::chrono::duration<double>(clock->ends.back() - clock->ends.front()).count();
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) try {
  const Args a = parse(argc, argv);
  ::setenv("VOLT_TPU_EMULATION", "lazy", 1);  // the TPU side's stand-in; the CPU side ignores it
  const int64_t n = a.steps * 64;
  at::Tensor x, y;
  std::string data = "Fashion-MNIST";
  if (std::filesystem::exists(volt::data::kFashionMnistDir)) {
    auto train = volt::data::load_mnist_format(volt::data::kFashionMnistDir, true);
    std::vector<at::Tensor> xs, ys;
    for (int64_t i = 0; i < n; ++i) {
      auto s = train->get(i % train->size());
      xs.push_back(s[0]);
      ys.push_back(s[1]);
    }
    x = at::stack(xs);
    y = at::stack(ys);
  } else {
    data = "random (dataset-fashion-mnist not installed)";
    x = at::randn({n, 1, 28, 28});
    y = at::randint(10, {n}, at::TensorOptions().dtype(at::kLong));
  }
  volt::data::DataLoaderOptions lo;
  lo.batch_size = 64;
  auto loader = std::make_shared<volt::data::DataLoader>(
      std::make_shared<volt::data::TensorDataset>(std::vector<at::Tensor>{x, y}), lo);
  const std::string root = (std::filesystem::temp_directory_path() / ("volt_tpu_bench-" + std::to_string(::getpid()))).string();

  std::printf("model %s, %lld steps of batch 64 per run, %lld rounds, %lld threads, data %s\n", a.model.c_str(),
              static_cast<long long>(a.steps), static_cast<long long>(a.rounds), static_cast<long long>(a.threads),
              data.c_str());
  std::vector<double> cpu_sps, tpu_sps, cpu_first, tpu_first;
  int64_t first_uncached = -1;
  int64_t cached_before = 0, uncached_after_first = 0;
  for (int64_t r = 0; r < a.rounds; ++r) {
    // Alternate the order each round so neither side always runs first.
    for (int side = 0; side < 2; ++side) {
      const bool tpu = (side == 0) == (r % 2 == 0);
      if (tpu) {
        const int64_t before = volt::accelerators::TpuRuntime::uncached_compiles();
        if (r == 0) cached_before = volt::accelerators::TpuRuntime::cached_compiles();
        const Run run_tpu = run(a, "tpu", loader, root);
        if (r == 0) first_uncached = volt::accelerators::TpuRuntime::uncached_compiles() - before;
        if (r == 0) uncached_after_first = volt::accelerators::TpuRuntime::uncached_compiles();
        tpu_sps.push_back(run_tpu.steps_per_s);
        tpu_first.push_back(run_tpu.first_step_s);
        std::printf("round %lld/%lld single_xla (lazy:0): %.1f steps/s, first step %.3f s\n",
                    static_cast<long long>(r + 1), static_cast<long long>(a.rounds), run_tpu.steps_per_s,
                    run_tpu.first_step_s);
      } else {
        const Run run_cpu = run(a, "cpu", loader, root);
        cpu_sps.push_back(run_cpu.steps_per_s);
        cpu_first.push_back(run_cpu.first_step_s);
        std::printf("round %lld/%lld single_device (cpu): %.1f steps/s, first step %.3f s\n",
                    static_cast<long long>(r + 1), static_cast<long long>(a.rounds), run_cpu.steps_per_s,
                    run_cpu.first_step_s);
      }
      std::fflush(stdout);
    }
  }
  const int64_t later_uncached = volt::accelerators::TpuRuntime::uncached_compiles() - uncached_after_first;
  const int64_t cached_total = volt::accelerators::TpuRuntime::cached_compiles() - cached_before;
  std::printf("\nmedian steps/s: cpu %.1f, single_xla on the stand-in %.1f (ratio %.2f)\n", median(cpu_sps),
              median(tpu_sps), median(tpu_sps) / median(cpu_sps));
  std::printf("first step (compilation included): single_xla %.3f s (first run), %.3f s (median); cpu %.3f s\n",
              tpu_first.front(), median(tpu_first), median(cpu_first));
  std::printf(
      "graphs compiled: %lld in the first run, %lld in the %lld later runs; graphs reused: %lld (%.2f per "
      "step)\n",
      static_cast<long long>(first_uncached), static_cast<long long>(later_uncached),
      static_cast<long long>(a.rounds - 1), static_cast<long long>(cached_total),
      static_cast<double>(cached_total) / static_cast<double>(a.steps * a.rounds));
  { std::error_code ec_rm; volt::remove_tree(root, ec_rm); }
  // A graph that grows every step compiles anew every step.
  return later_uncached == 0 ? 0 : 1;
} catch (const std::exception& e) {
  std::cerr << "tpu_emulation: " << e.what() << "\n";
  return 2;
}
