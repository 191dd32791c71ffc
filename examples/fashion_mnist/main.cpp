// Fashion-MNIST with Volt: a small CNN, train/val/test splits, checkpoints, early
// stopping, CSV metrics and a progress bar. Every Trainer flag is a command-line flag:
//   fashion_mnist --trainer.max_epochs 5 --model.lr 0.002 --config run.yaml --print-config
//   fashion_mnist --tuner.lr_find true    (the learning-rate finder's suggestion instead of --model.lr)
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>

#include <ATen/ops/cross_entropy_loss.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>
#include <torch/nn/functional/activation.h>
#include <torch/optim/adam.h>

#include "volt/volt.h"

namespace {

/// conv(32) -> pool -> conv(64) -> pool -> fc(128) -> fc(10), ReLU between.
class FashionCnn : public volt::Module {
 public:
  FashionCnn(double lr, double dropout) : lr_(lr) {
    conv1_ = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3).padding(1)));
    conv2_ = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).padding(1)));
    pool_ = register_module("pool", torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(2)));
    fc1_ = register_module("fc1", torch::nn::Linear(64 * 7 * 7, 128));
    drop_ = register_module("dropout", torch::nn::Dropout(dropout));
    fc2_ = register_module("fc2", torch::nn::Linear(128, 10));
    save_hyperparameters({{"lr", std::to_string(lr)}, {"dropout", std::to_string(dropout)}});
  }

  at::Tensor forward(const at::Tensor& x) {
    namespace F = torch::nn::functional;
    auto h = pool_->forward(F::relu(conv1_->forward(x)));
    h = pool_->forward(F::relu(conv2_->forward(h)));
    h = drop_->forward(F::relu(fc1_->forward(h.flatten(1))));
    return fc2_->forward(h);
  }

  at::Tensor training_step(volt::Batch& batch, volt::StepContext& ctx) override {
    auto loss = at::cross_entropy_loss(forward(batch[0]), batch[1]);
    ctx.log("train_loss", loss, {.prog_bar = true});
    return loss;
  }

  void validation_step(volt::Batch& batch, volt::StepContext& ctx) override { evaluate(batch, ctx, "val"); }
  void test_step(volt::Batch& batch, volt::StepContext& ctx) override { evaluate(batch, ctx, "test"); }
  at::Tensor predict_step(volt::Batch& batch, volt::StepContext&) override { return forward(batch[0]).argmax(1); }

  /// The learning rate configure_optimizers uses (the tuner's suggestion with --tuner.lr_find true).
  void set_lr(double lr) { lr_ = lr; }

  volt::OptimizerConfig configure_optimizers() override {
    auto adam = std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(lr_));
    return {adam, volt::LRSchedulerConfig{std::make_shared<volt::StepLR>(*adam, 2, 0.5)}};
  }

 private:
  void evaluate(volt::Batch& batch, volt::StepContext& ctx, const std::string& stage) {
    auto logits = forward(batch[0]);
    auto loss = at::cross_entropy_loss(logits, batch[1]);
    auto acc = logits.argmax(1).eq(batch[1]).to(at::kFloat).mean();
    ctx.log(stage + "_loss", loss, {.prog_bar = stage == "val", .sync_dist = true});
    ctx.log(stage + "_acc", acc, {.prog_bar = true, .sync_dist = true});
  }

  double lr_;
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  torch::nn::MaxPool2d pool_{nullptr};
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
  torch::nn::Dropout drop_{nullptr};
};

/// FNV-1a over the bytes of every parameter and buffer, in registration order: equal
/// digests on two ranks mean bitwise-equal weights (tests/launchers compare them).
std::string weights_digest(const torch::nn::Module& module) {
  uint64_t h = 14695981039346656037ull;
  auto add = [&h](const at::Tensor& t) {
    const at::Tensor c = t.detach().cpu().contiguous();
    const auto* bytes = static_cast<const unsigned char*>(c.data_ptr());
    for (size_t i = 0; i < c.nbytes(); ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  };
  for (const auto& p : module.parameters()) add(p);
  for (const auto& b : module.buffers()) add(b);
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(h));
  return text;
}

