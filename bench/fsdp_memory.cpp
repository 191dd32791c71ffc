// Per-rank memory and step time of ddp against fsdp FULL_SHARD and SHARD_GRAD_OP on 2 processes of
// this machine: a 12-layer transformer language model of 54.6M parameters (vocabulary 16384, width 512,
// 8 heads, feed-forward 2048, untied output layer) trained with Adam, batch 4 x 64 tokens per rank,
// 1 intra-op thread per rank.
//   counted : bytes of the distinct storages of the parameters, the gradients and Adam's state
//             (exp_avg, exp_avg_sq) on a rank just before an optimizer step (gradients reduced, Adam's
//             state from the step before: the most of the three a rank holds at once)
//   peak RSS: VmHWM of each rank process at the end of fit (everything: activations, buckets, gathers)
//   step    : median wall time of the measured steps (after --warmup), the slower rank's
// WRAPPED is FULL_SHARD with the embedding, every block and the head wrapped in volt::Sharded; OFFLOAD is
// FULL_SHARD with fsdp.cpu_offload.
// Every mode runs in fresh processes, modes alternating for --rounds rounds; medians are reported,
// with each figure as a ratio to ddp's.
//   build/bench/fsdp_memory [--steps 3] [--warmup 1] [--rounds 1] [--layers 12] [--wrap class:TransformerEncoderLayer]
// A rank process is this program with --mode; the driver is this program without it.
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/transformerlayer.h>
#include <torch/optim/adam.h>

#include <ATen/ops/ones.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/triu.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "volt/callbacks/callback.h"
#include "volt/core/module.h"
#include "volt/data/dataloader.h"
#include "volt/data/dataset.h"
#include "volt/strategies/fsdp_strategy.h"
#include "volt/trainer/trainer.h"

namespace {

std::map<std::string, std::string> g_args;
std::string arg(const std::string& k, const std::string& d) {
  auto it = g_args.find(k);
  return it == g_args.end() ? d : it->second;
}
int64_t arg_int(const std::string& k, int64_t d) {
  return std::stoll(arg(k, std::to_string(d)));
}

constexpr int64_t kVocab = 16384, kWidth = 512, kHeads = 8, kFeedForward = 2048, kSeq = 64, kBatch = 4;

/// `wrapped`: the embedding, each block and the output layer are volt::Sharded units (the same parameters,
/// names and initial values): under FULL_SHARD each is gathered just before its forward and backward.
class TransformerLM : public volt::Module {
 public:
  TransformerLM(int64_t layers, bool wrapped) {
    torch::manual_seed(0);
    const auto block_options =
        torch::nn::TransformerEncoderLayerOptions(kWidth, kHeads).dim_feedforward(kFeedForward).dropout(0.0);
    if (wrapped) {
      wembed = register_module("embed", volt::Sharded<torch::nn::EmbeddingImpl>(kVocab, kWidth));
    } else {
      embed = register_module("embed", torch::nn::Embedding(kVocab, kWidth));
    }
    for (int64_t i = 0; i < layers; ++i) {
      const std::string name = "block" + std::to_string(i);
      if (wrapped) {
        wblocks.push_back(register_module(name, volt::Sharded<torch::nn::TransformerEncoderLayerImpl>(block_options)));
      } else {
        blocks.push_back(register_module(name, torch::nn::TransformerEncoderLayer(block_options)));
      }
    }
    if (wrapped) {
      whead = register_module("head", volt::Sharded<torch::nn::LinearImpl>(kWidth, kVocab));
    } else {
      head = register_module("head", torch::nn::Linear(kWidth, kVocab));
    }
    mask = at::triu(at::ones({kSeq, kSeq}) * -1e9, 1);
  }
  at::Tensor training_step(volt::Batch& batch, volt::StepContext&) override {
    at::Tensor h = (embed ? embed->forward(batch[0]) : wembed(batch[0])).transpose(0, 1);  // [seq, batch, width]
    for (auto& b : blocks) h = b->forward(h, mask);
    for (auto& b : wblocks) h = b(h, mask);
    h = h.transpose(0, 1);
    at::Tensor logits = head ? head->forward(h) : whead(h);  // [batch, seq, vocab]
    return torch::nn::functional::cross_entropy(logits.reshape({-1, kVocab}), batch[1].reshape(-1));
  }
  volt::OptimizerConfig configure_optimizers() override {
    return volt::OptimizerConfig(std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(1e-4)));
  }
  torch::nn::Embedding embed{nullptr};
  std::vector<torch::nn::TransformerEncoderLayer> blocks;
  torch::nn::Linear head{nullptr};
  volt::Sharded<torch::nn::EmbeddingImpl> wembed{nullptr};
  std::vector<volt::Sharded<torch::nn::TransformerEncoderLayerImpl>> wblocks;
  volt::Sharded<torch::nn::LinearImpl> whead{nullptr};
  at::Tensor mask;
};

int64_t storage_bytes(const std::vector<at::Tensor>& tensors) {
  std::set<const void*> seen;
  int64_t bytes = 0;
  for (const auto& t : tensors) {
    if (!t.defined() || t.numel() == 0) continue;
    const void* key = t.storage().data();
    if (seen.insert(key).second) bytes += static_cast<int64_t>(t.storage().nbytes());
  }
  return bytes;
}

