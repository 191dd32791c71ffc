#pragma once
// Models and data for the tuner's tests: an MLP classifier whose configure_optimizers reads its
// learning rate from the "lr" hyperparameter (where Tuner::lr_find's update_attr writes it), and
// the oracle (../shared/oracle, Lightning 2.2.5) unpacked once per test folder.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <torch/nn/functional/dropout.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "volt/core/module.h"
#include "volt/data/dataloader.h"
#include "volt/data/datamodule.h"
#include "volt/data/dataset.h"
#include "support/oracle.h"

namespace volt::testing {

inline std::string hex(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%a", v);
  return buf;
}

/// in -> hidden -> classes with ReLU and dropout; Adam at hparams()["lr"]. With keep_optimizer the
/// same Adam object is handed out by every configure_optimizers call (a module that keeps its own).
class Mlp : public Module {
 public:
  Mlp(int64_t in, int64_t hidden, int64_t classes, double lr, double dropout = 0.0, bool keep_optimizer = false)
      : dropout_(dropout), keep_(keep_optimizer) {
    fc1 = register_module("fc1", torch::nn::Linear(in, hidden));
    fc2 = register_module("fc2", torch::nn::Linear(hidden, classes));
    save_hyperparameters({{"lr", hex(lr)}});
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};

  double lr() const { return std::strtod(hparams().at("lr").c_str(), nullptr); }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor h = fc1->forward(x.reshape({x.size(0), -1})).relu();
    if (dropout_ > 0)
      h = torch::nn::functional::dropout(
          h, torch::nn::functional::DropoutFuncOptions().p(dropout_).training(is_training()));
    return fc2->forward(h);
  }
  at::Tensor training_step(Batch& batch, StepContext&) override {
    return torch::nn::functional::cross_entropy(forward(batch[0]), batch[1]);
  }
  OptimizerConfig configure_optimizers() override {
    if (keep_) {
      if (!kept_) kept_ = std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(lr()));
      return kept_;
    }
    return std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(lr()));
  }
  std::shared_ptr<torch::optim::Adam> kept_;

  /// Share of `data` classified right (no gradients, eval mode), in percent.
  double accuracy(const data::TensorDataset& data) {
    at::NoGradGuard no_grad;
    const bool was = is_training();
    eval();
    const at::Tensor pred = forward(data.tensors()[0]).argmax(1);
    train(was);
    return 100.0 * pred.eq(data.tensors()[1]).sum().item<double>() / static_cast<double>(data.size());
  }

 private:
  double dropout_;
  bool keep_;
};

/// A DataModule over one TensorDataset (shuffled with a fixed seed) whose batch size the finder may change.
class TensorDataModule : public data::DataModule {
 public:
  TensorDataModule(std::shared_ptr<const data::Dataset> train, int64_t batch_size)
      : train_(std::move(train)), batch_size_(batch_size) {}
  std::shared_ptr<data::DataLoader> train_dataloader() override {
    data::DataLoaderOptions o;
    o.batch_size = batch_size_;
    o.shuffle = true;
    o.seed = 5;
    return std::make_shared<data::DataLoader>(train_, o);
  }
  std::optional<int64_t> batch_size() const override { return batch_size_; }
  void set_batch_size(int64_t b) override { batch_size_ = b; }

 private:
  std::shared_ptr<const data::Dataset> train_;
  int64_t batch_size_;
};

/// Gaussian blobs: `classes` classes in `in` dimensions, from a generator of their own.
inline std::shared_ptr<data::TensorDataset> blobs(int64_t n, int64_t in, int64_t classes, uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  at::Tensor centers = 2.0 * at::randn({classes, in}, gen);
  at::Tensor y = at::randint(classes, {n}, gen, at::TensorOptions().dtype(at::kLong));
  at::Tensor x = centers.index_select(0, y) + at::randn({n, in}, gen);
  return std::make_shared<data::TensorDataset>(std::vector<at::Tensor>{x, y});
}

constexpr const char* kPython = "/usr/bin/python3";


}  // namespace volt::testing
