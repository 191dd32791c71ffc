// Uses the installed Volt from outside its source tree (see CMakeLists.txt here): a
// linear regression trained with volt::Trainer must fit y = 3x + 1.
#include <cmath>
#include <iostream>

#include <ATen/ATen.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include "volt/volt.h"

namespace {

class Regression : public volt::Module {
 public:
  Regression() { fc_ = register_module("fc", torch::nn::Linear(1, 1)); }
  at::Tensor training_step(volt::Batch& batch, volt::StepContext& ctx) override {
    auto loss = (fc_->forward(batch[0]) - batch[1]).pow(2).mean();
    ctx.log("train_loss", loss);
    return loss;
  }
  volt::OptimizerConfig configure_optimizers() override {
    return std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.1));
  }
  torch::nn::Linear fc_{nullptr};
};

}  // namespace

int main() {
  at::manual_seed(0);
  const at::Tensor x = at::linspace(-1, 1, 64).unsqueeze(1);
  const at::Tensor y = 3 * x + 1;
  volt::data::DataLoaderOptions lo;
  lo.batch_size = 16;
  lo.shuffle = true;
  auto loader = std::make_shared<volt::data::DataLoader>(
      std::make_shared<volt::data::TensorDataset>(std::vector<at::Tensor>{x, y}), lo);
  volt::TrainerOptions o;
  o.max_epochs = 60;
  o.enable_progress_bar = false;
  o.enable_checkpointing = false;
  o.enable_model_summary = false;
  o.logger = false;
  volt::Trainer trainer(o);
  Regression model;
  trainer.fit(model, loader);
  const double w = model.fc_->weight.item<double>();
  const double b = model.fc_->bias.item<double>();
  std::cout << "consumer: Volt from an installed package (LibTorch " << volt::compat::torch_version()
            << ") fitted y = " << w << " x + " << b << " in " << trainer.global_step() << " steps\n";
  if (std::abs(w - 3) > 0.05 || std::abs(b - 1) > 0.05 || trainer.global_step() != 240) {
    std::cerr << "consumer: expected y = 3 x + 1 after 240 steps\n";
    return 1;
  }
  return 0;
}
