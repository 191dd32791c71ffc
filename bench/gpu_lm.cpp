// Tokens/s of a GPT-2-small-size language model (12 layers, width 768, 12 heads, sequence 1024,
// vocabulary 50304: about 124M parameters) trained by volt::Trainer and by a hand-written LibTorch
// loop: same model, data, seed, bf16-mixed autocast and AdamW (LibTorch's fused _fused_adamw_ kernel
// on CUDA where this LibTorch has it), alternating Volt / hand in one process. Prints each side's
// tokens/s, Volt/hand, and the model FLOPs utilisation against --peak-tflops (989: the H200's dense
// bf16 peak). bench/gpu_lm.py trains the same model in plain PyTorch (scripts/gpu-check.sh runs both).
//
//   gpu_lm [--steps 30] [--warmup 5] [--rounds 2] [--batch-size 16] [--seq 1024] [--layers 12]
//          [--width 768] [--heads 12] [--vocab 50304] [--peak-tflops 989] [--device cuda|cpu] [--tiny]
//
// --tiny: a 2-layer width-64 model on the CPU for 2 steps, the two sides' weights compared (the
// smoke test of the CPU build: bench.gpu_lm.tiny). FLOPs per token: 6 N + 12 L d T (N: parameters
// without the position embedding, the output layer tied to the token embedding; the attention
// term as in PaLM's appendix and nanoGPT's estimate).
#include <ATen/autocast_mode.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/randint.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/optim/adamw.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#if __has_include(<ATen/ops/_fused_adamw.h>)
#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_fused_adamw.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#define VOLT_BENCH_FUSED_ADAMW 1
#endif
#if __has_include(<ATen/ops/scaled_dot_product_attention.h>)
#include <ATen/ops/scaled_dot_product_attention.h>
#define VOLT_BENCH_SDPA 1
#else
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/softmax.h>
#endif
#ifdef VOLT_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "volt/accelerators/cuda_accelerator.h"
#include "volt/core/compat.h"
#include "volt/core/seed.h"
#include "volt/volt.h"

#include "gpu_bench.h"

namespace {

using gpu_bench::Side;
using gpu_bench::StepTimer;
using gpu_bench::synchronize;
using gpu_bench::weights_of;

struct Args {
  int64_t steps = 30, warmup = 5, rounds = 2, batch = 16, seq = 1024, layers = 12, width = 768, heads = 12,
          vocab = 50304;
  double peak_tflops = 989.0;
  std::string device = "cuda";
  bool tiny = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw volt::ConfigError(k + " needs a value; see --help");
      return argv[++i];
    };
    auto count = [&](int64_t lowest) {
      const std::string v = next();
      size_t used = 0;
      long long n = 0;
      try {
        n = std::stoll(v, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != v.size() || n < lowest) {
        throw volt::ConfigError(k + " must be an integer >= " + std::to_string(lowest) + ", got '" + v + "'");
      }
      return static_cast<int64_t>(n);
    };
    if (k == "--steps") a.steps = count(1);
    else if (k == "--warmup") a.warmup = count(1);
    else if (k == "--rounds") a.rounds = count(1);
    else if (k == "--batch-size") a.batch = count(1);
    else if (k == "--seq") a.seq = count(2);
    else if (k == "--layers") a.layers = count(1);
    else if (k == "--width") a.width = count(1);
    else if (k == "--heads") a.heads = count(1);
    else if (k == "--vocab") a.vocab = count(2);
    else if (k == "--peak-tflops") a.peak_tflops = std::stod(next());
    else if (k == "--device") a.device = next();
    else if (k == "--tiny") {
      a.tiny = true;
      a.steps = 2, a.warmup = 1, a.rounds = 1, a.batch = 4, a.seq = 32, a.layers = 2, a.width = 64, a.heads = 2;
      a.vocab = 256, a.device = "cpu";
    } else if (k == "--help" || k == "-h") {
      std::cout << "gpu_lm [--steps 30] [--warmup 5] [--rounds 2] [--batch-size 16] [--seq 1024] [--layers 12]\n"
                   "       [--width 768] [--heads 12] [--vocab 50304] [--peak-tflops 989] [--device cuda|cpu] "
                   "[--tiny]\n";
      std::exit(0);
    } else {
      throw volt::ConfigError("unknown argument " + k + "; see --help");
    }
  }
  if (a.width % a.heads != 0) {
    throw volt::ConfigError("--width " + std::to_string(a.width) + " is not a multiple of --heads " +
                            std::to_string(a.heads));
  }
  if (a.device != "cuda" && a.device != "cpu") throw volt::ConfigError("--device must be cuda or cpu, got " + a.device);
  return a;
}

