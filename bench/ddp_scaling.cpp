// Weak scaling of Volt's DDP on this machine: the Fashion-MNIST CNN (conv32-conv64-fc128,
// batch 64 per process, 1 intra-op thread per process) trained by
//   single : 1 process (strategy single_device)
//   ddp    : 2 processes, gradients averaged by c10d's Reducer (buckets, overlapped with backward)
//   flat   : the same 2 processes with the Reducer off, one flat allreduce of all gradients
//            after backward (the baseline the Reducer's overlap should beat)
//   hand   : 2 processes of a hand-written LibTorch loop (no Volt: a Gloo group of its own, each
//            rank its half of a shuffled epoch, one flat allreduce of the gradients after
//            backward, SGD; Volt's allocator setting): what Volt's flat mode is measured
//            against, as a ratio
//   sync   : the hand-written loop allreducing one float per step instead of the gradients: the
//            cost of synchronising the ranks once per step, which any gradient exchange (any comm
//            hook) pays at least; its efficiency is the ceiling of every hook on this machine
//   pair   : 2 independent single processes at the same time, no communication at all: what
//            this machine's cores give two processes, the ceiling for ddp's throughput
//   hook:H : 2 processes, ddp with the communication hook H (ddp.comm_hook) for each H of
//            --comm-hook allreduce,fp16,bf16,powersgd (PowerSGD at --psgd-rank, from --psgd-start)
// Every mode runs in fresh processes, alternating for --rounds rounds; the median is reported.
//   build/bench/ddp_scaling [--steps 150] [--warmup 20] [--rounds 3] [--bucket-view 1]
//                           [--comm-hook H,H...] [--psgd-rank 1] [--psgd-start 10] [--psgd-min-rate 2]
// With --accuracy 1: instead, one epoch of 2-process ddp without a hook and with each hook of
// --comm-hook, then the test-set accuracy of each (--accuracy-psgd-start: PowerSGD's warm-up there).
// A rank process is this program with --mode; the driver is this program without it.
#include <unistd.h>

#include <ATen/ops/randperm.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "volt/accelerators/cpu_accelerator.h"
#include "volt/callbacks/callback.h"
#include "volt/core/module.h"
#include "volt/data/dataloader.h"
#include "volt/data/idx.h"
#include "volt/trainer/trainer.h"

namespace {

using namespace torch::nn;

class Cnn : public volt::Module {
 public:
  Cnn() {
    torch::manual_seed(0);
    net = register_module("net", Sequential(Conv2d(Conv2dOptions(1, 32, 3).padding(1)), ReLU(), MaxPool2d(2),
                                            Conv2d(Conv2dOptions(32, 64, 3).padding(1)), ReLU(), MaxPool2d(2),
                                            Flatten(), Linear(64 * 7 * 7, 128), ReLU(), Linear(128, 10)));
  }
  at::Tensor training_step(volt::Batch& batch, volt::StepContext&) override {
    return torch::nn::functional::cross_entropy(net->forward(batch[0]), batch[1]);
  }
  volt::OptimizerConfig configure_optimizers() override {
    return volt::OptimizerConfig(std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.01)));
  }
  Sequential net{nullptr};
};

