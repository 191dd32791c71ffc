#include "volt/callbacks/stochastic_weight_averaging.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ops/arange.h>
#include <ATen/ops/cos.h>
#include <ATen/ops/sin.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/zeros.h>
#include <torch/nn/functional/loss.h>

#include "callbacks/averaging_test_support.h"
#include "support/fake_trainer_view.h"
#include "volt/core/error.h"
#include "volt/data/dataloader.h"
#include "volt/data/dataset.h"
#include "volt/trainer/trainer.h"
#include "support/oracle.h"
#include "support/source_dir.h"

namespace {

using volt::ConfigError;
using volt::callbacks::StochasticWeightAveraging;
using volt::callbacks::SWALR;
using volt::testing::AveragingNet;
using volt::testing::ScratchDir;

StochasticWeightAveraging::Options swa_options(std::vector<double> lrs, std::variant<int64_t, double> start,
                                               int64_t annealing = 2, std::string strategy = "cos") {
  StochasticWeightAveraging::Options o;
  o.swa_lrs = std::move(lrs);
  o.swa_epoch_start = start;
  o.annealing_epochs = annealing;
  o.annealing_strategy = std::move(strategy);
  return o;
}

/// The weights each epoch starts with and the rate its first batch trains with.
class EpochRecorder : public volt::callbacks::Callback {
 public:
  std::string state_key() const override { return "EpochRecorder"; }
  void on_train_epoch_start(volt::TrainerView& view) override {
    starts.push_back(volt::testing::weights(view.module()));
  }
  void on_train_batch_start(volt::TrainerView& view, const volt::Batch&, int64_t batch_idx) override {
    if (batch_idx == 0) rates.push_back(view.optimizers().front()->param_groups()[0].options().get_lr());
  }
  std::vector<std::vector<at::Tensor>> starts;
  std::vector<double> rates;
};

volt::TrainerOptions options_for(const ScratchDir& dir, int64_t epochs) {
  volt::TrainerOptions o = volt::testing::quiet_options(dir.path());
  o.max_epochs = epochs;
  return o;
}

/// PyTorch's closed form of an annealing that starts from `start`: the formula SWALR's
/// recurrence unrolls to.
double annealed(double start, double swa, int64_t step, int64_t epochs, bool cosine) {
  const double t = std::min(1.0, static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, epochs)));
  const double alpha = cosine ? (1.0 - std::cos(M_PI * t)) / 2.0 : t;
  return swa * alpha + start * (1.0 - alpha);
}

namespace fs = std::filesystem;

/// Output of a shell command (stdout only), and whether it exited 0.
std::pair<bool, std::string> shell(const std::string& command) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return {false, ""};
  std::string out;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  return {::pclose(pipe) == 0, out};
}

bool swa_python_has_torch() {
  static const bool has = shell("/usr/bin/python3 -c 'import torch' 2>/dev/null").first;
  return has;
}

using volt::testing::oracle_pythonpath;
using volt::testing::oracle_setup;

/// swa_lightning.py's model in Volt: Linear(4, 3) [-> BatchNorm1d(3)] -> tanh -> Linear(3, 1),
/// MSE, SGD 0.1, the same closed-form initial weights.
class OracleNet : public volt::Module {
 public:
  explicit OracleNet(bool batch_norm) {
    fc1 = register_module("fc1", torch::nn::Linear(4, 3));
    if (batch_norm) bn = register_module("bn", torch::nn::BatchNorm1d(3));
    fc2 = register_module("fc2", torch::nn::Linear(3, 1));
    at::NoGradGuard no_grad;
    int64_t i = 0;
    for (auto& p : parameters()) {
      p.copy_((at::cos(at::arange(p.numel(), at::kFloat) + i) * 0.4).reshape(p.sizes()));
      ++i;
    }
  }
  at::Tensor training_step(volt::Batch& batch, volt::StepContext&) override {
    at::Tensor h = fc1->forward(batch[0]);
    if (bn) h = bn->forward(h);
    return torch::nn::functional::mse_loss(fc2->forward(at::tanh(h)), batch[1]);
  }
  volt::OptimizerConfig configure_optimizers() override {
    return std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.1));
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::BatchNorm1d bn{nullptr};
};

