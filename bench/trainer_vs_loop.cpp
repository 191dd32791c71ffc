// Time per epoch of volt::Trainer against a hand-written LibTorch loop: same model,
// data, seed, thread count and allocator, alternating A/B B/A in one process. Prints
// the ratio of medians and whether the final weights are bitwise equal.
//
//   trainer_vs_loop [--model mlp|cnn] [--train-size N] [--batch-size B] [--epochs E]
//                   [--rounds R] [--threads T] [--logging off|on|both] [--check-only]
//                   [--profiler simple|advanced|pytorch] [--logger csv,tensorboard]
//
// --profiler P: the hand loop, Volt with profiling off and Volt with profiler P, the three
// rotated in every round; prints off/plain and P/off.
// --logger L: the hand loop against Volt with the loggers L, the progress bar and
// checkpointing on (issue 18's "everything on" case).
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/randperm.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>
#include <torch/nn/modules/container/functional.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <type_traits>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "volt/accelerators/cpu_accelerator.h"
#include "volt/data/idx.h"
#include "volt/volt.h"

namespace {

struct Args {
  std::string model = "cnn";
  int64_t train_size = 8192;
  int64_t batch_size = 64;
  int64_t epochs = 1;
  int64_t rounds = 5;
  int64_t threads = 0;
  std::string logging = "both";
  bool check_only = false;
  /// Non-empty: compare Volt at 32-true with Volt at this precision instead.
  std::string compare_precision;
  /// Non-empty: plain vs Volt (profiler off) vs Volt with this profiler.
  std::string profiler;
  /// Non-empty: plain vs Volt with these loggers, the progress bar and checkpointing.
  std::vector<std::string> loggers;
};

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    const std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) throw volt::ConfigError("--logger '" + s + "' has an empty name; use e.g. csv,tensorboard");
    out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw volt::ConfigError(k + " needs a value");
      return argv[++i];
    };
    if (k == "--model") a.model = next();
    else if (k == "--train-size") a.train_size = std::stoll(next());
    else if (k == "--batch-size") a.batch_size = std::stoll(next());
    else if (k == "--epochs") a.epochs = std::stoll(next());
    else if (k == "--rounds") a.rounds = std::stoll(next());
    else if (k == "--threads") a.threads = std::stoll(next());
    else if (k == "--logging") a.logging = next();
    else if (k == "--check-only") a.check_only = true;
    else if (k == "--compare-precision") a.compare_precision = next();
    else if (k == "--profiler") a.profiler = next();
    else if (k == "--logger") a.loggers = split_commas(next());
    else if (k == "--help" || k == "-h") {
      std::cout << "trainer_vs_loop [--model mlp|cnn] [--train-size N] [--batch-size B] [--epochs E] [--rounds R]\n"
                   "                [--threads T] [--logging off|on|both] [--check-only]\n"
                   "                [--compare-precision bf16-mixed]   (Volt 32-true vs Volt at that precision)\n"
                   "                [--profiler simple|advanced|pytorch] (plain vs Volt off vs Volt with it)\n"
                   "                [--logger csv,tensorboard]  (plain vs Volt with those loggers, progress bar,\n"
                   "                                             checkpointing)\n";
      std::exit(0);
    } else {
      throw volt::ConfigError("unknown argument " + k + "; see --help");
    }
  }
  if (a.model != "mlp" && a.model != "cnn") throw volt::ConfigError("--model must be mlp or cnn, got " + a.model);
  if (a.logging != "off" && a.logging != "on" && a.logging != "both") {
    throw volt::ConfigError("--logging must be off, on or both, got " + a.logging);
  }
  if (a.threads <= 0) a.threads = std::max(1u, std::thread::hardware_concurrency());
  return a;
}

torch::nn::Sequential make_net(const std::string& kind) {
  using namespace torch::nn;
  if (kind == "mlp") {
    return Sequential(Flatten(), Linear(784, 128), ReLU(), Linear(128, 10));
  }
  return Sequential(Conv2d(Conv2dOptions(1, 32, 3).padding(1)), ReLU(), MaxPool2d(2),
                    Conv2d(Conv2dOptions(32, 64, 3).padding(1)), ReLU(), MaxPool2d(2), Flatten(),
                    Linear(64 * 7 * 7, 128), ReLU(), Linear(128, 10));
}