/// Times the steps after the warm-up; in flat mode, replaces the Reducer by one allreduce.
class Timer : public volt::callbacks::Callback {
 public:
  Timer(volt::Trainer*& trainer, int64_t warmup, bool flat) : trainer_(trainer), warmup_(warmup), flat_(flat) {}
  std::string state_key() const override { return "Timer"; }
  void on_train_start(volt::TrainerView&) override {
    if (flat_) (void)trainer_->strategy().set_gradient_sync(false);
    if (!start_together_.empty()) {
      // pair: both processes start training together (each loads the data first).
      std::ofstream(start_together_ + "." + std::to_string(::getpid())) << "ready\n";
      for (;;) {
        int ready = 0;
        for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(start_together_).parent_path())) {
          ready += e.path().filename().string().rfind(std::filesystem::path(start_together_).filename().string() + ".",
                                                      0) == 0;
        }
        if (ready >= 2) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
  }
  /// Set in pair mode: the marker path both processes wait on before training.
  std::string start_together_;
  void on_before_optimizer_step(volt::TrainerView&, torch::optim::Optimizer& opt, size_t) override {
    if (!flat_) return;
    std::vector<at::Tensor> grads;
    for (auto& p : opt.param_groups()[0].params()) grads.push_back(p.grad().reshape({-1}));
    const auto t0 = std::chrono::steady_clock::now();
    at::Tensor flat = trainer_->strategy().all_reduce(at::cat(grads), volt::strategies::ReduceOp::kMean);
    if (view_step_ >= warmup_) {
      allreduce_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ++allreduces_;
    }
    int64_t offset = 0;
    for (auto& p : opt.param_groups()[0].params()) {
      const int64_t n = p.numel();
      p.mutable_grad().copy_(flat.narrow(0, offset, n).view_as(p));
      offset += n;
    }
  }
  void on_train_batch_end(volt::TrainerView& view, const at::Tensor&, const volt::Batch&, int64_t) override {
    view_step_ = view.state().global_step;
    if (view.state().global_step == warmup_) start_ = std::chrono::steady_clock::now();
    end_ = std::chrono::steady_clock::now();
    last_step_ = view.state().global_step;
  }
  double seconds() const { return std::chrono::duration<double>(end_ - start_).count(); }
  /// flat: mean milliseconds of the allreduce call (waiting for the peer included), timed steps only.
  double allreduce_ms() const { return allreduces_ > 0 ? 1000.0 * allreduce_seconds_ / allreduces_ : 0.0; }
  int64_t timed_steps() const { return last_step_ - warmup_; }

 private:
  volt::Trainer*& trainer_;
  int64_t warmup_;
  bool flat_;
  int64_t view_step_ = 0, allreduces_ = 0;
  double allreduce_seconds_ = 0;
  std::chrono::steady_clock::time_point start_, end_;
  int64_t last_step_ = 0;
};

/// Settings of a hook run.
struct HookArgs {
  std::string hook;  // empty: none
  int64_t psgd_rank = 1, psgd_start = 10;
  std::string psgd_min_rate = "2";  ///< PowerSGD's min_compression_rate
};

/// Fraction of the Fashion-MNIST test set `model` classifies right.
double test_accuracy(Cnn& model) {
  auto test = volt::data::load_mnist_format(volt::data::kFashionMnistDir, /*train=*/false);
  torch::NoGradGuard no_grad;
  model.eval();
  const at::Tensor& x = test->tensors()[0];
  const at::Tensor& y = test->tensors()[1];
  int64_t right = 0;
  for (int64_t at = 0; at < x.size(0); at += 1000) {
    const int64_t n = std::min<int64_t>(1000, x.size(0) - at);
    at::Tensor pred = model.net->forward(x.narrow(0, at, n)).argmax(1);
    right += pred.eq(y.narrow(0, at, n)).sum().item<int64_t>();
  }
  return static_cast<double>(right) / static_cast<double>(x.size(0));
}

int run_rank(const std::string& mode, int64_t steps, int64_t warmup, const std::string& out, bool bucket_view,
             const std::string& start_together, const HookArgs& hook, bool accuracy) {
  const int64_t procs = mode == "single" ? 1 : 2;
  const int64_t batch = 64;
  auto data = volt::data::load_mnist_format(volt::data::kFashionMnistDir, /*train=*/true);
  volt::data::DataLoaderOptions lo;
  lo.batch_size = batch;
  lo.shuffle = true;
  lo.seed = 1;
  auto loader = std::make_shared<volt::data::DataLoader>(data, lo);
  volt::TrainerOptions o;
  o.accelerator = "cpu";
  o.strategy = procs == 1 ? "single_device" : "ddp";
  o.devices = std::to_string(procs);
  o.num_threads = 1;
  o.max_steps = accuracy ? -1 : steps + warmup;
  o.max_epochs = 1;
  o.ddp_comm_hook = hook.hook;
  o.ddp_powersgd_matrix_approximation_rank = hook.psgd_rank;
  o.ddp_powersgd_start_powerSGD_iter = hook.psgd_start;
  o.ddp_powersgd_min_compression_rate = std::stod(hook.psgd_min_rate);
  o.enable_progress_bar = false;
  o.enable_model_summary = false;
  o.enable_checkpointing = false;
  o.logger = false;
  o.num_sanity_val_steps = 0;
  o.ddp_gradient_as_bucket_view = bucket_view;
  volt::Trainer* self = nullptr;
  auto timer = std::make_shared<Timer>(self, warmup, mode == "flat");
  timer->start_together_ = start_together;
  volt::Trainer trainer(o, {timer});
  self = &trainer;
  Cnn model;
  trainer.fit(model, loader);
  if (accuracy) {
    if (trainer.strategy().global_rank() == 0) std::ofstream(out) << test_accuracy(model) << "\n";
    return 0;
  }
  if (trainer.strategy().global_rank() == 0) {
    const double sps = static_cast<double>(timer->timed_steps() * batch * procs) / timer->seconds();
    std::ofstream(out) << sps << " " << 1000.0 * timer->seconds() / static_cast<double>(timer->timed_steps()) << " "
                       << timer->allreduce_ms() << "\n";
  }
  return 0;
}

