// A small training program for the distributed tests: every process of a job runs it (as
// rank 0 re-running itself, under `volt launch`, or as spawned workers), trains a tiny MLP
// on fixed synthetic data, and writes its final parameters as exact hex floats.
//   volt_dist_program --strategy ddp --devices 2 --batch 8 --steps 20 --out /tmp/x [options]
// Options: --accumulate A, --epochs E, --fits F (fit F times in a row on one Trainer),
// --die-rank R --die-step S (that rank SIGKILLs itself at step S), --stall-rank R (that rank
// never joins a collective), --timeout SEC (process-group timeout), --shuffle,
// --precision P, --sync-log (logs a sync_dist metric and writes it), --accelerator A (tpu:
// with VOLT_TPU_EMULATION=lazy), --dump-ranks (every rank, spawned workers included, also
// writes its weights at the end of fit to OUT.worker<rank>), --backend B (process_group_backend),
// --trainers T (T-1 other Trainers fit before the one whose result is written), --throw-rank R
// --throw-step S (that rank's training_step throws at step S), --after-fit FILE (main appends
// a line to FILE after the fits: code after fit), --evaluate 1 (after the fits: validate and
// predict, their results written too), --batchnorm 1 (a BatchNorm1d after the first layer; buffers
// are written too), --swa E (StochasticWeightAveraging from 1-based epoch E), --ema DECAY
// (EMAWeightAveraging), --max-time T (the max_time flag) --step-sleep-ms M (each
// training_step sleeps), --accum-schedule "0:1,1:2" (a GradientAccumulationScheduler),
// --on-exception-dir D (an OnExceptionCheckpoint into D), --save-last 1 (a ModelCheckpoint writing last.ckpt only), --tune 1 (before the fits: Tuner::lr_find on
// the loader and scale_batch_size with a CPU budget of --tune-budget bytes; the suggestion and the size
// written too), --comm-hook H (the ddp.comm_hook flag) with --psgd-rank R --psgd-start S --psgd-min-rate X
// --psgd-ef 0|1 --psgd-warm 0|1 --psgd-eps E (its PowerSGD settings), --custom-hook 1 (a user's C++ hook
// object that averages in float64 and counts its calls), --check-hook H (the built-in hook H wrapped in a
// user hook that also averages each bucket exactly in float64 and writes the largest error of H's average
// per element, relative to the mean magnitude of the ranks' gradients there, and per bucket in the
// Euclidean norm; --drop-hook-state 1: it ignores
// the hook state a checkpoint holds). --stream W: train (and validate) on the data as a stream
// (ShardedDataset, W loader workers, sample ids as a third tensor); each rank writes the ids it
// trained on in the order it did (stream_ids) and how many (stream_samples); --stream-skew 1: the training
// stream's shards differ in size between the ranks (SkewedStream). --fsdp-sharding S, --wrap P and
// --state-dict-type T: the fsdp.* flags; --wrapped N: fc1, N more hidden layers and fc2 are volt::Sharded units (with --strategy fsdp); --optimizer sgd|adam|lbfgs|adamw|rmsprop|adagrad|momentum (the
// last four with a StepLR stepping every optimizer step); --clip V: gradient_clip_val (by norm); --oversubscribe 1:
// allow_cpu_oversubscription (more ranks than cores).
#include <signal.h>
#include <unistd.h>

#include <ATen/ops/arange.h>
#include <ATen/ops/randn.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/lbfgs.h>
#include <torch/optim/sgd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>

#include "volt/callbacks/callback.h"
#include "volt/callbacks/ema_weight_averaging.h"
#include "volt/callbacks/gradient_accumulation_scheduler.h"
#include "volt/callbacks/model_checkpoint.h"
#include "volt/strategies/fsdp_strategy.h"
#include "volt/connectors/signal_connector.h"
#include "volt/callbacks/on_exception_checkpoint.h"
#include "volt/callbacks/stochastic_weight_averaging.h"
#include "volt/core/error.h"
#include "volt/strategies/comm_hooks.h"
#include "volt/strategies/ddp_strategy.h"

#include <ATen/ops/abs.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/where.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include "volt/core/module.h"
#include "volt/core/sharded_unit.h"
#include "volt/data/dataloader.h"
#include "volt/data/dataset.h"
#include "volt/data/iterable_dataset.h"
#include "volt/trainer/trainer.h"
#include "volt/tuner/tuner.h"