/// One pre-norm transformer block (GPT-2's), causal attention.
struct BlockImpl : torch::nn::Module {
  BlockImpl(int64_t width, int64_t heads) : heads(heads) {
    ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})));
    qkv = register_module("qkv", torch::nn::Linear(width, 3 * width));
    proj = register_module("proj", torch::nn::Linear(width, width));
    ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})));
    fc = register_module("fc", torch::nn::Linear(width, 4 * width));
    fc2 = register_module("fc2", torch::nn::Linear(4 * width, width));
  }
  at::Tensor forward(at::Tensor x) {
    const int64_t b = x.size(0), t = x.size(1), c = x.size(2), hd = c / heads;
    auto parts = qkv->forward(ln1->forward(x)).split(c, /*dim=*/2);
    auto shape = [&](const at::Tensor& z) { return z.view({b, t, heads, hd}).transpose(1, 2); };
    const at::Tensor q = shape(parts[0]), k = shape(parts[1]), v = shape(parts[2]);
#ifdef VOLT_BENCH_SDPA
    at::Tensor y = at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
#else
    at::Tensor att = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(hd));
    const at::Tensor mask = at::ones({t, t}, x.options().dtype(at::kBool)).triu(1);
    at::Tensor y = at::matmul(at::softmax(att.masked_fill(mask, -INFINITY), -1), v);
#endif
    x = x + proj->forward(y.transpose(1, 2).contiguous().view({b, t, c}));
    return x + fc2->forward(at::gelu(fc->forward(ln2->forward(x)), "tanh"));
  }
  int64_t heads;
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  torch::nn::Linear qkv{nullptr}, proj{nullptr}, fc{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Block);

/// GPT-2: token and position embeddings, the blocks, a final LayerNorm, the output layer tied to
/// the token embedding. Weights N(0, 0.02), biases 0 (GPT-2's initialisation).
struct GptImpl : torch::nn::Module {
  explicit GptImpl(const Args& a) {
    wte = register_module("wte", torch::nn::Embedding(a.vocab, a.width));
    wpe = register_module("wpe", torch::nn::Embedding(a.seq, a.width));
    for (int64_t i = 0; i < a.layers; ++i) blocks.push_back(register_module("h" + std::to_string(i), Block(a.width, a.heads)));
    lnf = register_module("lnf", torch::nn::LayerNorm(torch::nn::LayerNormOptions({a.width})));
    at::NoGradGuard no_grad;
    for (auto& p : named_parameters()) {
      if (p.key().find("ln") != std::string::npos) continue;  // LayerNorm: ones and zeros
      if (p.value().dim() >= 2) torch::nn::init::normal_(p.value(), 0.0, 0.02);
      else p.value().zero_();
    }
  }
  at::Tensor forward(const at::Tensor& tokens) {
    const int64_t t = tokens.size(1);
    at::Tensor pos = at::arange(t, tokens.options());
    at::Tensor x = wte->forward(tokens) + wpe->forward(pos);
    for (auto& block : blocks) x = block->forward(x);
    return at::linear(lnf->forward(x), wte->weight);
  }
  torch::nn::Embedding wte{nullptr}, wpe{nullptr};
  std::vector<Block> blocks;
  torch::nn::LayerNorm lnf{nullptr};
};
TORCH_MODULE(Gpt);

