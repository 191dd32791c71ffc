// A one-file Volt project: a two-layer regression model on synthetic data (y = x.w + noise).
// Replace the model and the data with your own; every training option stays in config.yaml.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ops/mse_loss.h>
#include <ATen/ops/randn.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "volt/volt.h"

// The options config.yaml holds besides the trainer's, and the optimizer and callbacks they choose
// (the other templates keep these in src/project_options.h).
namespace project {

/// Declares model.lr, model.optimizer, data.batch_size, checkpoint.* and early_stopping.*.
inline void add_common_options(volt::cli::Cli& cli) {
  cli.add_option("model.lr", 1e-3, "learning rate")
      .add_option("model.optimizer", "adam", "adam, adamw or sgd (momentum 0.9)")
      .add_option("data.batch_size", int64_t{64}, "training samples per batch per process")
      .add_option("checkpoint.monitor", "val_loss", "metric ranking checkpoints; empty: keep the latest")
      .add_option("checkpoint.save_last", true, "keep last.ckpt, to resume from")
      .add_option("checkpoint.save_top_k", int64_t{1}, "best checkpoints to keep (-1: all)")
      .add_option("checkpoint.every_n_train_steps", int64_t{0}, "also save every N optimizer steps; 0: off")
      .add_option("early_stopping.enabled", false, "stop when val_loss stops improving")
      .add_option("early_stopping.patience", int64_t{3}, "validations without improvement before stopping")
      .add_option("fit.ckpt_path", "", "resume from this checkpoint (a path, \"last\" or \"best\")");
}

/// The optimizer named by model.optimizer over `parameters`.
inline std::shared_ptr<torch::optim::Optimizer> make_optimizer(const std::string& name,
                                                               std::vector<at::Tensor> parameters, double lr) {
  if (name == "adam") return std::make_shared<torch::optim::Adam>(parameters, torch::optim::AdamOptions(lr));
  if (name == "adamw") return std::make_shared<torch::optim::AdamW>(parameters, torch::optim::AdamWOptions(lr));
  if (name == "sgd") {
    return std::make_shared<torch::optim::SGD>(parameters, torch::optim::SGDOptions(lr).momentum(0.9));
  }
  throw volt::ConfigError("model.optimizer='" + name + "' is not known; use adam, adamw or sgd.");
}

/// Checkpointing and early stopping as config.yaml asks; turns checkpointing off in `options`
/// when nothing is to be saved.
inline std::vector<std::shared_ptr<volt::callbacks::Callback>> make_callbacks(const volt::cli::Cli& cli,
                                                                              volt::TrainerOptions& options) {
  std::vector<std::shared_ptr<volt::callbacks::Callback>> callbacks;
  volt::callbacks::ModelCheckpoint::Options ckpt;
  ckpt.monitor = cli.get_string("checkpoint.monitor");
  ckpt.save_last = cli.get_bool("checkpoint.save_last");
  ckpt.every_n_train_steps = cli.get_int("checkpoint.every_n_train_steps");
  ckpt.save_top_k = ckpt.monitor.empty() && ckpt.every_n_train_steps == 0 ? 0 : cli.get_int("checkpoint.save_top_k");
  if (!ckpt.monitor.empty()) ckpt.filename = "{epoch}-{" + ckpt.monitor + ":.4f}";
  if (ckpt.monitor.empty() && !ckpt.save_last && ckpt.every_n_train_steps == 0) {
    options.enable_checkpointing = false;
  } else if (options.enable_checkpointing) {
    callbacks.push_back(std::make_shared<volt::callbacks::ModelCheckpoint>(ckpt));
  }
  if (cli.get_bool("early_stopping.enabled")) {
    volt::callbacks::EarlyStopping::Options stop;
    stop.monitor = "val_loss";
    stop.patience = cli.get_int("early_stopping.patience");
    callbacks.push_back(std::make_shared<volt::callbacks::EarlyStopping>(stop));
  }
  return callbacks;
}

/// The program's name for --help: the file name it was started as.
inline std::string program_name(const char* argv0) {
  const std::string s = argv0;
  const auto slash = s.rfind('/');
  return slash == std::string::npos ? s : s.substr(slash + 1);
}

}  // namespace project