namespace {

std::map<std::string, std::string> g_args;

std::string arg(const std::string& key, const std::string& fallback) {
  auto it = g_args.find(key);
  return it == g_args.end() ? fallback : it->second;
}
int64_t arg_int(const std::string& key, int64_t fallback) {
  auto it = g_args.find(key);
  return it == g_args.end() ? fallback : std::stoll(it->second);
}
/// This process's rank as its launcher set it: RANK (torchrun, Volt's launcher) or SLURM_PROCID.
int64_t rank_from_env() {
  for (const char* name : {"RANK", "SLURM_PROCID"}) {
    if (const char* v = std::getenv(name)) return std::stoll(v);
  }
  return 0;
}

class TinyMLP : public volt::Module {
 public:
  TinyMLP() {
    torch::manual_seed(1234);
    const int64_t wrapped = arg_int("wrapped", -1);
    if (wrapped < 0) {
      fc1 = register_module("fc1", torch::nn::Linear(8, 16));
    } else {
      wfc1 = register_module("fc1", volt::Sharded<torch::nn::LinearImpl>(8, 16));
    }
    if (g_args.count("batchnorm")) bn = register_module("bn", torch::nn::BatchNorm1d(16));
    for (int64_t i = 0; i < wrapped; ++i) {
      mids.push_back(register_module("mid" + std::to_string(i), volt::Sharded<torch::nn::LinearImpl>(16, 16)));
    }
    if (wrapped < 0) {
      fc2 = register_module("fc2", torch::nn::Linear(16, 1));
    } else {
      wfc2 = register_module("fc2", volt::Sharded<torch::nn::LinearImpl>(16, 1));
    }
  }
  at::Tensor hidden(const at::Tensor& x) {
    at::Tensor h = fc1 ? fc1->forward(x) : wfc1(x);
    h = torch::tanh(bn ? bn->forward(h) : h);
    for (auto& m : mids) h = torch::tanh(m(h));
    return h;
  }
  at::Tensor head(const at::Tensor& h) { return fc2 ? fc2->forward(h) : wfc2(h); }
  at::Tensor training_step(volt::Batch& batch, volt::StepContext& ctx) override {
    const int64_t die_rank = arg_int("die-rank", -1);
    const int64_t rank = rank_from_env();
    if (die_rank >= 0 && rank == die_rank && steps_ == arg_int("die-step", 3)) {
      std::cerr << "rank " << rank << ": about to die at step " << steps_ << " (test)" << std::endl;
      ::raise(SIGKILL);
    }
    if (rank == arg_int("throw-rank", -1) && steps_ == arg_int("throw-step", 3)) {
      throw std::runtime_error("rank " + std::to_string(rank) + ": training_step threw at step " +
                               std::to_string(steps_) + " (test)");
    }
    if (rank == arg_int("stall-rank-in-step", -1) && steps_ == 2) {
      // In the job, then silent: the others block in the gradient allreduce.
      std::this_thread::sleep_for(std::chrono::seconds(arg_int("stall-seconds", 60)));
    }
    if (rank == 0 && steps_ == arg_int("interrupt-step", -1)) {
      // As a scheduler would: SIGTERM to rank 0, which passes it on to the other ranks.
      ::kill(::getpid(), SIGTERM);
    }
    if (rank == arg_int("signal-rank", -1) && steps_ == arg_int("signal-step", 5)) {
      // As Slurm's scancel --signal does: each task gets its own copy, this one first.
      ::kill(::getpid(), volt::connectors::SignalConnector::parse_signal(arg("signal", "SIGUSR1"), "--signal"));
    }
    if (g_args.count("step-sleep-ms")) {
      std::this_thread::sleep_for(std::chrono::milliseconds(arg_int("step-sleep-ms", 0)));
    }
    ++steps_;
    at::Tensor out = head(hidden(batch[0]));
    at::Tensor loss = torch::nn::functional::mse_loss(out.to(at::kFloat), batch[1].to(at::kFloat));
    if (g_args.count("sync-log")) ctx.log("rank_value", static_cast<double>(rank), {.sync_dist = true});
    return loss;
  }
  void validation_step(volt::Batch& batch, volt::StepContext& ctx) override {
    at::Tensor out = head(hidden(batch[0]));
    ctx.log("val_loss", torch::nn::functional::mse_loss(out, batch[1]), {.sync_dist = true});
  }
  at::Tensor predict_step(volt::Batch& batch, volt::StepContext&) override { return head(hidden(batch[0])); }
  volt::OptimizerConfig configure_optimizers() override {
    const std::string name = arg("optimizer", "sgd");
    std::shared_ptr<torch::optim::Optimizer> opt;
    if (name == "adamw") opt = std::make_shared<torch::optim::AdamW>(parameters(), torch::optim::AdamWOptions(0.01));
    if (name == "rmsprop") {
      opt = std::make_shared<torch::optim::RMSprop>(parameters(), torch::optim::RMSpropOptions(0.005).momentum(0.5));
    }
    if (name == "adagrad") opt = std::make_shared<torch::optim::Adagrad>(parameters(), torch::optim::AdagradOptions(0.05));
    if (name == "momentum") {
      opt = std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.05).momentum(0.9).nesterov(true));
    }
    if (opt) {
      // With a StepLR halving the rate every 5 steps.
      volt::LRSchedulerConfig sched;
      sched.scheduler = std::make_shared<volt::StepLR>(*opt, 5, 0.5);
      sched.interval = volt::Interval::kStep;
      return volt::OptimizerConfig(opt, sched);
    }
    if (name == "adam") {
      return volt::OptimizerConfig(std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(0.01)));
    }
    if (name == "lbfgs") {
      return volt::OptimizerConfig(std::make_shared<torch::optim::LBFGS>(parameters(), torch::optim::LBFGSOptions(0.1)));
    }
    return volt::OptimizerConfig(std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.05)));
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  // --wrapped N: fc1, N hidden Linear(16, 16) layers (each followed by tanh) and fc2, each a volt::Sharded unit.
  volt::Sharded<torch::nn::LinearImpl> wfc1{nullptr}, wfc2{nullptr};
  std::vector<volt::Sharded<torch::nn::LinearImpl>> mids;
  torch::nn::BatchNorm1d bn{nullptr};
  int64_t steps_ = 0;
};