at::Tensor lm_loss(Gpt& net, const at::Tensor& x, const at::Tensor& y) {
  const at::Tensor logits = net->forward(x);
  return at::cross_entropy_loss(logits.view({-1, logits.size(-1)}), y.reshape({-1}));
}

#ifdef VOLT_BENCH_FUSED_ADAMW
/// AdamW through LibTorch's fused multi-tensor kernel (torch.optim.AdamW(fused=True)'s): one
/// launch for every parameter. Its state is not saved (the benchmark writes no checkpoint).
class FusedAdamW : public torch::optim::Optimizer {
 public:
  FusedAdamW(std::vector<at::Tensor> params, const torch::optim::AdamWOptions& o)
      : Optimizer({torch::optim::OptimizerParamGroup(std::move(params))},
                  std::make_unique<torch::optim::AdamWOptions>(o)),
        o_(o) {}
  at::Tensor step(LossClosure closure = nullptr) override {
    TORCH_CHECK(!closure, "FusedAdamW takes no closure");
    at::NoGradGuard no_grad;
    std::vector<at::Tensor> params, grads;
    for (const auto& p : param_groups().front().params()) {
      if (!p.grad().defined()) continue;
      params.push_back(p);
      grads.push_back(p.grad());
    }
    if (exp_avg_.empty()) {
      for (const auto& p : params) {
        exp_avg_.push_back(at::zeros_like(p));
        exp_avg_sq_.push_back(at::zeros_like(p));
        steps_.push_back(at::zeros({}, p.options().dtype(at::kFloat)));
      }
    }
    TORCH_CHECK(exp_avg_.size() == params.size(), "FusedAdamW: the parameters with gradients changed");
    at::_foreach_add_(steps_, 1);
    const auto [beta1, beta2] = o_.betas();
    at::_fused_adamw_(params, grads, exp_avg_, exp_avg_sq_, {}, steps_, o_.lr(), beta1, beta2, o_.weight_decay(),
                      o_.eps(), /*amsgrad=*/false, /*maximize=*/false);
    return {};
  }

 private:
  torch::optim::AdamWOptions o_;
  std::vector<at::Tensor> exp_avg_, exp_avg_sq_, steps_;
};
#endif

torch::optim::AdamWOptions adamw_options() {
  return torch::optim::AdamWOptions(3e-4).betas({0.9, 0.95}).weight_decay(0.1).eps(1e-8);
}

bool fused_adamw(const c10::Device& device) {
#ifdef VOLT_BENCH_FUSED_ADAMW
  return device.is_cuda();
#else
  (void)device;
  return false;
#endif
}

std::shared_ptr<torch::optim::Optimizer> make_adamw(std::vector<at::Tensor> params, const c10::Device& device) {
#ifdef VOLT_BENCH_FUSED_ADAMW
  if (fused_adamw(device)) return std::make_shared<FusedAdamW>(std::move(params), adamw_options());
#else
  (void)device;
#endif
  return std::make_shared<torch::optim::AdamW>(std::move(params), adamw_options());
}

/// The same network as a volt::Module.
class LmModule : public volt::Module {
 public:
  LmModule(const Args& a, c10::Device device) : device_(device) { net = register_module("net", Gpt(a)); }
  at::Tensor training_step(volt::Batch& batch, volt::StepContext&) override { return lm_loss(net, batch[0], batch[1]); }
  volt::OptimizerConfig configure_optimizers() override { return make_adamw(parameters(), device_); }
  Gpt net{nullptr};

 private:
  c10::Device device_;
};

/// Times the steps after the warm-up ones: from the start of batch `warmup` to the end of
/// training, the device synchronised at both ends.

