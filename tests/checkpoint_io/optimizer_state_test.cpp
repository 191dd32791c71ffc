// Optimizer state in PyTorch's layout (include/volt/checkpoint_io/optimizer_state.h), through a checkpoint
// file: every optimizer LibTorch has continues bitwise after a save and restore (LBFGS with its history,
// under the first parameter as PyTorch keys it); a file whose state
// does not fit is refused with every problem listed and the optimizer unchanged. And Volt's format 1
// ({"tensors", "blobs", "meta"}, LibTorch's pickler) still reads, converted to the layout.
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/Context.h>
#include <ATen/core/Dict.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/mse_loss.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/lbfgs.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include "support/expect.h"
#include "support/temp_dir.h"
#include "volt/checkpoint_io/optimizer_state.h"
#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/connectors/checkpoint_connector.h"
#include "volt/core/error.h"

namespace {

using volt::Checkpoint;
using volt::checkpoint_io::TorchCheckpointIO;
using volt::testing::TempDir;

using MakeOptimizer = std::function<std::shared_ptr<torch::optim::Optimizer>(std::vector<at::Tensor>)>;

void steps(torch::nn::Linear& net, torch::optim::Optimizer& opt, int n, int64_t seed) {
  at::manual_seed(seed);
  for (int i = 0; i < n; ++i) {
    const at::Tensor x = at::randn({8, 3});
    opt.zero_grad();
    at::mse_loss(net->forward(x), x.sum(1, true)).backward();
    opt.step();
  }
}

class OptimizerStateRoundTrip : public ::testing::TestWithParam<std::pair<const char*, MakeOptimizer>> {};

TEST_P(OptimizerStateRoundTrip, ContinuesBitwiseAfterASaveAndRestoreThroughAFile) {
  TempDir dir;
  at::manual_seed(1);
  torch::nn::Linear a(3, 1);
  auto opt_a = GetParam().second(a->parameters());
  steps(a, *opt_a, 3, 10);
  Checkpoint c;
  ASSERT_TRUE(volt::checkpoint_io::dump_pytorch_optimizer_state(*opt_a, 0, c));
  TorchCheckpointIO io;
  io.save_checkpoint(c, dir / "o.ckpt");
  const Checkpoint back = io.load_checkpoint(dir / "o.ckpt");

  torch::nn::Linear b(3, 1);
  {
    at::NoGradGuard g;
    b->weight.copy_(a->weight);
    b->bias.copy_(a->bias);
  }
  auto opt_b = GetParam().second(b->parameters());
  volt::checkpoint_io::load_pytorch_optimizer_state(*opt_b, 0, back, dir / "o.ckpt");
  steps(a, *opt_a, 2, 20);
  steps(b, *opt_b, 2, 20);
  EXPECT_TRUE(a->weight.equal(b->weight)) << GetParam().first;
  EXPECT_TRUE(a->bias.equal(b->bias)) << GetParam().first;
}

INSTANTIATE_TEST_SUITE_P(
    LibTorch, OptimizerStateRoundTrip,
    ::testing::Values(std::make_pair("SGD", MakeOptimizer([](std::vector<at::Tensor> p) {
                                       return std::make_shared<torch::optim::SGD>(
                                           p, torch::optim::SGDOptions(0.1).momentum(0.9));
                                     })),
                      std::make_pair("Adam", MakeOptimizer([](std::vector<at::Tensor> p) {
                                       return std::make_shared<torch::optim::Adam>(p, torch::optim::AdamOptions(0.01));
                                     })),
                      std::make_pair("AdamW", MakeOptimizer([](std::vector<at::Tensor> p) {
                                       return std::make_shared<torch::optim::AdamW>(
                                           p, torch::optim::AdamWOptions(0.01).amsgrad(true));
                                     })),
                      std::make_pair("RMSprop", MakeOptimizer([](std::vector<at::Tensor> p) {
                                       return std::make_shared<torch::optim::RMSprop>(
                                           p, torch::optim::RMSpropOptions(0.01).momentum(0.5).centered(true));
                                     })),
                      std::make_pair("Adagrad", MakeOptimizer([](std::vector<at::Tensor> p) {
                                       return std::make_shared<torch::optim::Adagrad>(
                                           p, torch::optim::AdagradOptions(0.1));
                                     }))),
    [](const auto& info) { return std::string(info.param.first); });

void lbfgs_steps(torch::nn::Linear& net, torch::optim::LBFGS& opt, int n, int64_t seed) {
  at::manual_seed(seed);
  for (int i = 0; i < n; ++i) {
    const at::Tensor x = at::randn({8, 3});
    opt.step([&] {
      opt.zero_grad();
      at::Tensor loss = at::mse_loss(net->forward(x), x.sum(1, true));
      loss.backward();
      return loss;
    });
  }
}

TEST(OptimizerState, LBFGSContinuesBitwiseFromItsHistoryInPyTorchsNames) {
  TempDir dir;
  at::manual_seed(1);
  torch::nn::Linear a(3, 1);
  // history_size 3 over 2 steps of 4 iterations: the history is full and has dropped entries.
  const auto options = torch::optim::LBFGSOptions(0.5).max_iter(4).history_size(3);
  torch::optim::LBFGS opt_a(a->parameters(), options);
  lbfgs_steps(a, opt_a, 2, 10);
  Checkpoint c;
  ASSERT_TRUE(volt::checkpoint_io::dump_pytorch_optimizer_state(opt_a, 0, c));
  // PyTorch's names, all under parameter 0.
  const auto& entry = c.meta["optimizer_states"][0]["state"]["0"];
  for (const char* k : {"func_evals", "n_iter", "t", "prev_loss"}) EXPECT_TRUE(entry.contains(k)) << k;
  EXPECT_EQ(entry["old_dirs"].size(), 3u);
  for (const char* k : {"d", "H_diag", "prev_flat_grad", "old_dirs.0", "old_stps.2", "ro.1", "al.0"}) {
    EXPECT_EQ(c.tensors.count(std::string("optimizer_states.0.state.0.") + k), 1u) << k;
  }
  EXPECT_FALSE(c.meta["optimizer_states"][0]["state"].contains("1"));
  EXPECT_EQ(c.meta["optimizer_states"][0]["param_groups"][0]["history_size"], 3);
  TorchCheckpointIO io;
  io.save_checkpoint(c, dir / "l.ckpt");
  const Checkpoint back = io.load_checkpoint(dir / "l.ckpt");
  EXPECT_TRUE(back.tensors.at("optimizer_states.0.state.0.old_dirs.1")
                  .equal(c.tensors.at("optimizer_states.0.state.0.old_dirs.1")));

  torch::nn::Linear b(3, 1);
  {
    at::NoGradGuard g;
    b->weight.copy_(a->weight);
    b->bias.copy_(a->bias);
  }
  torch::optim::LBFGS opt_b(b->parameters(), torch::optim::LBFGSOptions(0.1));
  volt::checkpoint_io::load_pytorch_optimizer_state(opt_b, 0, back, dir / "l.ckpt");
  const auto& restored = static_cast<const torch::optim::LBFGSOptions&>(opt_b.param_groups()[0].options());
  EXPECT_EQ(restored.history_size(), 3);
  EXPECT_EQ(restored.lr(), 0.5);
  lbfgs_steps(a, opt_a, 2, 20);
  lbfgs_steps(b, opt_b, 2, 20);
  EXPECT_TRUE(a->weight.equal(b->weight));
  EXPECT_TRUE(a->bias.equal(b->bias));
}

TEST(OptimizerState, LBFGSHistoryOfAnotherLengthOrShapeIsRefused) {
  torch::nn::Linear net(3, 1);
  torch::optim::LBFGS opt(net->parameters(), torch::optim::LBFGSOptions(0.5).max_iter(4).history_size(3));
  lbfgs_steps(net, opt, 1, 3);
  Checkpoint c;
  ASSERT_TRUE(volt::checkpoint_io::dump_pytorch_optimizer_state(opt, 0, c));
  c.tensors["optimizer_states.0.state.0.d"] = at::zeros({5});
  c.meta["optimizer_states"][0]["state"]["0"]["n_iter"] = -2;
  torch::nn::Linear other(3, 1);
  torch::optim::LBFGS fresh(other->parameters(), torch::optim::LBFGSOptions(0.25));
  const std::string msg = volt::testing::error_message<volt::CheckpointError>(
      [&] { volt::checkpoint_io::load_pytorch_optimizer_state(fresh, 0, c, "x.ckpt"); });
  EXPECT_TRUE(volt::testing::mentions(
      msg, {"'x.ckpt'", "state[0].d is Float [5], not Float [4]", "state[0].n_iter is -2", "Nothing was restored"}))
      << msg;
  EXPECT_TRUE(fresh.state().empty());
  EXPECT_EQ(fresh.param_groups()[0].options().get_lr(), 0.25);
}

TEST(OptimizerState, UsesPyTorchsNamesAndParameterIndices) {
  torch::nn::Linear net(3, 1);
  torch::optim::Adam opt(net->parameters(), torch::optim::AdamOptions(0.01));
  steps(net, opt, 1, 3);
  Checkpoint c;
  ASSERT_TRUE(volt::checkpoint_io::dump_pytorch_optimizer_state(opt, 0, c));
  const auto& group = c.meta["optimizer_states"][0]["param_groups"][0];
  EXPECT_EQ(group["params"], nlohmann::json({0, 1}));
  EXPECT_EQ(group["lr"], 0.01);
  EXPECT_EQ(group["betas"], nlohmann::json({0.9, 0.999}));
  EXPECT_EQ(group["amsgrad"], false);
  for (const char* name : {"step", "exp_avg", "exp_avg_sq"}) {
    EXPECT_EQ(c.tensors.count(std::string("optimizer_states.0.state.1.") + name), 1u) << name;
  }
  EXPECT_EQ(c.tensors.at("optimizer_states.0.state.0.step").item<float>(), 1.0f);
  EXPECT_EQ(c.tensors.at("optimizer_states.0.state.0.step").scalar_type(), at::kFloat);
}

TEST(OptimizerState, StateThatDoesNotFitIsRefusedWithEveryProblemAndChangesNothing) {
  torch::nn::Linear net(3, 1);
  torch::optim::Adam opt(net->parameters(), torch::optim::AdamOptions(0.01));
  steps(net, opt, 1, 3);
  Checkpoint c;
  ASSERT_TRUE(volt::checkpoint_io::dump_pytorch_optimizer_state(opt, 0, c));
  c.tensors["optimizer_states.0.state.0.exp_avg"] = at::zeros({2, 3});
  c.tensors.erase("optimizer_states.0.state.1.exp_avg_sq");
  c.meta["optimizer_states"][0]["param_groups"][0]["lr"] = "fast";
  torch::nn::Linear other(3, 1);
  torch::optim::Adam fresh(other->parameters(), torch::optim::AdamOptions(0.5));
  const std::string msg = volt::testing::error_message<volt::CheckpointError>(
      [&] { volt::checkpoint_io::load_pytorch_optimizer_state(fresh, 0, c, "x.ckpt"); });
  EXPECT_TRUE(volt::testing::mentions(
      msg, {"'x.ckpt'", "optimizer_states[0].state[0].exp_avg is Float [2, 3]", "its parameter Float [1, 3]",
            "state[1].exp_avg_sq is missing", "lr is \"fast\"", "Nothing was restored"}))
      << msg;
  EXPECT_TRUE(fresh.state().empty());
  EXPECT_EQ(fresh.param_groups()[0].options().get_lr(), 0.5);
}

TEST(OptimizerState, ADifferentNumberOfParametersIsRefused) {
  torch::nn::Linear net(3, 1);
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  steps(net, opt, 1, 3);
  Checkpoint c;
  ASSERT_TRUE(volt::checkpoint_io::dump_pytorch_optimizer_state(opt, 0, c));
  torch::optim::SGD one({net->weight}, torch::optim::SGDOptions(0.1).momentum(0.9));
  const std::string msg = volt::testing::error_message<volt::CheckpointError>(
      [&] { volt::checkpoint_io::load_pytorch_optimizer_state(one, 0, c, "x.ckpt"); });
  EXPECT_TRUE(volt::testing::mentions(msg, {"param_groups[0] has 2 parameters, the optimizer's group 1"})) << msg;
}

TEST(VoltFormat1, AnOldCheckpointReadsConvertedToTheLayout) {
  TempDir dir;
  // What TorchCheckpointIO wrote before format 2: LibTorch's pickler, typed dicts, JSON meta.
  c10::Dict<std::string, at::Tensor> tensors;
  tensors.insert("state_dict.w", at::ones({2}));
  tensors.insert("rng.cpu", at::zeros({4}, at::kByte));
  c10::Dict<std::string, at::Tensor> blobs;
  blobs.insert("optimizer.0", at::ones({3}, at::kByte));
  c10::impl::GenericDict root(c10::StringType::get(), c10::AnyType::get());
  root.insert("tensors", tensors);
  root.insert("blobs", blobs);
  root.insert(
      "meta",
      nlohmann::json(
          {{"format_version", 1},
           {"epoch", 1},
           {"global_step", 6},
           {"weights_only", false},
           {"logger_version", "version_2"},
           {"precision", {{"name", "32-true"}, {"state", nlohmann::json::object()}}},
           {"loops",
            {{"epoch", 1}, {"global_step", 6}, {"batches_done", 3}, {"batches_seen", 6}, {"num_training_batches", 3}}},
           {"lr_schedulers", {{{"last_epoch", 2}}}},
           {"mine", "kept"}})
          .dump());
  const std::vector<char> bytes = torch::jit::pickle_save(root);
  std::ofstream(dir / "old.ckpt", std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  const Checkpoint c = TorchCheckpointIO().load_checkpoint(dir / "old.ckpt");
  EXPECT_EQ(c.meta["volt"]["format_version"], volt::kCheckpointFormatVersion);
  EXPECT_EQ(c.meta["volt"]["converted_from_format"], 1);
  EXPECT_EQ(c.meta["volt"]["loops"]["batches_done"], 3);
  EXPECT_EQ(c.meta["volt"]["logger_version"], "version_2");
  EXPECT_EQ(c.meta["loops"]["fit_loop"]["epoch_loop.batch_progress"]["is_last_batch"], true);
  EXPECT_EQ(c.meta["pytorch-lightning_version"], "2.2.5");
  EXPECT_EQ(c.meta["lr_schedulers"][0]["last_epoch"], 2);
  EXPECT_EQ(c.meta["mine"], "kept");
  EXPECT_EQ(c.blobs.at("optimizer.0"), std::string(3, '\1'));
  EXPECT_TRUE(c.tensors.at("state_dict.w").equal(at::ones({2})));
  EXPECT_NO_THROW(volt::connectors::CheckpointConnector::validate_progress(c, "old.ckpt"));
}

}  // namespace