/// Records the sample ids (the third tensor) of every training batch (--stream).
class StreamIds : public volt::callbacks::Callback {
 public:
  explicit StreamIds(std::shared_ptr<std::vector<int64_t>> ids) : ids_(std::move(ids)) {}
  std::string state_key() const override { return "StreamIds"; }
  void on_train_batch_end(volt::TrainerView&, const at::Tensor&, const volt::Batch& batch, int64_t) override {
    at::Tensor t = batch.at(2).contiguous();
    ids_->insert(ids_->end(), t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
  }

 private:
  std::shared_ptr<std::vector<int64_t>> ids_;
};

/// --stream-skew 1 (with --stream 3 --samples 48 on 2 ranks): a stream whose readers hold shards of
/// different sizes, rank 0's workers 8, 8 and 8 samples, rank 1's 4, 10 and 10 (ids 0..47, each once).
/// Rank 1's first worker runs out after one batch of 4, so from the fourth batch on the two ranks'
/// stream positions differ: a resume must give each rank its own.
class SkewedStream : public volt::data::IterableDataset {
 public:
  explicit SkewedStream(std::shared_ptr<const volt::data::TensorDataset> data) : data_(std::move(data)) {}
  std::unique_ptr<volt::data::ExampleIterator> open(const volt::data::WorkerInfo& info) const override {
    if (info.world_size != 2 || info.num_workers != 3 || data_->size() != 48) {
      throw volt::ConfigError("--stream-skew needs --devices 2, --stream 3 and --samples 48");
    }
    static const int64_t kStart[2][4] = {{0, 8, 16, 24}, {24, 28, 38, 48}};
    const int64_t* s = kStart[info.rank];
    return std::make_unique<Reader>(data_, s[info.worker_id], s[info.worker_id + 1]);
  }

 private:
  class Reader : public volt::data::ExampleIterator {
   public:
    Reader(std::shared_ptr<const volt::data::TensorDataset> data, int64_t begin, int64_t end)
        : data_(std::move(data)), next_(begin), end_(end) {}
    std::optional<volt::Batch> next() override {
      if (next_ >= end_) return std::nullopt;
      return data_->get(next_++);
    }

   private:
    std::shared_ptr<const volt::data::TensorDataset> data_;
    int64_t next_, end_;
  };
  std::shared_ptr<const volt::data::TensorDataset> data_;
};

/// The loader's data as a DataModule whose batch size the batch-size finder may change (--tune).
class TunableData : public volt::data::DataModule {
 public:
  TunableData(std::shared_ptr<const volt::data::Dataset> data, volt::data::DataLoaderOptions options)
      : data_(std::move(data)), options_(options) {}
  std::shared_ptr<volt::data::DataLoader> train_dataloader() override {
    return std::make_shared<volt::data::DataLoader>(data_, options_);
  }
  std::optional<int64_t> batch_size() const override { return options_.batch_size; }
  void set_batch_size(int64_t b) override { options_.batch_size = b; }

