// Steps/s of the Fashion-MNIST CNN (bench/trainer_vs_loop's: two 3x3 convolutions with max-pooling, two linear
// layers; SGD with momentum, 32-true) on a GPU, volt::Trainer against a hand-written LibTorch loop, alternating
// in one process. A model this small is bound by launches and per-step work on the host, so the ratio measures
// what Volt adds to a step. Inputs are random 1 x 28 x 28 images and labels (the values do not change the time;
// Debian's Fashion-MNIST files do not travel to the GPU machine). scripts/gpu-check.sh runs it.
//
//   gpu_cnn [--steps 300] [--warmup 20] [--rounds 2] [--batch-size 64] [--device cuda|cpu] [--tiny]
//
// --tiny: 3 steps on the CPU, the two sides' weights compared (bench.gpu_cnn.tiny).
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#ifdef VOLT_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "volt/accelerators/cuda_accelerator.h"
#include "volt/core/seed.h"
#include "volt/volt.h"

#include "gpu_bench.h"

namespace {

using gpu_bench::Side;
using gpu_bench::StepTimer;
using gpu_bench::synchronize;
using gpu_bench::weights_of;

struct Args {
  int64_t steps = 300, warmup = 20, rounds = 2, batch = 64;
  std::string device = "cuda";
  bool tiny = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto count = [&]() {
      if (i + 1 >= argc) throw volt::ConfigError(k + " needs a value; see --help");
      const std::string v = argv[++i];
      size_t used = 0;
      long long n = 0;
      try {
        n = std::stoll(v, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != v.size() || n < 1) throw volt::ConfigError(k + " must be an integer >= 1, got '" + v + "'");
      return static_cast<int64_t>(n);
    };
    if (k == "--steps") a.steps = count();
    else if (k == "--warmup") a.warmup = count();
    else if (k == "--rounds") a.rounds = count();
    else if (k == "--batch-size") a.batch = count();
    else if (k == "--device") {
      if (i + 1 >= argc) throw volt::ConfigError("--device needs a value; see --help");
      a.device = argv[++i];
    } else if (k == "--tiny") {
      a.tiny = true, a.steps = 3, a.warmup = 1, a.rounds = 1, a.batch = 8, a.device = "cpu";
    } else if (k == "--help" || k == "-h") {
      std::cout << "gpu_cnn [--steps 300] [--warmup 20] [--rounds 2] [--batch-size 64] [--device cuda|cpu] [--tiny]\n";
      std::exit(0);
    } else {
      throw volt::ConfigError("unknown argument " + k + "; see --help");
    }
  }
  if (a.device != "cuda" && a.device != "cpu") throw volt::ConfigError("--device must be cuda or cpu, got " + a.device);
  return a;
}

torch::nn::Sequential make_net() {
  using namespace torch::nn;
  return Sequential(Conv2d(Conv2dOptions(1, 32, 3).padding(1)), ReLU(), MaxPool2d(2),
                    Conv2d(Conv2dOptions(32, 64, 3).padding(1)), ReLU(), MaxPool2d(2), Flatten(),
                    Linear(64 * 7 * 7, 128), ReLU(), Linear(128, 10));
}

torch::optim::SGDOptions sgd() { return torch::optim::SGDOptions(0.05).momentum(0.9); }

class CnnModule : public volt::Module {
 public:
  CnnModule() { net = register_module("net", make_net()); }
  at::Tensor training_step(volt::Batch& batch, volt::StepContext&) override {
    return at::cross_entropy_loss(net->forward(batch[0]), batch[1]);
  }
  volt::OptimizerConfig configure_optimizers() override {
    return std::make_shared<torch::optim::SGD>(parameters(), sgd());
  }
  torch::nn::Sequential net{nullptr};
};

/// From the start of batch `warmup` to the end of training, the device synchronised at both ends.

Side run_volt(const Args& a, const at::Tensor& x, const at::Tensor& y, c10::Device device, int64_t batches) {
  volt::seed_everything(42);
  CnnModule module;
  volt::TrainerOptions o;
  o.accelerator = device.is_cuda() ? "cuda" : "cpu";
  o.devices = "1";
  // The hand loop's intra-op thread count (Volt's CPU accelerator would take every core).
  o.num_threads = at::get_num_threads();
  o.max_steps = batches;
  o.max_epochs = -1;
  o.enable_progress_bar = false;
  o.enable_model_summary = false;
  o.enable_checkpointing = false;
  o.logger = false;
  o.num_sanity_val_steps = 0;
  o.default_root_dir = "gpu_cnn_runs";
  auto timer = std::make_shared<StepTimer>(a.warmup, device);
  volt::Trainer trainer(o, {timer});
  volt::data::DataLoaderOptions lo;
  lo.batch_size = a.batch;
  lo.pin_memory = device.is_cuda();
  auto loader = std::make_shared<volt::data::DataLoader>(
      std::make_shared<volt::data::TensorDataset>(std::vector<at::Tensor>{x, y}), lo);
  trainer.fit(module, loader);
  return {timer->seconds, a.tiny ? weights_of(module) : std::vector<at::Tensor>{}};
}

Side run_hand(const Args& a, const at::Tensor& x, const at::Tensor& y, c10::Device device, int64_t batches) {
  volt::seed_everything(42);
  torch::nn::Sequential net = make_net();
  net->to(device);
  net->train();
  torch::optim::SGD opt(net->parameters(), sgd());
  std::chrono::steady_clock::time_point start;
  for (int64_t i = 0; i < batches; ++i) {
    if (i == a.warmup) {
      synchronize(device);
      start = std::chrono::steady_clock::now();
    }
    const at::Tensor xb = x.slice(0, i * a.batch, (i + 1) * a.batch).to(device, /*non_blocking=*/true);
    const at::Tensor yb = y.slice(0, i * a.batch, (i + 1) * a.batch).to(device, /*non_blocking=*/true);
    at::Tensor loss = at::cross_entropy_loss(net->forward(xb), yb);
    loss.backward();
    opt.step();
    opt.zero_grad();
  }
  synchronize(device);
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
          a.tiny ? weights_of(*net) : std::vector<at::Tensor>{}};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    const c10::Device device = a.device == "cuda" ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
    if (device.is_cuda() && volt::accelerators::CUDAAccelerator::device_count() == 0) {
      std::cerr << "gpu_cnn: --device cuda, but "
                << (volt::accelerators::CUDAAccelerator::compiled_with_cuda() ? "no GPU is visible"
                                                                               : "this Volt build has no CUDA")
                << "; use --device cpu (or --tiny)\n";
      return 2;
    }
    const int64_t batches = a.warmup + a.steps;
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1234);
    at::Tensor x = at::randn({batches * a.batch, 1, 28, 28}, gen);
    at::Tensor y = at::randint(10, {batches * a.batch}, gen, at::TensorOptions().dtype(at::kLong));
    if (device.is_cuda()) {
      x = x.pin_memory();
      y = y.pin_memory();
    }
    std::printf("gpu_cnn: the Fashion-MNIST CNN, batch %lld, 32-true, SGD with momentum, on %s; %lld timed steps "
                "after %lld warm-up, %lld rounds\n",
                static_cast<long long>(a.batch), device.str().c_str(), static_cast<long long>(a.steps),
                static_cast<long long>(a.warmup), static_cast<long long>(a.rounds));
    std::vector<double> volt_s, hand_s;
    Side v, h;
    for (int64_t r = 0; r < a.rounds; ++r) {
      if (r % 2 == 0) {
        v = run_volt(a, x, y, device, batches);
        h = run_hand(a, x, y, device, batches);
      } else {
        h = run_hand(a, x, y, device, batches);
        v = run_volt(a, x, y, device, batches);
      }
      volt_s.push_back(v.seconds);
      hand_s.push_back(h.seconds);
      std::printf("gpu_cnn: round %lld: volt %.1f steps/s, hand %.1f steps/s\n", static_cast<long long>(r + 1),
                  a.steps / v.seconds, a.steps / h.seconds);
    }
    const double volt_sps = a.steps / *std::min_element(volt_s.begin(), volt_s.end());
    const double hand_sps = a.steps / *std::min_element(hand_s.begin(), hand_s.end());
    std::printf("gpu_cnn: volt %.1f steps/s, hand %.1f steps/s, volt/hand %.3f (best round of each)\n", volt_sps,
                hand_sps, volt_sps / hand_sps);
    std::printf("RESULT gpu_cnn volt_steps_per_s=%.2f hand_steps_per_s=%.2f volt_over_hand=%.4f\n", volt_sps, hand_sps,
                volt_sps / hand_sps);
    if (a.tiny) {
      double diff = 0;
      for (size_t i = 0; i < v.weights.size() && i < h.weights.size(); ++i) {
        diff = std::max(diff, (v.weights[i] - h.weights[i]).abs().max().item<double>());
      }
      std::printf("gpu_cnn: --tiny: largest weight difference volt - hand %.3g\n", diff);
      if (v.weights.size() != h.weights.size() || diff > 1e-6) {
        std::fprintf(stderr, "gpu_cnn: the two sides trained different weights (difference %.3g > 1e-6)\n", diff);
        return 1;
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_cnn: %s\n", e.what());
    return 2;
  }
}