namespace {

class Regressor : public volt::Module {
 public:
  Regressor(int64_t features, double lr, std::string optimizer) : lr_(lr), optimizer_(std::move(optimizer)) {
    fc1_ = register_module("fc1", torch::nn::Linear(features, 32));
    fc2_ = register_module("fc2", torch::nn::Linear(32, 1));
  }

  at::Tensor forward(const at::Tensor& x) { return fc2_->forward(torch::nn::functional::relu(fc1_->forward(x))); }

  at::Tensor training_step(volt::Batch& batch, volt::StepContext& ctx) override {
    auto loss = at::mse_loss(forward(batch[0]), batch[1]);
    ctx.log("train_loss", loss, {.prog_bar = true});
    return loss;
  }

  void validation_step(volt::Batch& batch, volt::StepContext& ctx) override {
    ctx.log("val_loss", at::mse_loss(forward(batch[0]), batch[1]), {.prog_bar = true});
  }

  volt::OptimizerConfig configure_optimizers() override {
    return project::make_optimizer(optimizer_, parameters(), lr_);
  }

 private:
  double lr_;
  std::string optimizer_;
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
};

/// Synthetic data, fixed by the seed: 7/8 for training, 1/8 for validation.
class SyntheticData : public volt::data::DataModule {
 public:
  SyntheticData(int64_t samples, int64_t features, int64_t batch_size, uint64_t seed)
      : samples_(samples), features_(features), batch_size_(batch_size), seed_(seed) {}

  void setup(volt::Stage) override {
    if (train_) return;
    auto x = at::randn({samples_, features_});
    auto w = at::randn({features_, 1});
    auto y = x.matmul(w) + 0.1 * at::randn({samples_, 1});
    auto full = std::make_shared<volt::data::TensorDataset>(std::vector<at::Tensor>{x, y});
    const int64_t val = std::max<int64_t>(1, samples_ / 8);
    auto parts = volt::data::random_split(full, {samples_ - val, val}, seed_);
    train_ = parts[0];
    val_ = parts[1];
  }

  std::shared_ptr<volt::data::DataLoader> train_dataloader() override { return loader(train_, true); }
  std::shared_ptr<volt::data::DataLoader> val_dataloader() override { return loader(val_, false); }

 private:
  std::shared_ptr<volt::data::DataLoader> loader(std::shared_ptr<const volt::data::Dataset> ds, bool train) const {
    volt::data::DataLoaderOptions o;
    o.batch_size = batch_size_;
    o.shuffle = train;
    o.seed = seed_;
    return std::make_shared<volt::data::DataLoader>(std::move(ds), o);
  }

  int64_t samples_, features_, batch_size_;
  uint64_t seed_;
  std::shared_ptr<const volt::data::Dataset> train_, val_;
};

}  // namespace

int main(int argc, char** argv) {
  const std::string name = project::program_name(argv[0]);
  try {
    volt::cli::Cli cli(name, "A minimal Volt project: regression on synthetic data.");
    project::add_common_options(cli);
    cli.add_option("data.samples", int64_t{2048}, "synthetic examples").add_option("data.features", int64_t{16},
                                                                                    "input features");
    if (!cli.parse(argc, argv)) return 0;
    volt::TrainerOptions options = cli.trainer_options();
    auto callbacks = project::make_callbacks(cli, options);
    volt::Trainer trainer(options, callbacks);  // seeds before the data and the model are made
    if (trainer.plan().global_rank == 0) std::cout << trainer.plan().describe();  // once, not per process
    Regressor model(cli.get_int("data.features"), cli.get_double("model.lr"), cli.get_string("model.optimizer"));
    SyntheticData data(cli.get_int("data.samples"), cli.get_int("data.features"), cli.get_int("data.batch_size"),
                       options.seed.value_or(0));
    trainer.fit(model, data, cli.get_string("fit.ckpt_path"));
    if (trainer.state().interrupted_by != 0) return 128 + trainer.state().interrupted_by;
    return 0;
  } catch (const volt::Error& e) {
    std::cerr << name << ": " << e.what() << "\n";
    return 2;
  }
}