struct Data {
  at::Tensor x, y;  // [steps * batch, seq] int64, CPU (pinned on a CUDA run)
};

Data make_data(const Args& a, int64_t batches, bool pin) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1234);
  at::Tensor tokens = at::randint(a.vocab, {batches * a.batch, a.seq + 1}, gen, at::TensorOptions().dtype(at::kLong));
  Data d{tokens.slice(1, 0, a.seq).contiguous(), tokens.slice(1, 1, a.seq + 1).contiguous()};
  if (pin) {
    d.x = d.x.pin_memory();
    d.y = d.y.pin_memory();
  }
  return d;
}

Side run_volt(const Args& a, const Data& d, c10::Device device, int64_t batches) {
  volt::seed_everything(42);
  LmModule module(a, device);
  volt::TrainerOptions o;
  o.accelerator = device.is_cuda() ? "cuda" : "cpu";
  o.devices = "1";
  // The hand loop's intra-op thread count (Volt's CPU accelerator would take every core).
  o.num_threads = at::get_num_threads();
  o.precision = "bf16-mixed";
  o.max_steps = batches;
  o.max_epochs = -1;
  o.enable_progress_bar = false;
  o.enable_model_summary = false;
  o.enable_checkpointing = false;
  o.logger = false;
  o.num_sanity_val_steps = 0;
  o.default_root_dir = "gpu_lm_runs";
  auto timer = std::make_shared<StepTimer>(a.warmup, device);
  volt::Trainer trainer(o, {timer});
  volt::data::DataLoaderOptions lo;
  lo.batch_size = a.batch;
  lo.pin_memory = device.is_cuda();
  auto loader = std::make_shared<volt::data::DataLoader>(
      std::make_shared<volt::data::TensorDataset>(std::vector<at::Tensor>{d.x, d.y}), lo);
  trainer.fit(module, loader);
  Side s{timer->seconds, {}};
  if (a.tiny) s.weights = weights_of(module);
  return s;
}

