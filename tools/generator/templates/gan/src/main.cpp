// A DCGAN with Volt on Fashion-MNIST (or any MNIST-format folder): a generator and a discriminator,
// two Adam optimizers stepped by hand (manual optimization), and an 8x8 grid of generated images
// after every epoch, logged with log_image (TensorBoard's IMAGES tab) and written as a PGM file.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <ATen/ops/binary_cross_entropy_with_logits.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include "project_options.h"

namespace {

constexpr int64_t kLatent = 64;

/// z [n, 64] -> images [n, 1, 28, 28] in [-1, 1].
class Generator : public torch::nn::Module {
 public:
  Generator() {
    fc_ = register_module("fc", torch::nn::Linear(kLatent, 128 * 7 * 7));
    bn0_ = register_module("bn0", torch::nn::BatchNorm1d(128 * 7 * 7));
    up1_ = register_module("up1", torch::nn::ConvTranspose2d(torch::nn::ConvTranspose2dOptions(128, 64, 4)
                                                                 .stride(2).padding(1).bias(false)));
    bn1_ = register_module("bn1", torch::nn::BatchNorm2d(64));
    up2_ = register_module("up2", torch::nn::ConvTranspose2d(torch::nn::ConvTranspose2dOptions(64, 1, 4)
                                                                 .stride(2).padding(1)));
  }
  at::Tensor forward(const at::Tensor& z) {
    namespace F = torch::nn::functional;
    auto h = F::relu(bn0_->forward(fc_->forward(z))).view({-1, 128, 7, 7});
    h = F::relu(bn1_->forward(up1_->forward(h)));
    return up2_->forward(h).tanh();
  }

 private:
  torch::nn::Linear fc_{nullptr};
  torch::nn::BatchNorm1d bn0_{nullptr};
  torch::nn::ConvTranspose2d up1_{nullptr}, up2_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr};
};

/// images [n, 1, 28, 28] -> one logit each (real vs generated).
class Discriminator : public torch::nn::Module {
 public:
  Discriminator() {
    conv1_ = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 64, 4).stride(2).padding(1)));
    conv2_ = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(64, 128, 4).stride(2).padding(1)));
    bn2_ = register_module("bn2", torch::nn::BatchNorm2d(128));
    fc_ = register_module("fc", torch::nn::Linear(128 * 7 * 7, 1));
  }
  at::Tensor forward(const at::Tensor& x) {
    namespace F = torch::nn::functional;
    const auto leaky = F::LeakyReLUFuncOptions().negative_slope(0.2);
    auto h = F::leaky_relu(conv1_->forward(x), leaky);
    h = F::leaky_relu(bn2_->forward(conv2_->forward(h)), leaky);
    return fc_->forward(h.flatten(1)).squeeze(1);
  }

 private:
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  torch::nn::BatchNorm2d bn2_{nullptr};
  torch::nn::Linear fc_{nullptr};
};

class Gan : public volt::Module {
 public:
  Gan(double lr, std::string optimizer, std::string samples_dir)
      : lr_(lr), optimizer_(std::move(optimizer)), samples_dir_(std::move(samples_dir)) {
    generator_ = register_module("generator", std::make_shared<Generator>());
    discriminator_ = register_module("discriminator", std::make_shared<Discriminator>());
    set_automatic_optimization(false);
    fixed_z_ = at::randn({64, kLatent});  // after the Trainer seeded: the same grid every epoch
  }

  at::Tensor training_step(volt::Batch& batch, volt::StepContext& ctx) override {
    const auto real = batch[0] * 2 - 1;  // [0, 1] -> [-1, 1], the generator's range
    const int64_t n = real.size(0);
    const auto ones = at::ones({n}, real.options()), zeros = at::zeros({n}, real.options());
    auto fake = generator_->forward(at::randn({n, kLatent}, real.options()));

    // Discriminator: real as 1, generated as 0 (the generator is not updated here).
    auto d_loss = at::binary_cross_entropy_with_logits(discriminator_->forward(real), ones) +
                  at::binary_cross_entropy_with_logits(discriminator_->forward(fake.detach()), zeros);
    ctx.optimizer_zero_grad(1);
    ctx.manual_backward(d_loss);
    ctx.optimizer_step(1);

    // Generator: make the discriminator call its images real.
    auto g_loss = at::binary_cross_entropy_with_logits(discriminator_->forward(fake), ones);
    ctx.optimizer_zero_grad(0);
    ctx.manual_backward(g_loss);
    ctx.optimizer_step(0);

    // Per step (every log_every_n_steps) and as the epoch's mean: a short run, with fewer
    // batches than log_every_n_steps, still leaves curves for `volt plot` (d_loss_epoch, ...).
    ctx.log("d_loss", d_loss.detach(), {.prog_bar = true, .on_step = true, .on_epoch = true});
    ctx.log("g_loss", g_loss.detach(), {.prog_bar = true, .on_step = true, .on_epoch = true});
    return g_loss.detach();
  }