constexpr double kLr = 0.05;
constexpr uint64_t kSeed = 1234;

/// The Volt side: the same network as a volt::Module.
class BenchModule : public volt::Module {
 public:
  BenchModule(const std::string& kind, bool log) : log_(log) { net_ = register_module("net", make_net(kind)); }
  at::Tensor training_step(volt::Batch& batch, volt::StepContext& ctx) override {
    auto loss = at::cross_entropy_loss(net_->forward(batch[0]), batch[1]);
    if (log_) ctx.log("train_loss", loss, {.prog_bar = true});
    return loss;
  }
  volt::OptimizerConfig configure_optimizers() override {
    return std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(kLr).momentum(0.9));
  }
  torch::nn::Sequential net_{nullptr};

 private:
  bool log_;
};

using Clock = std::chrono::steady_clock;

/// The hand-written loop: what a LibTorch user writes without a framework.
double run_plain(const Args& a, const at::Tensor& x, const at::Tensor& y, std::vector<at::Tensor>* weights) {
  // Only when it changes: re-setting the same count slowed the MLP by ~13% at 2 threads
  // (LibTorch 1.13, OpenBLAS/OpenMP); Volt's CPU accelerator does the same.
  if (at::get_num_threads() != a.threads) at::set_num_threads(static_cast<int>(a.threads));
  at::manual_seed(kSeed);
  auto net = make_net(a.model);
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(kLr).momentum(0.9));
  const int64_t n = x.size(0);
  const int64_t batches = n / a.batch_size;  // drop_last
  const auto t0 = Clock::now();
  for (int64_t epoch = 0; epoch < a.epochs; ++epoch) {
    auto gen = at::detail::createCPUGenerator(kSeed + static_cast<uint64_t>(epoch));
    const at::Tensor perm = at::randperm(n, gen);
    for (int64_t b = 0; b < batches; ++b) {
      const at::Tensor idx = perm.slice(0, b * a.batch_size, (b + 1) * a.batch_size);
      const at::Tensor xb = x.index_select(0, idx);
      const at::Tensor yb = y.index_select(0, idx);
      auto loss = at::cross_entropy_loss(net->forward(xb), yb);
      loss.backward();
      opt.step();
      // PyTorch 2.x's zero_grad(set_to_none=true), written out: LibTorch 1.13's
      // zero_grad() would memset every gradient instead.
      for (auto& p : net->parameters()) p.mutable_grad().reset();
    }
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (weights) {
    weights->clear();
    for (auto& p : net->parameters()) weights->push_back(p.detach().clone());
  }
  return s / static_cast<double>(a.epochs);
}

/// What the Volt side turns on beyond the bare loop.
struct VoltSide {
  bool logging = false;  ///< progress bar + the default logger (+ ctx.log of the loss)
  std::string profiler;
  std::vector<std::string> loggers;  ///< non-empty: these loggers (implies logging)
  bool checkpointing = false;
};

/// Sets the `logger` option to `names`: a list once the option takes logger names (tboard's
/// branch); before that only the default CSV logger exists.
template <typename Options>
void set_loggers(Options& o, const std::vector<std::string>& names) {
  if constexpr (std::is_assignable_v<decltype((o.logger)), std::vector<std::string>>) {
    o.logger = names;
  } else {
    if (names != std::vector<std::string>{"csv"}) {
      throw volt::ConfigError("--logger: this build's logger option is a bool (the CSV logger); only --logger csv "
                              "works here. Other logger names need the logger registry.");
    }
    o.logger = true;
  }
}

