// Image classification with Volt: a small CNN on Fashion-MNIST (or any folder of MNIST-format IDX
// files), split into train/val/test. Every training option is in config.yaml.
#include <filesystem>
#include <iostream>

#include <ATen/ops/cross_entropy_loss.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include "project_options.h"

namespace {

/// Two conv blocks (conv, batch norm, ReLU, max-pool), then a dropout and a linear classifier.
class ImageClassifier : public volt::Module {
 public:
  ImageClassifier(double lr, std::string optimizer) : lr_(lr), optimizer_(std::move(optimizer)) {
    conv1_ = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3).padding(1)));
    bn1_ = register_module("bn1", torch::nn::BatchNorm2d(32));
    conv2_ = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).padding(1)));
    bn2_ = register_module("bn2", torch::nn::BatchNorm2d(64));
    pool_ = register_module("pool", torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(2)));
    drop_ = register_module("dropout", torch::nn::Dropout(0.25));
    fc_ = register_module("fc", torch::nn::Linear(64 * 7 * 7, 10));
    save_hyperparameters({{"lr", std::to_string(lr)}, {"optimizer", optimizer_}});
  }

  at::Tensor forward(const at::Tensor& x) {
    namespace F = torch::nn::functional;
    auto h = pool_->forward(F::relu(bn1_->forward(conv1_->forward(x))));
    h = pool_->forward(F::relu(bn2_->forward(conv2_->forward(h))));
    return fc_->forward(drop_->forward(h.flatten(1)));
  }

  at::Tensor training_step(volt::Batch& batch, volt::StepContext& ctx) override {
    auto loss = at::cross_entropy_loss(forward(batch[0]), batch[1]);
    ctx.log("train_loss", loss, {.prog_bar = true});
    return loss;
  }

  void validation_step(volt::Batch& batch, volt::StepContext& ctx) override { evaluate(batch, ctx, "val"); }
  void test_step(volt::Batch& batch, volt::StepContext& ctx) override { evaluate(batch, ctx, "test"); }

  volt::OptimizerConfig configure_optimizers() override {
    return project::make_optimizer(optimizer_, parameters(), lr_);
  }

 private:
  void evaluate(volt::Batch& batch, volt::StepContext& ctx, const std::string& stage) {
    auto logits = forward(batch[0]);
    ctx.log(stage + "_loss", at::cross_entropy_loss(logits, batch[1]), {.prog_bar = stage == "val"});
    ctx.log(stage + "_acc", logits.argmax(1).eq(batch[1]).to(at::kFloat).mean(), {.prog_bar = true});
  }

  double lr_;
  std::string optimizer_;
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr}, bn2_{nullptr};
  torch::nn::MaxPool2d pool_{nullptr};
  torch::nn::Dropout drop_{nullptr};
  torch::nn::Linear fc_{nullptr};
};

/// The IDX files of data.dir: the training file split into train and val, the t10k file as test.
class ImageData : public volt::data::DataModule {
 public:
  ImageData(std::string dir, int64_t batch_size, int64_t val_size, int64_t num_workers, uint64_t seed)
      : dir_(std::move(dir)), batch_size_(batch_size), val_size_(val_size), num_workers_(num_workers), seed_(seed) {}

  void setup(volt::Stage stage) override {
    if ((stage == volt::Stage::kFit || stage == volt::Stage::kValidate) && !train_) {
      auto full = volt::data::load_mnist_format(dir_, /*train=*/true);
      if (val_size_ <= 0 || val_size_ >= full->size()) {
        throw volt::ConfigError("data.val_size=" + std::to_string(val_size_) + " must be between 1 and " +
                                std::to_string(full->size() - 1) + " (the training file has " +
                                std::to_string(full->size()) + " images).");
      }
      auto parts = volt::data::random_split(full, {full->size() - val_size_, val_size_}, seed_);
      train_ = parts[0];
      val_ = parts[1];
    }
    if (stage == volt::Stage::kTest && !test_) test_ = volt::data::load_mnist_format(dir_, /*train=*/false);
  }

  std::shared_ptr<volt::data::DataLoader> train_dataloader() override { return loader(train_, true); }
  std::shared_ptr<volt::data::DataLoader> val_dataloader() override { return loader(val_, false); }
  std::shared_ptr<volt::data::DataLoader> test_dataloader() override { return loader(test_, false); }

 private:
  std::shared_ptr<volt::data::DataLoader> loader(std::shared_ptr<const volt::data::Dataset> ds, bool train) const {
    volt::data::DataLoaderOptions o;
    o.batch_size = train ? batch_size_ : 4 * batch_size_;
    o.shuffle = train;
    o.num_workers = num_workers_;
    o.seed = seed_;
    return std::make_shared<volt::data::DataLoader>(std::move(ds), o);
  }

  std::string dir_;
  int64_t batch_size_, val_size_, num_workers_;
  uint64_t seed_;
  std::shared_ptr<const volt::data::Dataset> train_, val_, test_;
};

}  // namespace

int main(int argc, char** argv) {
  const std::string name = project::program_name(argv[0]);
  try {
    volt::cli::Cli cli(name, "Image classification with Volt: a small CNN on MNIST-format IDX files.");
    project::add_common_options(cli);
    cli.add_option("data.dir", std::string(volt::data::kFashionMnistDir), "folder with the IDX files (.gz or not)")
        .add_option("data.val_size", int64_t{5000}, "training images held out for validation")
        .add_option("data.num_workers", int64_t{0}, "background threads preparing batches")
        .add_option("test.run", true, "evaluate on the test files after training");
    if (!cli.parse(argc, argv)) return 0;
    volt::TrainerOptions options = cli.trainer_options();
    auto callbacks = project::make_callbacks(cli, options);
    volt::Trainer trainer(options, callbacks);  // seeds before the model is built
    if (trainer.plan().global_rank == 0) std::cout << trainer.plan().describe();  // once, not per process
    ImageClassifier model(cli.get_double("model.lr"), cli.get_string("model.optimizer"));
    ImageData data(cli.get_string("data.dir"), cli.get_int("data.batch_size"), cli.get_int("data.val_size"),
                   cli.get_int("data.num_workers"), options.seed.value_or(0));
    trainer.fit(model, data, cli.get_string("fit.ckpt_path"));
    if (trainer.state().interrupted_by != 0) return 128 + trainer.state().interrupted_by;
    if (cli.get_bool("test.run")) {
      // fast_dev_run reports a best path without writing the file: test the weights in memory then.
      const std::string best = trainer.best_model_path();
      const bool have_best = !best.empty() && std::filesystem::exists(best);
      const auto metrics = trainer.test(model, data, have_best ? "best" : "");
      std::cout << "\ntest accuracy: " << 100.0 * metrics.at("test_acc") << "%\n";
    }
    return 0;
  } catch (const volt::Error& e) {
    std::cerr << name << ": " << e.what() << "\n";
    return 2;
  }
}