Side run_hand(const Args& a, const Data& d, c10::Device device, int64_t batches) {
  volt::seed_everything(42);
  Gpt net(a);
  net->to(device);
  net->train();
  auto opt = make_adamw(net->parameters(), device);
  const c10::DeviceType type = device.type();
  std::chrono::steady_clock::time_point start;
  for (int64_t i = 0; i < batches; ++i) {
    if (i == a.warmup) {
      synchronize(device);
      start = std::chrono::steady_clock::now();
    }
    const at::Tensor x = d.x.slice(0, i * a.batch, (i + 1) * a.batch).to(device, /*non_blocking=*/true);
    const at::Tensor y = d.y.slice(0, i * a.batch, (i + 1) * a.batch).to(device, /*non_blocking=*/true);
    at::Tensor loss;
    {
      const bool was = volt::compat::autocast_enabled(type);
      const at::ScalarType was_dtype = volt::compat::autocast_dtype(type);
      volt::compat::set_autocast_enabled(type, true);
      volt::compat::set_autocast_dtype(type, at::kBFloat16);
      at::autocast::increment_nesting();
      loss = lm_loss(net, x, y);
      if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
      volt::compat::set_autocast_enabled(type, was);
      volt::compat::set_autocast_dtype(type, was_dtype);
    }
    loss.backward();
    opt->step();
    opt->zero_grad();
  }
  synchronize(device);
  Side s{std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), {}};
  if (a.tiny) s.weights = weights_of(*net);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    const c10::Device device = a.device == "cuda" ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
    if (device.is_cuda() && volt::accelerators::CUDAAccelerator::device_count() == 0) {
      std::cerr << "gpu_lm: --device cuda, but "
                << (volt::accelerators::CUDAAccelerator::compiled_with_cuda() ? "no GPU is visible"
                                                                               : "this Volt build has no CUDA")
                << "; use --device cpu (or --tiny)\n";
      return 2;
    }
    const int64_t batches = a.warmup + a.steps;
    const Data d = make_data(a, batches, device.is_cuda());
    int64_t n_params = 0, n_pos = 0;
    {
      Gpt probe(a);
      for (const auto& p : probe->parameters()) n_params += p.numel();
      n_pos = probe->wpe->weight.numel();
    }
    const double flops_per_token = 6.0 * static_cast<double>(n_params - n_pos) +
                                   12.0 * static_cast<double>(a.layers * a.width * a.seq);
    const double tokens = static_cast<double>(a.steps * a.batch * a.seq);
    std::printf("gpu_lm: %.1fM parameters (%lld layers, width %lld, %lld heads, vocabulary %lld), batch %lld x %lld, "
                "bf16-mixed, AdamW %s, attention %s, on %s; %lld timed steps after %lld warm-up, %lld rounds\n",
                n_params / 1e6, static_cast<long long>(a.layers), static_cast<long long>(a.width),
                static_cast<long long>(a.heads), static_cast<long long>(a.vocab), static_cast<long long>(a.batch),
                static_cast<long long>(a.seq), fused_adamw(device) ? "fused (_fused_adamw_)" : "LibTorch's (unfused)",
#ifdef VOLT_BENCH_SDPA
                "scaled_dot_product_attention",
#else
                "matmul + softmax",
#endif
                device.str().c_str(), static_cast<long long>(a.steps), static_cast<long long>(a.warmup),
                static_cast<long long>(a.rounds));
    std::vector<double> volt_s, hand_s;
    Side last_volt, last_hand;
    for (int64_t r = 0; r < a.rounds; ++r) {
      // Alternate which side goes first.
      if (r % 2 == 0) {
        last_volt = run_volt(a, d, device, batches);
        last_hand = run_hand(a, d, device, batches);
      } else {
        last_hand = run_hand(a, d, device, batches);
        last_volt = run_volt(a, d, device, batches);
      }
      volt_s.push_back(last_volt.seconds);
      hand_s.push_back(last_hand.seconds);
      std::printf("gpu_lm: round %lld: volt %.0f tokens/s, hand %.0f tokens/s\n", static_cast<long long>(r + 1),
                  tokens / last_volt.seconds, tokens / last_hand.seconds);
    }
    const double volt_best = *std::min_element(volt_s.begin(), volt_s.end());
    const double hand_best = *std::min_element(hand_s.begin(), hand_s.end());
    const double volt_tps = tokens / volt_best, hand_tps = tokens / hand_best;
    const double peak = a.peak_tflops * 1e12;
    std::printf("gpu_lm: volt %.0f tokens/s (MFU %.1f%%), hand %.0f tokens/s (MFU %.1f%%), volt/hand %.3f "
                "(best round of each; %.3g FLOPs per token, peak %.0f TFLOP/s)\n",
                volt_tps, 100.0 * volt_tps * flops_per_token / peak, hand_tps, 100.0 * hand_tps * flops_per_token / peak,
                volt_tps / hand_tps, flops_per_token, a.peak_tflops);
    std::printf("RESULT gpu_lm volt_tokens_per_s=%.1f hand_tokens_per_s=%.1f volt_over_hand=%.4f flops_per_token=%.6g\n",
                volt_tps, hand_tps, volt_tps / hand_tps, flops_per_token);
    if (a.tiny) {
      double diff = 0;
      for (size_t i = 0; i < last_volt.weights.size(); ++i) {
        diff = std::max(diff, (last_volt.weights[i] - last_hand.weights[i]).abs().max().item<double>());
      }
      std::printf("gpu_lm: --tiny: largest weight difference volt - hand %.3g\n", diff);
      if (last_volt.weights.size() != last_hand.weights.size() || diff > 1e-5) {
        std::fprintf(stderr, "gpu_lm: the two sides trained different weights (difference %.3g > 1e-5)\n", diff);
        return 1;
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_lm: %s\n", e.what());
    return 2;
  }
}