int64_t vm_hwm_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}

/// Step times and, after the last step, the counted bytes; written by each rank at the end of fit.
class Measure : public volt::callbacks::Callback {
 public:
  Measure(std::string out, volt::Trainer*& trainer) : out_(std::move(out)), trainer_(trainer) {}
  std::string state_key() const override { return "Measure"; }
  void on_train_batch_start(volt::TrainerView&, const volt::Batch&, int64_t) override {
    start_ = std::chrono::steady_clock::now();
  }
  void on_train_batch_end(volt::TrainerView&, const at::Tensor&, const volt::Batch&, int64_t index) override {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (index >= arg_int("warmup", 1)) times_.push_back(s);
  }
  // Counted where a rank holds the most of the three: gradients reduced (ddp) or reduce-scattered (fsdp),
  // parameters back at rest, Adam's state from the step before.
  void on_before_optimizer_step(volt::TrainerView& view, torch::optim::Optimizer&, size_t) override {
    std::vector<at::Tensor> params, grads, state;
    for (const auto& p : view.module().parameters()) {
      params.push_back(p);
      grads.push_back(p.grad());
    }
    for (const auto& opt : view.optimizers()) {
      for (const auto& entry : opt->state()) {
        if (auto* a = dynamic_cast<const torch::optim::AdamParamState*>(entry.second.get())) {
          state.push_back(a->exp_avg());
          state.push_back(a->exp_avg_sq());
        }
      }
    }
    param_bytes_ = storage_bytes(params);
    grad_bytes_ = storage_bytes(grads);
    state_bytes_ = storage_bytes(state);
  }
  void on_fit_end(volt::TrainerView&) override {
    std::sort(times_.begin(), times_.end());
    const double median = times_.empty() ? -1.0 : times_[times_.size() / 2];
    std::ofstream file(out_ + ".rank" + std::to_string(trainer_->strategy().global_rank()));
    file << "params " << param_bytes_ << "\ngrads " << grad_bytes_ << "\nstate " << state_bytes_ << "\nhwm "
         << vm_hwm_bytes() << "\nstep " << median << "\n";
  }

 private:
  std::string out_;
  volt::Trainer*& trainer_;
  std::chrono::steady_clock::time_point start_;
  std::vector<double> times_;
  int64_t param_bytes_ = 0, grad_bytes_ = 0, state_bytes_ = 0;
};

int run_rank(const std::string& mode) {
  const int64_t steps = arg_int("warmup", 1) + arg_int("steps", 3);
  torch::manual_seed(1);
  const int64_t n = steps * kBatch * 2;
  at::Tensor tokens = at::randint(kVocab, {n, kSeq + 1}, at::kLong);
  auto data = std::make_shared<volt::data::TensorDataset>(std::vector<at::Tensor>{
      tokens.narrow(1, 0, kSeq).contiguous(), tokens.narrow(1, 1, kSeq).contiguous()});
  volt::data::DataLoaderOptions lo;
  lo.batch_size = kBatch;
  volt::TrainerOptions o;
  o.accelerator = "cpu";
  o.devices = "2";
  o.num_threads = 1;
  o.strategy = mode == "ddp" ? "ddp" : "fsdp";
  const bool wrapped = mode == "WRAPPED";
  if (mode != "ddp") {
    o.fsdp_cpu_offload = mode == "OFFLOAD";
    o.fsdp_sharding_strategy = wrapped || o.fsdp_cpu_offload ? "FULL_SHARD" : mode;
    o.fsdp_auto_wrap_policy = wrapped ? "" : arg("wrap", "class:TransformerEncoderLayer");
  }
  o.max_steps = steps;
  o.enable_progress_bar = false;
  o.enable_model_summary = false;
  o.enable_checkpointing = false;
  o.logger = false;
  o.num_sanity_val_steps = 0;
  o.default_root_dir = arg("out", "/tmp/fsdp_memory") + ".root";
  volt::Trainer* self = nullptr;
  volt::Trainer trainer(o, {std::make_shared<Measure>(arg("out", "/tmp/fsdp_memory"), self)});
  self = &trainer;
  TransformerLM model(arg_int("layers", 12), wrapped);
  trainer.fit(model, std::make_shared<volt::data::DataLoader>(data, lo));
  return 0;
}

