// Image classification with Volt: a small CNN on Fashion-MNIST (or any folder of MNIST-format IDX
// files), split into train/val/test; or, with --data.image_folder, on a folder of JPEG/PNG images in
// one subfolder per class (torchvision's ImageFolder layout). Every training option is in config.yaml.
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
  ImageClassifier(double lr, std::string optimizer, int64_t num_classes = 10)
      : lr_(lr), optimizer_(std::move(optimizer)) {
    conv1_ = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3).padding(1)));
    bn1_ = register_module("bn1", torch::nn::BatchNorm2d(32));
    conv2_ = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).padding(1)));
    bn2_ = register_module("bn2", torch::nn::BatchNorm2d(64));
    pool_ = register_module("pool", torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(2)));
    drop_ = register_module("dropout", torch::nn::Dropout(0.25));
    fc_ = register_module("fc", torch::nn::Linear(64 * 7 * 7, num_classes));
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

/// A folder of images, root/<class>/<file> (volt::data::ImageFolder: classes sorted by name), as
/// 28 x 28 grayscale tensors: train and val are a seeded random split of it (val_size images held
/// out), test is the val split. Training images get a random horizontal flip.
class ImageFolderDataModule : public volt::data::DataModule {
 public:
  ImageFolderDataModule(std::string root, int64_t batch_size, int64_t val_size, int64_t num_workers, uint64_t seed)
      : root_(std::move(root)), batch_size_(batch_size), val_size_(val_size), num_workers_(num_workers), seed_(seed) {
    namespace T = volt::data::transforms;
    auto images = [&](bool train) {
      std::vector<T::TransformPtr> steps{std::make_shared<T::Resize>(std::vector<int64_t>{28}),
                                         std::make_shared<T::CenterCrop>(std::vector<int64_t>{28, 28})};
      if (train) steps.push_back(std::make_shared<T::RandomHorizontalFlip>(0.5));
      steps.push_back(std::make_shared<T::ToTensor>());
      steps.push_back(std::make_shared<T::Normalize>(std::vector<double>{0.5}, std::vector<double>{0.5}));
      return std::make_shared<volt::data::ImageFolder>(
          root_, volt::data::ImageFolderOptions{.mode = volt::data::ImageMode::kL,
                                                .transform = std::make_shared<T::Compose>(steps),
                                                .seed = seed_});
    };
    train_set_ = images(true);
    eval_set_ = images(false);
    const int64_t n = train_set_->size();
    if (val_size_ < 1 || val_size_ >= n) {
      throw volt::ConfigError("data.val_size=" + std::to_string(val_size_) + " but the image folder '" + root_ +
                              "' holds " + std::to_string(n) + " images; use 1 .. " + std::to_string(n - 1) + ".");
    }
    // The same split of both views: train images with augmentation, val images without.
    const auto split = volt::data::random_split(train_set_, {n - val_size_, val_size_}, seed_);
    train_ = std::make_shared<volt::data::Subset>(train_set_, split[0]->indices());
    val_ = std::make_shared<volt::data::Subset>(eval_set_, split[1]->indices());
  }
  int64_t num_classes() const { return static_cast<int64_t>(train_set_->classes().size()); }
  std::shared_ptr<volt::data::DataLoader> train_dataloader() override { return loader(train_, true); }
  std::shared_ptr<volt::data::DataLoader> val_dataloader() override { return loader(val_, false); }
  std::shared_ptr<volt::data::DataLoader> test_dataloader() override { return loader(val_, false); }
  std::optional<int64_t> batch_size() const override { return batch_size_; }
  void set_batch_size(int64_t batch_size) override { batch_size_ = batch_size; }

 private:
  std::shared_ptr<volt::data::DataLoader> loader(std::shared_ptr<const volt::data::Dataset> set, bool train) const {
    volt::data::DataLoaderOptions o;
    o.batch_size = batch_size_;
    o.shuffle = train;
    o.num_workers = num_workers_;
    o.seed = seed_;
    return std::make_shared<volt::data::DataLoader>(std::move(set), o);
  }
  std::string root_;
  int64_t batch_size_, val_size_, num_workers_;
  uint64_t seed_;
  std::shared_ptr<volt::data::ImageFolder> train_set_, eval_set_;
  std::shared_ptr<const volt::data::Dataset> train_, val_;
};

}  // namespace

int main(int argc, char** argv) {
  const std::string name = project::program_name(argv[0]);
  return project::run(name, [&] {
    volt::cli::Cli cli(name, "Image classification with Volt: a small CNN on MNIST-format IDX files.");
    project::add_common_options(cli);
    cli.add_option("data.dir", std::string(volt::data::kFashionMnistDir), "folder with the IDX files (.gz or not)")
        .add_option("data.image_folder", std::string(),
                    "a folder of JPEG/PNG images, one subfolder per class (instead of data.dir's IDX files)")
        .add_option("data.val_size", int64_t{5000}, "training images held out for validation")
        .add_option("data.num_workers", int64_t{0}, "background threads preparing batches")
        .add_option("test.run", true, "evaluate on the test files after training");
    if (!cli.parse(argc, argv)) return 0;
    auto trainer = project::make_trainer(cli);  // seeds before the model is built
    const std::string folder = cli.get_string("data.image_folder");
    const auto seed = static_cast<uint64_t>(trainer->options().seed.value_or(0));
    std::unique_ptr<volt::data::DataModule> data_module;
    int64_t num_classes = 10;
    if (folder.empty()) {
      // The IDX files of data.dir: the training file split into train and val, the t10k file as test
      // (volt::data::MnistDataModule).
      data_module = std::make_unique<volt::data::MnistDataModule>(volt::data::MnistDataModule::Options{
          cli.get_string("data.dir"), project::batch_size(cli), cli.get_int("data.val_size"),
          project::num_workers(cli), seed});
    } else {
      auto images = std::make_unique<ImageFolderDataModule>(folder, project::batch_size(cli),
                                                            cli.get_int("data.val_size"), project::num_workers(cli), seed);
      num_classes = images->num_classes();
      std::cout << "image folder " << folder << ": " << num_classes << " classes\n";
      data_module = std::move(images);
    }
    volt::data::DataModule& data = *data_module;
    ImageClassifier model(project::learning_rate(cli), cli.get_string("model.optimizer"), num_classes);
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
