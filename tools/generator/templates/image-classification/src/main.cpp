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

  /// The learning rate configure_optimizers uses (lr_find's suggestion with --tuner.lr_find true).
  void set_lr(double lr) { lr_ = lr; }

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

}  // namespace

int main(int argc, char** argv) {
  const std::string name = project::program_name(argv[0]);
  return project::run(name, [&] {
    volt::cli::Cli cli(name, "Image classification with Volt: a small CNN on MNIST-format IDX files.");
    project::add_common_options(cli);
    cli.add_option("data.dir", std::string(volt::data::kFashionMnistDir), "folder with the IDX files (.gz or not)")
        .add_option("data.val_size", int64_t{5000}, "training images held out for validation")
        .add_option("data.num_workers", int64_t{0}, "background threads preparing batches")
        .add_option("test.run", true, "evaluate on the test files after training");
    if (!cli.parse(argc, argv)) return 0;
    auto trainer = project::make_trainer(cli);  // seeds before the model is built
    ImageClassifier model(project::learning_rate(cli), cli.get_string("model.optimizer"));
    // The IDX files of data.dir: the training file split into train and val, the t10k file as test
    // (volt::data::MnistDataModule; write a volt::data::DataModule of your own for other data).
    volt::data::MnistDataModule data({cli.get_string("data.dir"), project::batch_size(cli),
                                      cli.get_int("data.val_size"), project::num_workers(cli),
                                      trainer->options().seed.value_or(0)});
    project::tune(*trainer, model, data);  // tuner.lr_find: the learning rate found before fit
    trainer->fit(model, data, cli.get_string("fit.ckpt_path"));
    if (const int code = project::exit_code(*trainer)) return code;
    if (cli.get_bool("test.run")) {
      // fast_dev_run reports a best path without writing the file: test the weights in memory then.
      const std::string best = trainer->best_model_path();
      const bool have_best = !best.empty() && std::filesystem::exists(best);
      const auto metrics = trainer->test(model, data, have_best ? "best" : "");
      std::cout << "\ntest accuracy: " << 100.0 * metrics.at("test_acc") << "%\n";
    }
    return 0;
  });
}