/// The hand-written 2-process loop (mode hand): rank `rank` of 2, meeting the other through a
/// FileStore at `store_path`. Rank 0 writes samples/s, ms a step and ms of the allreduce call.
/// `sync_only`: one float's allreduce per step instead of the gradients' (mode sync).
int run_hand(int rank, const std::string& store_path, int64_t steps, int64_t warmup, const std::string& out,
             bool sync_only) {
  at::set_num_threads(1);
  // The allocator Volt's ranks run with (glibc's mmap/trim thresholds raised), so that the ratio
  // measures the loop (bench/trainer_vs_loop does the same).
  volt::accelerators::CPUAccelerator::tune_allocator();
  const int64_t batch = 64;
  auto data = volt::data::load_mnist_format(volt::data::kFashionMnistDir, /*train=*/true);
  const at::Tensor& x = data->tensors()[0];
  const at::Tensor& y = data->tensors()[1];
  if (x.size(0) < 2 * batch * (steps + warmup)) {
    std::cerr << "ddp_scaling: --steps + --warmup must fit one epoch (" << x.size(0) / (2 * batch) << " steps)\n";
    return 1;
  }
  auto store = c10::make_intrusive<c10d::FileStore>(store_path, 2);
  auto options = c10d::ProcessGroupGloo::Options::create();
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  options->threads = 1;
  auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, 2, options);
  Cnn model;
  std::vector<at::Tensor> params = model.parameters();
  torch::optim::SGD opt(params, torch::optim::SGDOptions(0.01));
  auto gen = at::detail::createCPUGenerator(1);
  const at::Tensor perm = at::randperm(x.size(0), gen);
  double allreduce_seconds = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t step = 0; step < steps + warmup; ++step) {
    if (step == warmup) {
      allreduce_seconds = 0;
      t0 = std::chrono::steady_clock::now();
    }
    const at::Tensor idx = perm.slice(0, (2 * step + rank) * batch, (2 * step + rank + 1) * batch);
    at::Tensor loss = torch::nn::functional::cross_entropy(model.net->forward(x.index_select(0, idx)),
                                                           y.index_select(0, idx));
    loss.backward();
    if (sync_only) {
      std::vector<at::Tensor> one{at::ones({1})};
      const auto a0 = std::chrono::steady_clock::now();
      pg->allreduce(one)->wait();
      allreduce_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - a0).count();
    } else {
      std::vector<at::Tensor> grads;
      for (auto& p : params) grads.push_back(p.grad().reshape({-1}));
      std::vector<at::Tensor> flat{at::cat(grads)};
      const auto a0 = std::chrono::steady_clock::now();
      pg->allreduce(flat)->wait();
      allreduce_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - a0).count();
      flat[0].div_(2.0);
      int64_t offset = 0;
      for (auto& p : params) {
        const int64_t n = p.numel();
        p.mutable_grad().copy_(flat[0].narrow(0, offset, n).view_as(p));
        offset += n;
      }
    }
    opt.step();
    for (auto& p : params) p.mutable_grad().reset();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (rank == 0) {
    std::ofstream(out) << static_cast<double>(steps * batch * 2) / seconds << " "
                       << 1000.0 * seconds / static_cast<double>(steps) << " "
                       << 1000.0 * allreduce_seconds / static_cast<double>(steps) << "\n";
  }
  return 0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> args;
  for (int i = 1; i + 1 < argc; i += 2) args[argv[i]] = argv[i + 1];
  auto get = [&](const char* k, int64_t d) { return args.count(k) ? std::stoll(args[k]) : d; };
  const int64_t steps = get("--steps", 150), warmup = get("--warmup", 20), rounds = get("--rounds", 3);
  const bool bucket_view = get("--bucket-view", 0) != 0;
  const bool accuracy = get("--accuracy", 0) != 0;
  HookArgs hook;
  hook.psgd_rank = get("--psgd-rank", 1);
  hook.psgd_start = get("--psgd-start", 10);
  if (args.count("--psgd-min-rate")) hook.psgd_min_rate = args["--psgd-min-rate"];
  if (args.count("--mode")) {
    const std::string mode = args["--mode"];
    if (mode == "hand" || mode == "sync") {
      return run_hand(static_cast<int>(get("--rank", 0)), args["--store"], steps, warmup, args["--out"], mode == "sync");
    }
    if (mode.rfind("hook:", 0) == 0) hook.hook = mode.substr(5);
    return run_rank(mode, steps, warmup, args["--out"], bucket_view,
                    args.count("--start-together") ? args["--start-together"] : "", hook, accuracy);
  }
  std::vector<std::string> hooks;
  {
    const std::string list = args.count("--comm-hook") ? args["--comm-hook"] + "," : std::string();
    for (size_t at = 0, comma; (comma = list.find(',', at)) != std::string::npos; at = comma + 1) {
      if (comma > at) hooks.push_back(list.substr(at, comma - at));
    }
  }

  char exe[4096] = {};
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  const std::string self(exe, n > 0 ? static_cast<size_t>(n) : 0);
  std::map<std::string, std::vector<double>> sps, step_ms, allreduce_ms;
  const std::string out = "/tmp/volt_ddp_scaling_" + std::to_string(::getpid());
  const std::string hook_args = " --psgd-rank " + std::to_string(hook.psgd_rank) + " --psgd-start " +
                                std::to_string(accuracy ? get("--accuracy-psgd-start", 50) : hook.psgd_start) +
                                " --psgd-min-rate " + hook.psgd_min_rate;
  if (accuracy) {
    std::vector<std::string> modes{"ddp"};
    for (const auto& h : hooks) modes.push_back("hook:" + h);
    std::printf("Fashion-MNIST CNN, one epoch of 2-process ddp (batch 64 per process, SGD lr 0.01), test accuracy\n");
    for (const auto& mode : modes) {
      const std::string cmd = self + " --mode " + mode + " --out " + out + " --accuracy 1" + hook_args;
      if (std::system(cmd.c_str()) != 0) {
        std::cerr << "ddp_scaling: the " << mode << " run failed\n";
        return 1;
      }
      double acc = 0;
      std::ifstream(out) >> acc;
      std::printf("  %-16s %6.2f%%\n", mode == "ddp" ? "no hook" : mode.c_str(), 100.0 * acc);
      std::fflush(stdout);
    }
    std::remove(out.c_str());
    std::printf("  PowerSGD: rank %lld, %s plain steps first\n", static_cast<long long>(hook.psgd_rank),
                std::to_string(get("--accuracy-psgd-start", 50)).c_str());
    return 0;
  }
  std::vector<std::string> modes{"single", "ddp", "flat", "hand", "sync", "pair"};
  for (const auto& h : hooks) modes.push_back("hook:" + h);
  for (int64_t r = 0; r < rounds; ++r) {
    for (const std::string& mode : modes) {
      const std::string args_common = " --steps " + std::to_string(steps) + " --warmup " + std::to_string(warmup) +
                                      " --bucket-view " + (bucket_view ? "1" : "0") + hook_args;
      std::string cmd;
      if (mode == "pair") {
        const std::string marker = out + "_pair" + std::to_string(r);
        cmd = "sh -c '" + self + " --mode single --out " + out + ".a --start-together " + marker + args_common +
              " & " + self + " --mode single --out " + out + ".b --start-together " + marker + args_common +
              " & wait' && rm -f " + marker + ".*";
      } else if (mode == "hand" || mode == "sync") {
        const std::string store = out + "_store" + std::to_string(r);
        std::remove(store.c_str());
        cmd = "sh -c '" + self + " --mode " + mode + " --rank 0 --store " + store + " --out " + out + args_common +
              " & " + self + " --mode " + mode + " --rank 1 --store " + store + " --out " + out + args_common +
              " & wait' && rm -f " + store;
      } else {
        cmd = self + " --mode " + mode + " --out " + out + args_common;
      }
      if (std::system(cmd.c_str()) != 0) {
        std::cerr << "ddp_scaling: the " << mode << " run failed\n";
        return 1;
      }
      double v = 0;
      if (mode == "pair") {
        double a = 0, b = 0;
        std::ifstream(out + ".a") >> a;
        std::ifstream(out + ".b") >> b;
        v = a + b;
        std::remove((out + ".a").c_str());
        std::remove((out + ".b").c_str());
      } else {
        double step = 0, allreduce = 0;
        std::ifstream(out) >> v >> step >> allreduce;
        step_ms[mode].push_back(step);
        allreduce_ms[mode].push_back(allreduce);
      }
      sps[mode].push_back(v);
      std::cerr << "round " << r + 1 << "/" << rounds << " " << mode << ": " << v << " samples/s\n";
    }
  }
  std::remove(out.c_str());
  double load = 0;
  std::ifstream("/proc/loadavg") >> load;
  const double s = median(sps["single"]), d = median(sps["ddp"]), f = median(sps["flat"]), p = median(sps["pair"]);
  std::printf("Fashion-MNIST CNN, batch 64 per process, 1 thread per process, %lld timed steps, median of %lld%s\n",
              static_cast<long long>(steps), static_cast<long long>(rounds),
              bucket_view ? ", gradients as bucket views" : "");
  std::printf("  1 process                 %8.1f samples/s\n", s);
  std::printf("  2 processes, Reducer      %8.1f samples/s  weak-scaling efficiency %.1f%%\n", d, 100.0 * d / (2 * s));
  std::printf("  2 processes, flat allreduce %6.1f samples/s  Reducer/flat = %.3f\n", f, d / f);
  std::printf("  step time: 1 process %.2f ms; flat %.2f ms, of which the allreduce call %.2f ms\n",
              median(step_ms["single"]), median(step_ms["flat"]), median(allreduce_ms["flat"]));
  {
    std::vector<double> ratios;
    for (size_t i = 0; i < sps["hand"].size() && i < sps["flat"].size(); ++i) {
      ratios.push_back(sps["flat"][i] / sps["hand"][i]);
    }
    std::printf("  2 processes, hand-written LibTorch loop %6.1f samples/s (%.2f ms a step, the allreduce call %.2f ms)"
                "; Volt flat / hand = %.3f (median of the rounds' ratios)\n",
                median(sps["hand"]), median(step_ms["hand"]), median(allreduce_ms["hand"]), median(ratios));
  }
  std::printf("  2 processes, hand-written loop synchronised by one float's allreduce a step %6.1f samples/s: "
              "weak-scaling efficiency %.1f%%, the ceiling of any comm hook here\n",
              median(sps["sync"]), 100.0 * median(sps["sync"]) / (2 * s));
  std::printf("  2 independent processes   %8.1f samples/s  (no communication: %.1f%% of 2 x 1 process, the ceiling"
              " of this machine)\n", p, 100.0 * p / (2 * s));
  std::printf("  Reducer / independent     %8.1f%%  (ddp's throughput against what the cores allow two processes)\n",
              100.0 * d / p);
  for (const auto& h : hooks) {
    const double v = median(sps["hook:" + h]);
    std::printf("  2 processes, hook %-9s %7.1f samples/s  weak-scaling efficiency %.1f%%  (%.3f x no hook)%s\n",
                h.c_str(), v, 100.0 * v / (2 * s), v / d,
                h == "powersgd" ? (", rank " + std::to_string(hook.psgd_rank) + ", compressing from step " +
                                   std::to_string(hook.psgd_start) + ", min_compression_rate " + hook.psgd_min_rate)
                                      .c_str()
                                : "");
  }
  std::printf("  cores %ld, load average (1 min) at the end %.2f\n", sysconf(_SC_NPROCESSORS_ONLN), load);
  return 0;
}