std::string text(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

/// model.lr: a finite learning rate in (0, 10].
double learning_rate(const volt::cli::Cli& cli) {
  const double lr = cli.get_double("model.lr");
  if (!std::isfinite(lr) || lr <= 0.0 || lr > 10.0) {
    throw volt::ConfigError("model.lr=" + text(lr) +
                            " is not a usable learning rate. Give a finite number in (0, 10], e.g. 0.001.");
  }
  return lr;
}

/// model.dropout: a probability in [0, 1).
double dropout(const volt::cli::Cli& cli) {
  const double p = cli.get_double("model.dropout");
  if (!std::isfinite(p) || p < 0.0 || p >= 1.0) {
    throw volt::ConfigError("model.dropout=" + text(p) +
                            " is not a dropout probability. Give a number in [0, 1), e.g. 0.25 (0: no dropout).");
  }
  return p;
}

int64_t patience(const volt::cli::Cli& cli) {
  const int64_t n = cli.get_int("early_stopping.patience");
  if (n < 0) {
    throw volt::ConfigError("early_stopping.patience=" + std::to_string(n) +
                            " is negative. Give the number of validations without improvement to wait, e.g. 3.");
  }
  return n;
}

int run(int argc, char** argv) {
  {
    volt::TrainerOptions defaults;
    defaults.max_epochs = 3;
    defaults.seed = 42;
    volt::cli::Cli cli("fashion_mnist", "Train a small CNN on Fashion-MNIST with Volt.", defaults);
    cli.add_option("model.lr", 1e-3, "Adam learning rate (halved every 2 epochs)")
        .add_option("model.dropout", 0.25, "dropout before the classifier")
        .add_option("data.dir", std::string(volt::data::kFashionMnistDir), "folder with the IDX files (.gz or not)")
        .add_option("data.batch_size", int64_t{64}, "training batch size")
        .add_option("data.val_size", int64_t{5000}, "training images held out for validation")
        .add_option("data.num_workers", int64_t{0}, "background threads preparing batches")
        .add_option("early_stopping.patience", int64_t{3}, "validations without val_loss improvement before stopping")
        .add_option("fit.ckpt_path", std::string(""), "resume from this checkpoint (a path, \"last\" or \"best\")")
        .add_option("callbacks.device_stats", false,
                    "log CPU use, RSS and page faults every log_every_n_steps (DeviceStatsMonitor)");
    if (!cli.parse(argc, argv)) return 0;
    const auto& options = cli.trainer_options();

    volt::callbacks::ModelCheckpoint::Options ckpt;
    ckpt.monitor = "val_acc";
    ckpt.mode = "max";
    ckpt.save_last = true;
    ckpt.filename = "{epoch}-{val_acc:.4f}";
    volt::callbacks::EarlyStopping::Options stop;
    stop.monitor = "val_loss";
    stop.patience = patience(cli);
    const double lr = learning_rate(cli);
    const double drop = dropout(cli);
    std::vector<std::shared_ptr<volt::callbacks::Callback>> callbacks{
        std::make_shared<volt::callbacks::EarlyStopping>(stop)};
    if (options.enable_checkpointing) callbacks.push_back(std::make_shared<volt::callbacks::ModelCheckpoint>(ckpt));
    if (options.logger && options.fast_dev_run == 0) {
      callbacks.push_back(std::make_shared<volt::callbacks::LearningRateMonitor>());
    }
    if (cli.get_bool("callbacks.device_stats") && options.logger && options.fast_dev_run == 0) {
      callbacks.push_back(std::make_shared<volt::callbacks::DeviceStatsMonitor>());
    }

    volt::Trainer trainer(options, callbacks);  // seeds before the model is built
    std::cout << trainer.plan().describe();
    // Debian's dataset-fashion-mnist (or any MNIST-format folder): 55k train, 5k val, 10k test.
    volt::data::MnistDataModule data({cli.get_string("data.dir"), cli.get_int("data.batch_size"),
                                      cli.get_int("data.val_size"), cli.get_int("data.num_workers"),
                                      options.seed.value_or(0)});
    data.prepare_data();  // the data.* numbers, before the model is built
    FashionCnn model(lr, drop);
    // --tuner.scale_batch_size / --tuner.lr_find: the batch size and learning rate found before fit.
    if (const auto found = volt::Tuner(trainer).tune(model, data, std::cout)) model.set_lr(*found);

    trainer.fit(model, data, cli.get_string("fit.ckpt_path"));
    if (trainer.state().interrupted_by != 0) {
      // SIGTERM/SIGINT: the step finished and a checkpoint was saved; resume with
      // --ckpt_path <it> (see the message above).
      return 128 + trainer.state().interrupted_by;
    }
    if (trainer.strategy().world_size() > 1) {
      std::cout << "weights digest (global rank " << trainer.strategy().global_rank() << " of "
                << trainer.strategy().world_size() << "): " << weights_digest(model) << "\n";
    }
    // fast_dev_run reports a best path without writing the file: test the weights in memory then.
    std::string best = trainer.best_model_path();
    if (!best.empty() && !std::filesystem::exists(best)) best.clear();
    const auto metrics = trainer.test(model, data, best.empty() ? "" : "best");
    std::cout << "\ntest accuracy: " << 100.0 * metrics.at("test_acc") << "%"
              << (best.empty() ? "" : " (best checkpoint " + best + ")") << "\n";
    if (!trainer.loggers().empty()) std::cout << "metrics:       " << trainer.log_dir() << "/metrics.csv\n";
    return 0;
  }
}

}  // namespace

// Every failure is one line on stderr and exit code 2; VOLT_DEBUG=1 adds the full report.
int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const volt::Error& e) {
    std::cerr << "fashion_mnist: " << e.what() << "\n";
  } catch (...) {
    const auto error = volt::to_volt_error(std::current_exception(), "fashion_mnist stopped");
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      std::cerr << "fashion_mnist: " << e.what() << "\n";
    }
  }
  return 2;
}