std::shared_ptr<volt::data::DataLoader> oracle_loader() {
  at::Tensor x = at::sin(at::arange(40 * 4, at::kFloat).reshape({40, 4}) * 0.37);
  at::Tensor y = x.sum(1, /*keepdim=*/true) * 0.5 + at::cos(at::arange(40, at::kFloat)).reshape({40, 1}) * 0.1;
  volt::data::DataLoaderOptions o;
  o.batch_size = 4;
  return std::make_shared<volt::data::DataLoader>(
      std::make_shared<volt::data::TensorDataset>(std::vector<at::Tensor>{x, y}), o);
}

}  // namespace

class SwaAgainstLightning : public ::testing::TestWithParam<bool> {};

// The same model, data and settings through Lightning 2.2.5 and Volt: the same final weights
// (and, with a batch-norm layer, the same statistics after the final pass), bit for bit.
TEST_P(SwaAgainstLightning, FinalWeightsEqualLightningsBitForBit) {
  const bool batch_norm = GetParam();
  if (!swa_python_has_torch()) GTEST_SKIP() << "/usr/bin/python3 with torch (python3-torch) is not installed";
  if (oracle_setup().empty() || !fs::exists(oracle_setup())) {
    GTEST_SKIP() << "the Lightning oracle (../shared/oracle) is not here";
  }
  const std::string path = oracle_pythonpath();
  ASSERT_FALSE(path.empty()) << "the oracle is here but could not be unpacked with " << oracle_setup();
  const std::string script = (volt::testing::source_dir() / "tests" / "callbacks" / "swa_lightning.py").string();
  const auto [ok, out] = shell("PYTHONPATH='" + path + "' PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 '" + script +
                               "' " + (batch_norm ? "1" : "0") + " 2>/dev/null");
  ASSERT_TRUE(ok) << "swa_lightning.py failed: " << out;
  std::vector<double> lightning;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("0x", 0) == 0 || line.rfind("-0x", 0) == 0) lightning.push_back(std::strtod(line.c_str(), nullptr));
  }

  ScratchDir dir;
  OracleNet model(batch_norm);
  StochasticWeightAveraging::Options o = swa_options({0.05}, int64_t{2}, 1);
  volt::Trainer trainer(options_for(dir, 4), {std::make_shared<StochasticWeightAveraging>(o)});
  trainer.fit(model, oracle_loader());
  std::vector<double> volt_values;
  for (const auto& p : model.parameters()) {
    at::Tensor flat = p.detach().to(at::kDouble).reshape({-1});
    for (int64_t i = 0; i < flat.numel(); ++i) volt_values.push_back(flat[i].item<double>());
  }
  for (const auto& b : model.buffers()) {
    if (!b.is_floating_point()) continue;
    at::Tensor flat = b.detach().to(at::kDouble).reshape({-1});
    for (int64_t i = 0; i < flat.numel(); ++i) volt_values.push_back(flat[i].item<double>());
  }
  ASSERT_EQ(lightning.size(), volt_values.size()) << out;
  for (size_t i = 0; i < volt_values.size(); ++i) EXPECT_EQ(volt_values[i], lightning[i]) << "value " << i;
}

INSTANTIATE_TEST_SUITE_P(BatchNorm, SwaAgainstLightning, ::testing::Bool());

TEST(StochasticWeightAveraging, AverageIsTheMeanOfTheWeightsTheAveragedEpochsStartedWith) {
  ScratchDir dir;
  AveragingNet model;
  auto swa = std::make_shared<StochasticWeightAveraging>(swa_options({0.02}, int64_t{3}));
  auto recorder = std::make_shared<EpochRecorder>();
  volt::Trainer trainer(options_for(dir, 6), {swa, recorder});
  trainer.fit(model, volt::testing::random_loader(48, 8, 5, 8));

  ASSERT_EQ(recorder->starts.size(), 6u);
  // swa_epoch_start=3 (1-based): the epochs 2..5 (0-based) fold in the weights they start with.
  EXPECT_EQ(swa->swa_start(), 2);
  EXPECT_EQ(swa->swa_end(), 5);
  EXPECT_EQ(swa->n_averaged(), 4);
  const auto final_weights = volt::testing::weights(model);
  for (size_t i = 0; i < final_weights.size(); ++i) {
    std::vector<at::Tensor> folded;
    for (int e = 2; e <= 5; ++e) folded.push_back(recorder->starts[e][i].to(at::kDouble));
    const at::Tensor expected = at::stack(folded).mean(0);
    EXPECT_TRUE(final_weights[i].to(at::kDouble).allclose(expected, 0, 1e-6)) << "parameter " << i;
    EXPECT_TRUE(final_weights[i].equal(swa->average()[i])) << "the module ends with the average";
  }
  // The last epoch's own end is not averaged (Lightning's rule): the average differs from it.
  EXPECT_FALSE(final_weights[0].equal(recorder->starts[5][0]));
}