double run_volt(const Args& a, const at::Tensor& x, const at::Tensor& y, const VoltSide& side, const std::string& root,
                std::vector<at::Tensor>* weights, const std::string& precision = "32-true") {
  const bool logging = side.logging || !side.loggers.empty();
  at::manual_seed(kSeed);
  BenchModule module(a.model, logging);
  volt::data::DataLoaderOptions lo;
  lo.batch_size = a.batch_size;
  lo.shuffle = true;
  lo.drop_last = true;
  lo.seed = kSeed;
  auto loader = std::make_shared<volt::data::DataLoader>(std::make_shared<volt::data::TensorDataset>(
                                                              std::vector<at::Tensor>{x, y}),
                                                          lo);
  volt::TrainerOptions o;
  o.max_epochs = a.epochs;
  o.num_threads = a.threads;
  o.enable_checkpointing = side.checkpointing;
  o.enable_model_summary = false;
  o.num_sanity_val_steps = 0;
  o.enable_progress_bar = logging;
  o.logger = logging;
  if (!side.loggers.empty()) set_loggers(o, side.loggers);
  o.default_root_dir = root;
  o.precision = precision;
  o.profiler = side.profiler;
  // The bar draws as on a terminal (the costlier mode: redraws in place) into /dev/null,
  // so the benchmark's own output stays readable.
  static std::ofstream devnull("/dev/null");
  std::vector<std::shared_ptr<volt::callbacks::Callback>> callbacks;
  if (logging) {
    volt::callbacks::ProgressBarOptions po;
    po.out = &devnull;
    po.force_tty = true;
    callbacks.push_back(std::make_shared<volt::callbacks::ProgressBar>(po));
  }
  volt::Trainer trainer(o, callbacks);
  // The profiler's table (printed at the end of fit) goes to /dev/null too; it is still written.
  std::streambuf* const cout_buf = side.profiler.empty() ? nullptr : std::cout.rdbuf(devnull.rdbuf());
  const auto t0 = Clock::now();
  trainer.fit(module, loader);
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (cout_buf) std::cout.rdbuf(cout_buf);
  if (weights) {
    weights->clear();
    for (auto& p : module.parameters()) weights->push_back(p.detach().clone());
  }
  return s / static_cast<double>(a.epochs);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

bool equal_weights(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].equal(b[i])) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    // Both sides share the process, hence the allocator: glibc malloc with Volt's raised
    // mmap/trim thresholds (set once here, before either side runs).
    volt::accelerators::CPUAccelerator::tune_allocator();
    auto full = volt::data::load_mnist_format(volt::data::kFashionMnistDir, true);
    const int64_t n = std::min<int64_t>(a.train_size, full->size());
    const at::Tensor x = full->tensors()[0].slice(0, 0, n).contiguous();
    const at::Tensor y = full->tensors()[1].slice(0, 0, n).contiguous();
    // One folder per run: ctest runs two of these benchmarks at once, and one removing a
    // shared folder under the other's CSVLogger failed CI.
    const std::string root =
        (std::filesystem::temp_directory_path() / ("volt-bench-" + std::to_string(::getpid()))).string();
    const int64_t steps = n / a.batch_size;
    std::printf("model=%s images=%lld batch=%lld steps/epoch=%lld epochs/run=%lld threads=%lld rounds=%lld\n",
                a.model.c_str(), static_cast<long long>(n), static_cast<long long>(a.batch_size),
                static_cast<long long>(steps), static_cast<long long>(a.epochs), static_cast<long long>(a.threads),
                static_cast<long long>(a.rounds));
    std::printf("allocator: glibc malloc, mmap/trim thresholds raised, both sides\n");

    if (!a.compare_precision.empty()) {
      std::vector<double> fp32, other;
      for (int64_t r = 0; r < a.rounds; ++r) {
        if (r % 2 == 0) {
          fp32.push_back(run_volt(a, x, y, {}, root, nullptr));
          other.push_back(run_volt(a, x, y, {}, root, nullptr, a.compare_precision));
        } else {
          other.push_back(run_volt(a, x, y, {}, root, nullptr, a.compare_precision));
          fp32.push_back(run_volt(a, x, y, {}, root, nullptr));
        }
      }
      const double m32 = median(fp32), mo = median(other);
      std::printf("volt 32-true %8.3f s/epoch (%7.1f steps/s)  volt %s %8.3f s/epoch (%7.1f steps/s)  speed-up %.3fx\n",
                  m32, static_cast<double>(steps) / m32, a.compare_precision.c_str(), mo,
                  static_cast<double>(steps) / mo, m32 / mo);
      { std::error_code ec_rm; volt::remove_tree(root, ec_rm); }
      return 0;
    }

    std::vector<at::Tensor> wp, wv;
    run_plain(a, x, y, &wp);
    run_volt(a, x, y, {}, root, &wv);
    const bool equal = equal_weights(wp, wv);
    std::printf("final weights bitwise equal (progress bar and logging off): %s\n", equal ? "yes" : "NO");
    if (a.check_only) {
      { std::error_code ec_rm; volt::remove_tree(root, ec_rm); }
      return equal ? 0 : 1;
    }

    int status = equal ? 0 : 1;
    if (!a.profiler.empty() || !a.loggers.empty()) {
      // Several sides, rotated every round (ABC, BCA, CAB, ...): drift in machine speed
      // falls on each alike.
      struct Side {
        std::string label;
        std::function<double()> run;
        std::vector<double> s;
      };
      std::vector<Side> sides;
      sides.push_back({"plain", [&] { return run_plain(a, x, y, nullptr); }, {}});
      if (!a.profiler.empty()) {
        sides.push_back({"volt, profiler off", [&] { return run_volt(a, x, y, {}, root, nullptr); }, {}});
        VoltSide p;
        p.profiler = a.profiler;
        sides.push_back({"volt, profiler=" + a.profiler, [&a, &x, &y, &root, p] { return run_volt(a, x, y, p, root, nullptr); }, {}});
      }
      if (!a.loggers.empty()) {
        VoltSide full;
        full.loggers = a.loggers;
        full.checkpointing = true;
        std::string names;
        for (const auto& l : a.loggers) names += (names.empty() ? "" : ",") + l;
        sides.push_back({"volt, logger=" + names + " + bar + ckpt",
                         [&a, &x, &y, &root, full] { return run_volt(a, x, y, full, root, nullptr); }, {}});
      }
      for (int64_t r = 0; r < a.rounds; ++r) {
        for (size_t k = 0; k < sides.size(); ++k) {
          Side& side = sides[(k + static_cast<size_t>(r)) % sides.size()];
          side.s.push_back(side.run());
        }
      }
      const double mp = median(sides[0].s);
      for (const Side& side : sides) {
        const double m = median(side.s);
        std::printf("%-44s %8.4f s/epoch (%7.1f steps/s)  vs plain %.4f\n", side.label.c_str(), m,
                    static_cast<double>(steps) / m, m / mp);
      }
      if (!a.profiler.empty()) {
        std::printf("profiler=%s over profiler off: %.4f\n", a.profiler.c_str(), median(sides[2].s) / median(sides[1].s));
      }
      { std::error_code ec_rm; volt::remove_tree(root, ec_rm); }
      return status;
    }
    for (const bool logging : {false, true}) {
      if ((logging && a.logging == "off") || (!logging && a.logging == "on")) continue;
      std::vector<double> plain, volt_s;
      for (int64_t r = 0; r < a.rounds; ++r) {
        // A B, then B A: drift in machine speed hits both sides alike.
        if (r % 2 == 0) {
          plain.push_back(run_plain(a, x, y, nullptr));
          volt_s.push_back(run_volt(a, x, y, VoltSide{logging}, root, nullptr));
        } else {
          volt_s.push_back(run_volt(a, x, y, VoltSide{logging}, root, nullptr));
          plain.push_back(run_plain(a, x, y, nullptr));
        }
      }
      const double mp = median(plain), mv = median(volt_s);
      std::printf("%-32s plain %8.3f s/epoch (%7.1f steps/s)  volt %8.3f s/epoch (%7.1f steps/s)  ratio %.4f\n",
                  logging ? "progress bar + CSV logging on:" : "progress bar + logging off:", mp,
                  static_cast<double>(steps) / mp, mv, static_cast<double>(steps) / mv, mv / mp);
    }
    { std::error_code ec_rm; volt::remove_tree(root, ec_rm); }
    return status;
  } catch (const std::exception& e) {
    std::cerr << "trainer_vs_loop: " << e.what() << "\n";
    return 2;
  }
}