 private:
  std::shared_ptr<const volt::data::Dataset> data_;
  volt::data::DataLoaderOptions options_;
};

/// Records, after each backward, how far this rank's gradient is from rank 0's: non-zero
/// inside an accumulation window (no_sync), zero after the synchronising backward.
class GradientAgreement : public volt::callbacks::Callback {
 public:
  explicit GradientAgreement(volt::Trainer*& trainer) : trainer_(trainer) {}
  std::string state_key() const override { return "GradientAgreement"; }
  void on_after_backward(volt::TrainerView& view) override {
    const auto& opt = view.optimizers().front();
    at::Tensor g = opt->param_groups()[0].params()[0].grad().detach().clone();
    auto all = trainer_->strategy().all_gather(g);
    double diff = 0;
    for (const auto& t : all) diff = std::max(diff, (t - all[0]).abs().max().item<double>());
    (micro_ % 2 == 0 ? unsynced : synced) =
        std::max((micro_ % 2 == 0 ? unsynced : synced), diff);
    ++micro_;
  }
  double unsynced = 0, synced = 0;

 private:
  volt::Trainer*& trainer_;
  int64_t micro_ = 0;
};

/// A user's hook: each bucket averaged in float64 (a sum allreduce, then / world size), counted.
class Float64AverageHook : public volt::strategies::CommHook {
 public:
  std::string name() const override { return "float64_average"; }
  c10::intrusive_ptr<c10::ivalue::Future> run_hook(c10d::GradBucket& bucket) override {
    ++calls;
    at::Tensor buffer = bucket.getBufferRef();
    at::Tensor wide = buffer.to(at::kDouble);
    std::vector<at::Tensor> tensors{wide};
    const double n = static_cast<double>(world_size());
    return group()->allreduce(tensors)->getFuture()->then(
        [buffer, wide, n](c10::ivalue::Future&) {
          buffer.copy_(wide.div_(n));
          return c10::IValue(buffer);
        },
        c10::TensorType::get());
  }
  int64_t calls = 0;
};

/// Runs a built-in hook and measures it against the exact average, bucket by bucket: the largest
/// |hook's average - exact average| / (mean of the ranks' |gradient|) over every element and step
/// (elements where every rank's gradient is 0 count as exact when the hook gives 0 there).
class MeasuredHook : public volt::strategies::CommHook {
 public:
  explicit MeasuredHook(std::shared_ptr<volt::strategies::CommHook> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  void setup(const c10::intrusive_ptr<c10d::ProcessGroup>& group, const std::vector<at::Tensor>& params) override {
    CommHook::setup(group, params);
    inner_->setup(group, params);
  }
  std::map<std::string, at::Tensor> state_dict() const override { return inner_->state_dict(); }
  void load_state_dict(const std::map<std::string, at::Tensor>& s) override {
    if (!g_args.count("drop-hook-state")) inner_->load_state_dict(s);
  }
  c10::intrusive_ptr<c10::ivalue::Future> run_hook(c10d::GradBucket& bucket) override {
    at::Tensor local = bucket.getBuffer().to(at::kDouble);
    // One collective over [gradient, |gradient|]: the sum and the sum of magnitudes.
    std::vector<at::Tensor> sums{at::cat({local, local.abs()})};
    group()->allreduce(sums)->wait();
    const double n = static_cast<double>(world_size());
    at::Tensor exact = sums[0].narrow(0, 0, local.numel()) / n;
    at::Tensor magnitude = sums[0].narrow(0, local.numel(), local.numel()) / n;
    auto future = inner_->run_hook(bucket);
    future->wait();
    at::Tensor got = future->value().toTensor().to(at::kDouble);
    at::Tensor err = (got - exact).abs();
    at::Tensor rel = at::where(magnitude > 0, err / magnitude, err * 1e30);
    max_rel = std::max(max_rel, rel.max().item<double>());
    const double norm = exact.norm().item<double>();
    if (norm > 0) max_norm_rel = std::max(max_norm_rel, (got - exact).norm().item<double>() / norm);
    ++calls;
    return future;
  }
  double max_rel = 0;
  /// The largest ||hook's average - exact average|| / ||exact average|| of a bucket (Euclidean norms).
  double max_norm_rel = 0;
  int64_t calls = 0;

 private:
  std::shared_ptr<volt::strategies::CommHook> inner_;
};

void write_params(std::ostream& file, const torch::nn::Module& model) {
  for (const auto& p : model.parameters()) {
    at::Tensor flat = p.detach().to(at::kCPU, at::kFloat).reshape({-1}).contiguous();
    const float* d = flat.data_ptr<float>();
    for (int64_t i = 0; i < flat.numel(); ++i) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%a", static_cast<double>(d[i]));
      file << "p " << buf << "\n";
    }
  }
  for (const auto& b : model.buffers()) {
    if (!b.is_floating_point()) continue;
    at::Tensor flat = b.detach().to(at::kCPU, at::kDouble).reshape({-1}).contiguous();
    for (int64_t i = 0; i < flat.numel(); ++i) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%a", flat.data_ptr<double>()[i]);
      file << "b " << buf << "\n";
    }
  }
}