std::map<std::string, double> read_rank(const std::string& path) {
  std::map<std::string, double> r;
  std::ifstream in(path);
  std::string k;
  double v = 0;
  while (in >> k >> v) r[k] = v;
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? -1.0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    if (key.rfind("--", 0) != 0) {
      std::cerr << "usage: fsdp_memory [--steps N] [--warmup N] [--rounds N] [--layers N] [--wrap POLICY]\n";
      return 2;
    }
    g_args[key.substr(2)] = argv[i + 1];
  }
  if (g_args.count("mode")) {
    try {
      return run_rank(arg("mode", "ddp"));
    } catch (const std::exception& e) {
      std::cerr << "fsdp_memory rank: " << e.what() << "\n";
      return 1;
    }
  }
  // WRAPPED: FULL_SHARD with the embedding, the blocks and the head each a volt::Sharded unit (gathered just
  // before its forward and its backward, freed after each); FULL_SHARD and SHARD_GRAD_OP: the blocks as units
  // of the wrap policy (gathered at the step's start).
  // OFFLOAD: FULL_SHARD's units with fsdp.cpu_offload (on this CPU-only machine host and device are the same
  // memory: it measures what the offload's own copies cost).
  const std::vector<std::string> modes = {"ddp", "FULL_SHARD", "WRAPPED", "SHARD_GRAD_OP", "OFFLOAD"};
  std::map<std::string, std::map<std::string, std::vector<double>>> results;
  const std::string dir = "/tmp/volt_fsdp_memory_" + std::to_string(::getpid());
  std::string forwarded;
  for (const auto& [k, v] : g_args) forwarded += " --" + k + " '" + v + "'";
  int64_t n = 0;
  {
    TransformerLM probe(arg_int("layers", 12), false);
    for (const auto& p : probe.parameters()) n += p.numel();
    std::printf("fsdp_memory: transformer LM, %lld layers, %.1fM parameters, Adam, 2 ranks x 1 thread, batch %lld x "
                "%lld tokens per rank\n",
                static_cast<long long>(arg_int("layers", 12)), n / 1e6, static_cast<long long>(kBatch),
                static_cast<long long>(kSeq));
  }
  for (int64_t round = 0; round < arg_int("rounds", 1); ++round) {
    for (const auto& mode : modes) {
      const std::string out = dir + "_" + mode + "_" + std::to_string(round);
      std::printf("fsdp_memory: round %lld, %s ...\n", static_cast<long long>(round + 1), mode.c_str());
      std::fflush(stdout);
      const std::string cmd = std::string("'") + argv[0] + "' --mode " + mode + " --out '" + out + "'" + forwarded;
      if (std::system(cmd.c_str()) != 0) {
        std::cerr << "fsdp_memory: the " << mode << " run failed: " << cmd << "\n";
        return 1;
      }
      for (int r = 0; r < 2; ++r) {
        const auto v = read_rank(out + ".rank" + std::to_string(r));
        auto& into = results[mode];
        into["counted" + std::to_string(r)].push_back(v.at("params") + v.at("grads") + v.at("state"));
        into["params" + std::to_string(r)].push_back(v.at("params"));
        into["grads" + std::to_string(r)].push_back(v.at("grads"));
        into["state" + std::to_string(r)].push_back(v.at("state"));
        into["hwm" + std::to_string(r)].push_back(v.at("hwm"));
        into["step" + std::to_string(r)].push_back(v.at("step"));
      }
    }
  }
  auto fig = [&](const std::string& mode, const std::string& what) {
    // The larger of the two ranks.
    return std::max(median(results[mode][what + "0"]), median(results[mode][what + "1"]));
  };
  const double mib = 1024.0 * 1024.0;
  std::printf("\n%-14s %10s %10s %10s %12s %8s %12s %8s %10s %8s\n", "mode", "params", "grads", "adam", "counted",
              "x ddp", "peak RSS", "x ddp", "step s", "x ddp");
  for (const auto& mode : modes) {
    std::printf("%-14s %8.1f M %8.1f M %8.1f M %10.1f M %8.3f %10.1f M %8.3f %10.3f %8.3f\n", mode.c_str(),
                fig(mode, "params") / mib, fig(mode, "grads") / mib, fig(mode, "state") / mib,
                fig(mode, "counted") / mib, fig(mode, "counted") / fig("ddp", "counted"), fig(mode, "hwm") / mib,
                fig(mode, "hwm") / fig("ddp", "hwm"), fig(mode, "step"), fig(mode, "step") / fig("ddp", "step"));
  }
  std::printf("(MiB per rank, the larger rank; counted = parameters + gradients + Adam state just before an optimizer step)\n");
  // `volt plan --params` must predict what was counted (within fsdp's per-parameter padding).
  int failed = 0;
  for (const auto& mode : modes) {
    const auto sharding = mode == "ddp"       ? volt::strategies::ShardingStrategy::kNoShard
                          : mode == "WRAPPED" || mode == "OFFLOAD" ? volt::strategies::ShardingStrategy::kFullShard
                                              : volt::strategies::parse_sharding_strategy(mode);
    const double plan =
        static_cast<double>(volt::strategies::rank_memory(mode == "ddp" ? "ddp" : "fsdp", sharding, 2, n, 4, 2).total());
    const double counted = fig(mode, "counted");
    std::printf("%-14s volt plan predicts %.1f MiB, counted %.1f MiB (%+.3f%%)\n", mode.c_str(), plan / mib,
                counted / mib, 100.0 * (counted - plan) / plan);
    if (std::abs(counted - plan) > 0.01 * plan) failed = 1;
  }
  if (failed) std::fprintf(stderr, "fsdp_memory: the counted bytes differ from volt plan's by more than 1%%\n");
  return failed;
}
