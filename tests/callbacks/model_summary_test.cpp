#include "volt/callbacks/model_summary.h"

#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include "support/fake_trainer_view.h"
#include "volt/core/error.h"

namespace {

using volt::callbacks::ModelSummary;
using volt::callbacks::summarize;

// fc: Linear(10, 5) = 55 params; head: Sequential(Linear(5, 3) = 18, ReLU) = 18.
class TinyModule : public volt::Module {
 public:
  TinyModule() {
    fc = register_module("fc", torch::nn::Linear(10, 5));
    head = register_module("head",
                           torch::nn::Sequential(torch::nn::Linear(5, 3), torch::nn::ReLU()));
  }
  at::Tensor training_step(volt::Batch&, volt::StepContext&) override { return {}; }
  volt::OptimizerConfig configure_optimizers() override { return {}; }

  torch::nn::Linear fc{nullptr};
  torch::nn::Sequential head{nullptr};
};

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(ModelSummary, ListsDirectChildrenWithTypesAndParamCounts) {
  TinyModule module;
  const auto lines = split_lines(summarize(module, 1));
  const std::vector<std::string> expected = {
      "  | Name | Type       | Params",
      "------------------------------",
      "0 | fc   | Linear     | 55",
      "1 | head | Sequential | 18",
      "------------------------------",
      "73        Trainable params",
      "0         Non-trainable params",
      "73        Total params",
      "0.000     Total estimated model params size (MB)",
  };
  EXPECT_EQ(lines, expected) << summarize(module, 1);
}

TEST(ModelSummary, DeeperMaxDepthAddsDottedNestedRows) {
  TinyModule module;
  const std::string text = summarize(module, -1);
  EXPECT_NE(text.find("2 | head.0 | Linear     | 18"), std::string::npos) << text;
  EXPECT_NE(text.find("3 | head.1 | ReLU       | 0"), std::string::npos) << text;
  EXPECT_EQ(summarize(module, 2), text);
}

TEST(ModelSummary, MaxDepthZeroPrintsTotalsOnly) {
  TinyModule module;
  const std::string text = summarize(module, 0);
  EXPECT_EQ(text.find("fc"), std::string::npos) << text;
  EXPECT_NE(text.find("73        Total params"), std::string::npos) << text;
}

TEST(ModelSummary, FrozenParameterCountsAsNonTrainable) {
  TinyModule module;
  module.fc->weight.set_requires_grad(false);  // 50 of fc's 55
  const std::string text = summarize(module, 1);
  EXPECT_NE(text.find("23        Trainable params"), std::string::npos) << text;
  EXPECT_NE(text.find("50        Non-trainable params"), std::string::npos) << text;
  EXPECT_NE(text.find("73        Total params"), std::string::npos) << text;
}

TEST(ModelSummary, SizeUsesEachParameterElementSize) {
  torch::nn::Sequential net(torch::nn::Linear(1000, 1000));  // 1,001,000 params
  EXPECT_NE(summarize(*net, 1).find("4.004     Total estimated model params size (MB)"),
            std::string::npos)
      << summarize(*net, 1);
  EXPECT_NE(summarize(*net, 1).find("1.0 M     Total params"), std::string::npos);
  net->to(at::kDouble);
  EXPECT_NE(summarize(*net, 1).find("8.008     Total estimated"), std::string::npos)
      << summarize(*net, 1);
}

TEST(ModelSummary, SharedParameterIsCountedOnce) {
  torch::nn::Linear shared(10, 5);
  torch::nn::Sequential net(shared, shared);
  EXPECT_NE(summarize(*net, 1).find("55        Total params"), std::string::npos)
      << summarize(*net, 1);
}

TEST(ModelSummary, PrintsAtFitStartOnRankZeroOnly) {
  TinyModule module;
  volt::testing::FakeTrainerView view(&module);
  std::ostringstream out;
  ModelSummary callback(1, &out);
  EXPECT_EQ(callback.state_key(), "ModelSummary");

  view.state_.is_global_zero = false;
  callback.on_fit_start(view);
  EXPECT_EQ(out.str(), "");

  view.state_.is_global_zero = true;
  callback.on_fit_start(view);
  EXPECT_EQ(out.str(), summarize(module, 1));
}

TEST(ModelSummary, RejectsMaxDepthBelowMinusOne) {
  EXPECT_THROW(ModelSummary(-2), volt::ConfigError);
}

}  // namespace