TEST(StochasticWeightAveraging, TrainsWithTheSwalrRatesFromSwaStartOn) {
  ScratchDir dir;
  AveragingNet model(false, /*scheduler=*/true);
  auto swa = std::make_shared<StochasticWeightAveraging>(swa_options({0.02}, int64_t{3}, 2, "cos"));
  auto recorder = std::make_shared<EpochRecorder>();
  volt::Trainer trainer(options_for(dir, 6), {swa, recorder});
  trainer.fit(model, volt::testing::random_loader(48, 8, 5, 8));

  ASSERT_EQ(recorder->rates.size(), 6u);
  // Before SWA: the module's StepLR (0.1 halved every 2 epochs). From epoch 2: SWALR from the
  // rate epoch 2 starts with, replacing the StepLR (which would have halved it again at epoch 4).
  EXPECT_DOUBLE_EQ(recorder->rates[0], 0.1);
  EXPECT_DOUBLE_EQ(recorder->rates[1], 0.1);
  const double start = recorder->rates[2];
  EXPECT_DOUBLE_EQ(start, 0.05);
  for (int64_t j = 0; j < 4; ++j) {
    EXPECT_NEAR(recorder->rates[2 + j], annealed(start, 0.02, j, 2, true), 1e-15) << "SWA epoch " << j;
  }
  EXPECT_DOUBLE_EQ(recorder->rates[5], 0.02);
}

TEST(SWALR, RatesFollowTheAnnealingFormulaPerParameterGroup) {
  auto a = torch::zeros({1}, torch::requires_grad());
  auto b = torch::zeros({1}, torch::requires_grad());
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<at::Tensor>{a}, std::make_unique<torch::optim::SGDOptions>(0.1));
  groups.emplace_back(std::vector<at::Tensor>{b}, std::make_unique<torch::optim::SGDOptions>(0.3));
  for (const std::string strategy : {"cos", "linear"}) {
    torch::optim::SGD opt(groups, torch::optim::SGDOptions(0.1));
    SWALR s(opt, {0.01, 0.05}, 3, strategy);
    for (int64_t k = 0; k < 6; ++k) {
      EXPECT_NEAR(opt.param_groups()[0].options().get_lr(), annealed(0.1, 0.01, k, 3, strategy == "cos"), 1e-15);
      EXPECT_NEAR(opt.param_groups()[1].options().get_lr(), annealed(0.3, 0.05, k, 3, strategy == "cos"), 1e-15);
      s.step();
    }
  }
  torch::optim::SGD opt(groups, torch::optim::SGDOptions(0.1));
  SWALR at_once(opt, {0.01}, 0, "linear");
  EXPECT_DOUBLE_EQ(opt.param_groups()[0].options().get_lr(), 0.01) << "annealing_epochs=0: the SWA rate at once";
  EXPECT_DOUBLE_EQ(opt.param_groups()[1].options().get_lr(), 0.01);
  EXPECT_THROW(SWALR(opt, {0.01, 0.02, 0.03}, 1, "cos"), ConfigError);
  EXPECT_THROW(SWALR(opt, {0.01}, 1, "exp"), ConfigError);
}