  volt::OptimizerConfig configure_optimizers() override {
    volt::OptimizerConfig config;
    const std::vector<torch::nn::Module*> players{generator_.get(), discriminator_.get()};
    for (auto* m : players) {
      if (optimizer_ == "adam") {  // DCGAN's Adam: beta1 0.5 keeps the two players from oscillating
        config.optimizers.push_back(std::make_shared<torch::optim::Adam>(
            m->parameters(), torch::optim::AdamOptions(lr_).betas(std::make_tuple(0.5, 0.999))));
      } else {
        config.optimizers.push_back(project::make_optimizer(optimizer_, m->parameters(), lr_));
      }
    }
    return config;
  }

  void on_train_epoch_end() override {
    const at::Tensor grid = sample_grid();
    // To every logger that shows images (--trainer.logger tensorboard: the IMAGES tab), on rank 0.
    log_image("samples", grid.unsqueeze(0));
    const char* rank = std::getenv("RANK");
    if (samples_dir_.empty() || (rank && std::string(rank) != "0")) return;
    write_grid(grid, samples_dir_ + "/epoch_" + std::to_string(epoch_++) + ".pgm");
  }

  /// An 8x8 grid of 28x28 samples from the fixed latent vectors: uint8 [224, 224].
  at::Tensor sample_grid() {
    torch::NoGradGuard no_grad;
    generator_->eval();
    const auto device = parameters().front().device();
    auto images = generator_->forward(fixed_z_.to(device)).to(at::kFloat).cpu();
    generator_->train();
    auto pixels = ((images.squeeze(1) + 1) * 127.5).clamp(0, 255).to(at::kByte);  // [64, 28, 28]
    return pixels.view({8, 8, 28, 28}).permute({0, 2, 1, 3}).reshape({8 * 28, 8 * 28}).contiguous();
  }

  /// The grid as a binary PGM (P5) image.
  void write_grid(const at::Tensor& grid, const std::string& path) {
    std::filesystem::create_directories(samples_dir_);
    const std::string tmp = path + ".tmp";
    {
      std::ofstream out(tmp, std::ios::binary);
      out << "P5\n" << 8 * 28 << " " << 8 * 28 << "\n255\n";
      out.write(reinterpret_cast<const char*>(grid.data_ptr<uint8_t>()), grid.numel());
      if (!out) throw volt::Error("cannot write " + tmp);
    }
    std::filesystem::rename(tmp, path);
    std::cout << "\nsamples: " << path << "\n";
  }

 private:
  double lr_;
  std::string optimizer_, samples_dir_;
  std::shared_ptr<Generator> generator_;
  std::shared_ptr<Discriminator> discriminator_;
  at::Tensor fixed_z_;
  int64_t epoch_ = 0;
};

class ImageData : public volt::data::DataModule {
 public:
  ImageData(std::string dir, int64_t batch_size, int64_t num_workers, uint64_t seed)
      : dir_(std::move(dir)), batch_size_(batch_size), num_workers_(num_workers), seed_(seed) {}
  void setup(volt::Stage) override {
    if (!train_) train_ = volt::data::load_mnist_format(dir_, /*train=*/true);
  }
  std::shared_ptr<volt::data::DataLoader> train_dataloader() override {
    volt::data::DataLoaderOptions o;
    o.batch_size = batch_size_;
    o.shuffle = true;
    o.drop_last = true;
    o.num_workers = num_workers_;
    o.seed = seed_;
    return std::make_shared<volt::data::DataLoader>(train_, o);
  }

 private:
  std::string dir_;
  int64_t batch_size_, num_workers_;
  uint64_t seed_;
  std::shared_ptr<const volt::data::Dataset> train_;
};

}  // namespace

int main(int argc, char** argv) {
  const std::string name = project::program_name(argv[0]);
  return project::run(name, [&] {
    volt::cli::Cli cli(name, "A DCGAN on MNIST-format images with Volt (manual optimization).");
    project::add_common_options(cli);
    cli.add_option("data.dir", std::string(volt::data::kFashionMnistDir), "folder with the IDX files (.gz or not)")
        .add_option("data.num_workers", int64_t{0}, "background threads preparing batches")
        .add_option("sample.dir", "samples", "folder for the sample grids (epoch_N.pgm); empty: none");
    if (!cli.parse(argc, argv)) return 0;
    auto trainer = project::make_trainer(cli);  // seeds before the model draws its fixed latents
    Gan model(project::learning_rate(cli), cli.get_string("model.optimizer"), cli.get_string("sample.dir"));
    ImageData data(cli.get_string("data.dir"), project::batch_size(cli), project::num_workers(cli),
                   trainer->options().seed.value_or(0));
    trainer->fit(model, data, cli.get_string("fit.ckpt_path"));
    return project::exit_code(*trainer);
  });
}