/// Each rank's weights as fit ends, in the process that trained them (a spawned worker
/// exits before main's own output).
class DumpRanks : public volt::callbacks::Callback {
 public:
  DumpRanks(std::string out, volt::Trainer*& trainer) : out_(std::move(out)), trainer_(trainer) {}
  std::string state_key() const override { return "DumpRanks"; }
  void on_fit_end(volt::TrainerView& view) override {
    std::ofstream file(out_ + ".worker" + std::to_string(trainer_->strategy().global_rank()));
    file << "world_size " << trainer_->strategy().world_size() << "\n";
    file << "device " << view.module().parameters().front().device().str() << "\n";
    write_params(file, view.module());
  }

 private:
  std::string out_;
  volt::Trainer*& trainer_;
};

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string key = argv[i];
    if (key.rfind("--", 0) != 0) {
      std::cerr << "usage: volt_dist_program --key value ...\n";
      return 2;
    }
    g_args[key.substr(2)] = argv[i + 1];
  }
  const int64_t rank_env = std::stoll(std::getenv("RANK") ? std::getenv("RANK") : "0");
  if (g_args.count("stall-rank") && rank_env == arg_int("stall-rank", -1)) {
    // Alive but never joining: the others must give up at the timeout.
    std::this_thread::sleep_for(std::chrono::seconds(arg_int("stall-seconds", 60)));
    return 0;
  }
  const int64_t batch = arg_int("batch", 8);
  const int64_t n = arg_int("samples", 640);
  torch::manual_seed(7);
  at::Tensor x = at::randn({n, 8});
  at::Tensor w = at::randn({8, 1});
  at::Tensor y = x.matmul(w) + 0.1 * at::randn({n, 1});
  auto dataset = std::make_shared<volt::data::TensorDataset>(std::vector<at::Tensor>{x, y});
  volt::data::DataLoaderOptions lo;
  lo.batch_size = batch;
  lo.shuffle = g_args.count("shuffle") != 0;
  lo.seed = 3;
  auto loader = std::make_shared<volt::data::DataLoader>(dataset, lo);
  std::shared_ptr<volt::data::DataLoader> val_loader;
  auto stream_ids = std::make_shared<std::vector<int64_t>>();
  if (g_args.count("stream")) {
    auto with_ids = std::make_shared<volt::data::TensorDataset>(std::vector<at::Tensor>{x, y, at::arange(n, at::kLong)});
    std::shared_ptr<volt::data::IterableDataset> stream = std::make_shared<volt::data::ShardedDataset>(with_ids);
    volt::data::DataLoaderOptions so;
    so.batch_size = batch;
    so.num_workers = arg_int("stream", 3);
    if (g_args.count("stream-skew")) {
      loader = std::make_shared<volt::data::DataLoader>(std::make_shared<SkewedStream>(with_ids), so);
    } else {
      loader = std::make_shared<volt::data::DataLoader>(stream, so);
    }
    val_loader = std::make_shared<volt::data::DataLoader>(stream, so);
  }

  volt::TrainerOptions o;
  o.accelerator = arg("accelerator", "cpu");
  o.strategy = arg("strategy", "ddp");
  o.devices = arg("devices", "2");
  o.num_nodes = arg_int("nodes", 1);
  o.num_threads = 1;
  o.precision = arg("precision", "32-true");
  o.process_group_backend = arg("backend", "auto");
  o.max_steps = arg_int("steps", 20);
  o.max_epochs = arg_int("epochs", -1);
  o.accumulate_grad_batches = arg_int("accumulate", 1);
  o.enable_progress_bar = false;
  o.enable_model_summary = false;
  o.enable_checkpointing = g_args.count("checkpoint") != 0;
  o.logger = g_args.count("logger") != 0;
  o.default_root_dir = arg("root", "/tmp/volt_dist_program");
  o.num_sanity_val_steps = 0;
  o.process_group_timeout_s = static_cast<double>(arg_int("timeout", 60));
  o.rendezvous_timeout_s = static_cast<double>(arg_int("rendezvous-timeout", 60));
  if (g_args.count("bucket-mb")) o.ddp_bucket_cap_mb = std::stod(arg("bucket-mb", "25"));
  o.max_time = arg("max-time", "");
  o.ddp_comm_hook = arg("comm-hook", "");
  if (g_args.count("requeue-command")) o.slurm_requeue_command = arg("requeue-command", "");
  o.allow_cpu_oversubscription = arg_int("oversubscribe", 0) != 0;
  o.fsdp_sharding_strategy = arg("fsdp-sharding", "FULL_SHARD");
  o.fsdp_auto_wrap_policy = arg("wrap", "");
  o.fsdp_state_dict_type = arg("state-dict-type", "full");
  o.fsdp_cpu_offload = arg_int("cpu-offload", 0) != 0;
  if (g_args.count("clip")) o.gradient_clip_val = std::stod(arg("clip", "0"));
  o.ddp_powersgd_matrix_approximation_rank = arg_int("psgd-rank", 1);
  o.ddp_powersgd_start_powerSGD_iter = arg_int("psgd-start", 1000);
  o.ddp_powersgd_min_compression_rate = std::stod(arg("psgd-min-rate", "2"));
  o.ddp_powersgd_use_error_feedback = arg_int("psgd-ef", 1) != 0;
  o.ddp_powersgd_warm_start = arg_int("psgd-warm", 1) != 0;
  o.ddp_powersgd_orthogonalization_epsilon = std::stod(arg("psgd-eps", "0"));
  std::shared_ptr<Float64AverageHook> custom_hook;
  std::shared_ptr<MeasuredHook> measured_hook;
  volt::TrainerPlugins plugins;
  if (g_args.count("custom-hook") || g_args.count("check-hook")) {
    volt::strategies::DDPOptions ddp;
    ddp.timeout = std::chrono::seconds(arg_int("timeout", 60));
    ddp.rendezvous_timeout = std::chrono::seconds(arg_int("rendezvous-timeout", 60));
    if (g_args.count("custom-hook")) {
      ddp.comm_hook_object = custom_hook = std::make_shared<Float64AverageHook>();
    } else {
      volt::strategies::PowerSGDOptions p;
      p.matrix_approximation_rank = o.ddp_powersgd_matrix_approximation_rank;
      p.start_powerSGD_iter = o.ddp_powersgd_start_powerSGD_iter;
      p.min_compression_rate = o.ddp_powersgd_min_compression_rate;
      p.use_error_feedback = o.ddp_powersgd_use_error_feedback;
      p.warm_start = o.ddp_powersgd_warm_start;
      p.orthogonalization_epsilon = o.ddp_powersgd_orthogonalization_epsilon;
      ddp.comm_hook_object = measured_hook =
          std::make_shared<MeasuredHook>(volt::strategies::make_comm_hook(arg("check-hook", ""), p));
    }
    plugins.strategy = std::make_shared<volt::strategies::DDPStrategy>(ddp, o.strategy);
    o.strategy = "auto";
  }
  if (g_args.count("fsdp-object")) {
    // Lightning's FSDPStrategy(...) object: also on one process (devices 1), where strategy="fsdp" is refused.
    volt::strategies::FSDPOptions f;
    f.sharding_strategy = volt::strategies::parse_sharding_strategy(o.fsdp_sharding_strategy);
    f.auto_wrap_policy = o.fsdp_auto_wrap_policy;
    f.state_dict_type = o.fsdp_state_dict_type;
    f.cpu_offload = o.fsdp_cpu_offload;
    volt::strategies::DDPOptions ddp;
    ddp.timeout = std::chrono::seconds(arg_int("timeout", 60));
    plugins.strategy = std::make_shared<volt::strategies::FSDPStrategy>(f, ddp);
    o.strategy = "auto";
  }
  const std::string out = arg("out", "/tmp/volt_dist_program.out");
  try {
    volt::Trainer* self = nullptr;
    auto agreement = std::make_shared<GradientAgreement>(self);
    std::vector<std::shared_ptr<volt::callbacks::Callback>> callbacks;
    if (g_args.count("check-no-sync")) callbacks.push_back(agreement);
    if (g_args.count("stream")) callbacks.push_back(std::make_shared<StreamIds>(stream_ids));
    if (g_args.count("dump-ranks")) callbacks.push_back(std::make_shared<DumpRanks>(out, self));
    if (g_args.count("swa")) {
      volt::callbacks::StochasticWeightAveraging::Options swa;
      swa.swa_lrs = {0.02};
      swa.swa_epoch_start = arg_int("swa", 2);
      swa.annealing_epochs = 1;
      callbacks.push_back(std::make_shared<volt::callbacks::StochasticWeightAveraging>(swa));
    }
    if (g_args.count("ema")) {
      volt::callbacks::EMAWeightAveraging::Options ema;
      ema.decay = std::stod(arg("ema", "0.9"));
      callbacks.push_back(std::make_shared<volt::callbacks::EMAWeightAveraging>(ema));
    }
    if (g_args.count("accum-schedule")) {
      std::map<int64_t, int64_t> plan;
      std::string spec = arg("accum-schedule", "") + ",";
      for (size_t at = 0, comma; (comma = spec.find(',', at)) != std::string::npos; at = comma + 1) {
        const std::string pair = spec.substr(at, comma - at);
        plan[std::stoll(pair.substr(0, pair.find(':')))] = std::stoll(pair.substr(pair.find(':') + 1));
      }
      callbacks.push_back(std::make_shared<volt::callbacks::GradientAccumulationScheduler>(plan));
    }
    if (g_args.count("save-last")) {  // a ModelCheckpoint keeping only last.ckpt (fit(ckpt_path="last"))
      volt::callbacks::ModelCheckpoint::Options mc;
      mc.save_top_k = 0;
      mc.save_last = true;
      callbacks.push_back(std::make_shared<volt::callbacks::ModelCheckpoint>(mc));
    }
    if (g_args.count("on-exception-dir")) {
      callbacks.push_back(std::make_shared<volt::callbacks::OnExceptionCheckpoint>(arg("on-exception-dir", "")));
    }
    for (int64_t t = 1; t < arg_int("trainers", 1); ++t) {
      // Earlier Trainers of the same program: each joins the job as a process group of its own.
      volt::Trainer earlier(o);
      TinyMLP warmup;
      earlier.fit(warmup, loader);
    }
    auto owned = plugins.strategy ? std::make_unique<volt::Trainer>(o, plugins, callbacks)
                                  : std::make_unique<volt::Trainer>(o, callbacks);
    volt::Trainer& trainer = *owned;
    self = &trainer;
    TinyMLP model;
    std::string tuned;
    if (g_args.count("tune")) {
      volt::tuner::LRFindOptions f;
      f.min_lr = 1e-4;
      f.num_training = 30;
      const auto found = volt::Tuner(trainer).lr_find(model, loader, f);
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%a", found.suggestion().value_or(-1.0));
      tuned += std::string("lr_suggestion ") + buf + "\nlr_steps " + std::to_string(found.lrs().size()) + "\n";
      TunableData data(dataset, lo);
      volt::tuner::ScaleBatchSizeOptions s;
      s.mode = "binsearch";
      s.steps_per_trial = 2;
      s.max_trials = 8;
      s.memory_budget_bytes = arg_int("tune-budget", 60000);
      tuned += "tuned_batch " + std::to_string(volt::Tuner(trainer).scale_batch_size(model, data, s)) + "\n";
    }
    const int64_t fits = arg_int("fits", 1);
    for (int64_t f = 0; f < fits; ++f) {
      // A later fit continues where the one before ended, for `steps` more steps.
      if (f > 0) trainer.set_max_steps(trainer.options().max_steps + arg_int("steps", 20));
      trainer.fit(model, loader, val_loader, f == 0 ? arg("ckpt", "") : std::string());
    }
    if (g_args.count("late-signal") && trainer.strategy().global_rank() != arg_int("signal-rank", -1)) {
      // The other ranks' copies of --signal arrive after their fit stopped (it must not kill them).
      ::kill(::getpid(), volt::connectors::SignalConnector::parse_signal(arg("signal", "SIGUSR1"), "--signal"));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (g_args.count("after-fit")) {
      std::ofstream(arg("after-fit", ""), std::ios::app) << "after fit in pid " << ::getpid() << "\n";
    }
    volt::MetricMap validated;
    std::vector<at::Tensor> predictions;
    if (g_args.count("evaluate")) {
      // Loaders of their own: the train loader carries the sampler fit gave it.
      validated = trainer.validate(model, std::make_shared<volt::data::DataLoader>(dataset, lo));
      predictions = trainer.predict(model, std::make_shared<volt::data::DataLoader>(dataset, lo));
    }
    const int64_t rank = trainer.strategy().global_rank();
    std::ofstream file(out + ".rank" + std::to_string(rank));
    for (const auto& [k, v] : validated) file << "validated_" << k << " " << v << "\n";
    if (g_args.count("evaluate")) {
      double sum = 0;
      int64_t rows = 0;
      for (const auto& t : predictions) {
        sum += t.sum().item<double>();
        rows += t.size(0);
      }
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%a", sum);
      file << "predicted_rows " << rows << "\npredicted_sum " << buf << "\n";
    }
    file << "world_size " << trainer.strategy().world_size() << "\n";
    file << "global_step " << trainer.global_step() << "\n";
    file << "epoch " << trainer.current_epoch() << "\n";
    for (const auto& [k, v] : trainer.callback_metrics()) file << "metric " << k << " " << v << "\n";
    if (g_args.count("check-no-sync")) {
      file << "unsynced_grad_diff " << agreement->unsynced << "\n";
      file << "synced_grad_diff " << agreement->synced << "\n";
    }
    file << tuned;
    if (g_args.count("stream")) {
      file << "stream_samples " << stream_ids->size() << "\nstream_ids ";
      for (size_t i = 0; i < stream_ids->size(); ++i) file << (i ? "," : "") << (*stream_ids)[i];
      file << "\n";
    }
    if (g_args.count("check-start-reduce")) {
      // Reductions started and read later (the signal vote's way), with a blocking collective
      // between them, as a step's gradient allreduce runs while the vote is in flight.
      using volt::strategies::ReduceOp;
      auto& s = trainer.strategy();
      const double mine = static_cast<double>(rank + 1);
      auto sum = s.start_reduce(mine, ReduceOp::kSum);
      auto max = s.start_reduce(mine, ReduceOp::kMax);
      const double min = s.reduce(mine, ReduceOp::kMin);
      auto mean = s.start_reduce(mine, ReduceOp::kMean);
      file << "start_reduce_mean " << mean->get() << "\nstart_reduce_max " << max->get() << "\nstart_reduce_sum "
           << sum->get() << "\nreduce_min_between " << min << "\n";
      s.start_reduce(mine, ReduceOp::kSum);  // dropped unread: the next collectives still match
      file << "reduce_after_dropped " << s.reduce(mine, ReduceOp::kSum) << "\n";
    }
    if (custom_hook) file << "custom_hook_calls " << custom_hook->calls << "\n";
    if (const auto* fsdp = dynamic_cast<const volt::strategies::FSDPStrategy*>(&trainer.strategy())) {
      file << "fsdp_reduce_scatters_in_backward " << fsdp->reduce_scatters_started_in_backward() << "\n";
      const auto& c = fsdp->wrapped_unit_counts();
      file << "fsdp_gathered_before_forward " << c.gathered_before_forward << "\nfsdp_freed_after_forward "
           << c.freed_after_forward << "\nfsdp_gathered_before_backward " << c.gathered_before_backward
           << "\nfsdp_freed_after_backward " << c.freed_after_backward << "\nfsdp_peak_whole_elements "
           << c.peak_whole_elements << "\n";
    }
    if (measured_hook) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.17g", measured_hook->max_rel);
      file << "hook_max_rel_err " << buf << "\nhook_calls " << measured_hook->calls << "\n";
      std::snprintf(buf, sizeof(buf), "%.17g", measured_hook->max_norm_rel);
      file << "hook_max_norm_err " << buf << "\n";
    }
    write_params(file, model);
  } catch (const volt::DistributedError& e) {
    std::cerr << "volt_dist_program: DistributedError: " << e.what() << std::endl;
    return 3;
  } catch (const volt::Error& e) {
    std::cerr << "volt_dist_program: " << e.what() << std::endl;
    return 3;
  }
  return 0;
}