// PyTorch's own SWALR (python3-torch) against Volt's: the same doubles, bit for bit.
TEST(SWALR, RatesEqualPyTorchsSwalrBitForBit) {
  const std::string script =
      "import torch\n"
      "from torch.optim.swa_utils import SWALR\n"
      "a = torch.nn.Parameter(torch.zeros(1)); b = torch.nn.Parameter(torch.zeros(1))\n"
      "for strategy, epochs in (('cos', 3), ('linear', 4), ('cos', 0)):\n"
      "    opt = torch.optim.SGD([{'params': [a], 'lr': 0.1}, {'params': [b], 'lr': 0.37}], lr=0.1)\n"
      "    s = SWALR(opt, swa_lr=[0.013, 0.05], anneal_epochs=epochs, anneal_strategy=strategy)\n"
      "    for k in range(7):\n"
      "        print(' '.join(float.hex(g['lr']) for g in opt.param_groups))\n"
      "        opt.step(); s.step()\n";
  FILE* pipe = ::popen(("/usr/bin/python3 -W ignore -c \"" + script + "\" 2>/dev/null").c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  if (::pclose(pipe) != 0 || out.empty()) GTEST_SKIP() << "/usr/bin/python3 with torch (python3-torch) is not here";
  std::istringstream lines(out);
  auto a = torch::zeros({1}, torch::requires_grad());
  auto b = torch::zeros({1}, torch::requires_grad());
  const std::vector<std::pair<std::string, int64_t>> cases{{"cos", 3}, {"linear", 4}, {"cos", 0}};
  for (const auto& [strategy, epochs] : cases) {
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(std::vector<at::Tensor>{a}, std::make_unique<torch::optim::SGDOptions>(0.1));
    groups.emplace_back(std::vector<at::Tensor>{b}, std::make_unique<torch::optim::SGDOptions>(0.37));
    torch::optim::SGD opt(groups, torch::optim::SGDOptions(0.1));
    SWALR s(opt, {0.013, 0.05}, epochs, strategy);
    for (int k = 0; k < 7; ++k) {
      std::string x, y;
      ASSERT_TRUE(static_cast<bool>(lines >> x >> y));
      EXPECT_EQ(opt.param_groups()[0].options().get_lr(), std::strtod(x.c_str(), nullptr))
          << strategy << " " << epochs << " step " << k;
      EXPECT_EQ(opt.param_groups()[1].options().get_lr(), std::strtod(y.c_str(), nullptr))
          << strategy << " " << epochs << " step " << k;
      s.step();
    }
  }
}

TEST(StochasticWeightAveraging, RecomputesBatchNormStatisticsWithOnePassOverTheTrainingData) {
  ScratchDir dir;
  AveragingNet model(/*batch_norm=*/true);
  auto swa = std::make_shared<StochasticWeightAveraging>(swa_options({0.05}, int64_t{2}));
  volt::Trainer trainer(options_for(dir, 3), {swa});
  auto loader = volt::testing::random_loader(48, 8, 9, 8);
  trainer.fit(model, loader);
  EXPECT_EQ(model.train_steps, 3 * 6 + 6) << "three epochs, then one pass over the 6 batches";
  EXPECT_EQ(trainer.global_step(), 18) << "the pass takes no optimizer step";
  EXPECT_EQ(trainer.current_epoch(), 3);

  // Cumulative averages of each batch's statistics of what the averaged fc1 gives.
  std::vector<at::Tensor> means, vars;
  {
    at::NoGradGuard no_grad;
    auto stream = loader->stream(0);
    while (auto batch = stream->next()) {
      at::Tensor h = model.pre_norm((*batch)[0]);
      means.push_back(h.mean(0));
      vars.push_back(h.var(0, /*unbiased=*/true));
    }
  }
  ASSERT_EQ(means.size(), 6u);
  EXPECT_TRUE(model.bn->running_mean.allclose(at::stack(means).mean(0), 1e-5, 1e-6));
  EXPECT_TRUE(model.bn->running_var.allclose(at::stack(vars).mean(0), 1e-5, 1e-6));
  EXPECT_EQ(model.bn->num_batches_tracked.item<int64_t>(), 6);
  ASSERT_TRUE(model.bn->options.momentum().has_value());
  EXPECT_DOUBLE_EQ(*model.bn->options.momentum(), 0.1) << "the momentum is put back after the pass";
  for (size_t i = 0; i < swa->average().size(); ++i) EXPECT_TRUE(model.parameters()[i].equal(swa->average()[i]));
}

/// (step, at the end of its epoch).
class SwaResume : public ::testing::TestWithParam<std::pair<int64_t, bool>> {};

// Checkpoints before SWA starts, mid-epoch inside it, and at an epoch's end inside it.
TEST_P(SwaResume, ResumedFitEndsWithBitwiseTheWeightsOfTheUninterruptedOne) {
  const auto [step, at_epoch_end] = GetParam();
  ScratchDir dir;
  const std::string ckpt = dir.path() + "/mid.ckpt";
  auto loader = [] { return volt::testing::random_loader(48, 8, 13, 8); };
  auto make_swa = [] { return std::make_shared<StochasticWeightAveraging>(swa_options({0.03}, int64_t{3}, 2)); };

  AveragingNet full(/*batch_norm=*/true, /*scheduler=*/true);
  auto swa_full = make_swa();
  volt::Trainer first(options_for(dir, 6),
                      {swa_full, std::make_shared<volt::testing::SaveAtStep>(step, ckpt, at_epoch_end)});
  first.fit(full, loader());

  AveragingNet resumed(true, true);
  auto swa_resumed = make_swa();
  volt::Trainer second(options_for(dir, 6), {swa_resumed});
  second.fit(resumed, loader(), nullptr, ckpt);

  EXPECT_EQ(resumed.train_steps, full.train_steps - step) << "the resumed fit starts after step " << step;
  EXPECT_EQ(swa_resumed->n_averaged(), swa_full->n_averaged());
  volt::testing::expect_bitwise_equal(volt::testing::state_tensors(resumed), volt::testing::state_tensors(full));
}

INSTANTIATE_TEST_SUITE_P(SaveSteps, SwaResume,
                         ::testing::Values(std::make_pair(int64_t{9}, false), std::make_pair(int64_t{15}, false),
                                           std::make_pair(int64_t{18}, true), std::make_pair(int64_t{27}, false)));

TEST(StochasticWeightAveraging, RefusesBadOptionsWithWhatWasGiven) {
  auto message = [](StochasticWeightAveraging::Options o) {
    try {
      StochasticWeightAveraging swa(std::move(o));
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(swa_options({}, 0.8)).find("needs swa_lrs"), std::string::npos);
  EXPECT_NE(message(swa_options({0.0}, 0.8)).find("swa_lrs=[0]"), std::string::npos);
  EXPECT_NE(message(swa_options({0.1, -0.5}, 0.8)).find("swa_lrs=[0.1, -0.5]"), std::string::npos);
  EXPECT_NE(message(swa_options({NAN}, 0.8)).find("finite"), std::string::npos);
  EXPECT_NE(message(swa_options({0.1}, int64_t{0})).find("swa_epoch_start=0"), std::string::npos);
  EXPECT_NE(message(swa_options({0.1}, 1.5)).find("swa_epoch_start=1.5"), std::string::npos);
  EXPECT_NE(message(swa_options({0.1}, 0.8, -1)).find("annealing_epochs=-1"), std::string::npos);
  EXPECT_NE(message(swa_options({0.1}, 0.8, 2, "exp")).find("annealing_strategy='exp'"), std::string::npos);
  EXPECT_EQ(message(swa_options({0.1}, 1.0)), "no error") << "a fraction of 1 is allowed (Lightning)";
}

TEST(StochasticWeightAveraging, RefusesAStartPastMaxEpochsBeforeAnyBatchRuns) {
  ScratchDir dir;
  AveragingNet model;
  auto swa = std::make_shared<StochasticWeightAveraging>(swa_options({0.02}, int64_t{5}));
  volt::Trainer trainer(options_for(dir, 3), {swa});
  try {
    trainer.fit(model, volt::testing::random_loader(16, 8, 1, 8));
    FAIL() << "fit accepted swa_epoch_start=5 with max_epochs=3";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("swa_epoch_start=5 is past max_epochs=3"), std::string::npos) << e.what();
  }
  EXPECT_EQ(model.train_steps, 0);

  volt::TrainerOptions steps_only = volt::testing::quiet_options(dir.path());
  steps_only.max_epochs = -1;
  steps_only.max_steps = 4;
  volt::Trainer unbounded(steps_only, {std::make_shared<StochasticWeightAveraging>(swa_options({0.02}, 0.5))});
  EXPECT_THROW(unbounded.fit(model, volt::testing::random_loader(16, 8, 1, 8)), ConfigError);
  EXPECT_EQ(model.train_steps, 0);
}

TEST(StochasticWeightAveraging, RefusesACheckpointWhoseStateHasAnAverageItDoesNotHold) {
  AveragingNet model;
  volt::testing::FakeTrainerView view(&model);
  StochasticWeightAveraging swa(swa_options({0.02}, int64_t{2}));
  swa.load_state_dict({{"n_averaged", 3}, {"latest_update_epoch", 4}, {"scheduler", nullptr}});
  volt::Checkpoint ckpt;
  ckpt.tensors["swa.average.fc1.weight"] = model.fc1->weight.detach().clone();
  try {
    swa.on_load_checkpoint(view, ckpt);
    FAIL() << "a checkpoint without swa.average.fc1.bias was accepted";
  } catch (const volt::CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("swa.average.fc1.bias"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(swa.average().empty()) << "nothing half-restored";
  ckpt.tensors["swa.average.fc1.bias"] = at::zeros({7});
  EXPECT_THROW(swa.on_load_checkpoint(view, ckpt), volt::CheckpointError) << "a bias of the wrong shape";
  EXPECT_THROW(swa.load_state_dict({{"n_averaged", -1}, {"latest_update_epoch", 0}, {"scheduler", nullptr}}),
               volt::CheckpointError);
}
