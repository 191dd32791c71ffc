// fsdp's decisions that need no second process: the flags, the units a wrap policy makes, what a rank
// holds (`volt plan --params`), and the strategy the connector builds. Training on real ranks:
// FSDPStrategy.* in tests/distributed/distributed_test.cpp.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include "support/expect.h"
#include "volt/accelerators/hardware_probe.h"
#include "volt/connectors/accelerator_connector.h"
#include "volt/core/error.h"
#include "volt/core/module.h"
#include "volt/core/sharded_unit.h"
#include "volt/strategies/fsdp_strategy.h"

namespace {

using volt::strategies::FSDPStrategy;
using volt::strategies::ShardingStrategy;

/// embed (Linear 4->64: 320), block0 and block1 (Sequential of Linear 64->64, 4160 each), head (Linear 64->2:
/// 130), and a frozen Linear 2->2.
class Net : public volt::Module {
 public:
  Net() {
    embed = register_module("embed", torch::nn::Linear(4, 64));
    block0 = register_module("block0", torch::nn::Sequential(torch::nn::Linear(64, 64)));
    block1 = register_module("block1", torch::nn::Sequential(torch::nn::Linear(64, 64)));
    head = register_module("head", torch::nn::Linear(64, 2));
    frozen = register_module("frozen", torch::nn::Linear(2, 2));
    for (auto& p : frozen->parameters()) p.set_requires_grad(false);
  }
  at::Tensor training_step(volt::Batch& b, volt::StepContext&) override { return head->forward(b[0]).sum(); }
  volt::OptimizerConfig configure_optimizers() override { return {}; }
  torch::nn::Linear embed{nullptr}, head{nullptr}, frozen{nullptr};
  torch::nn::Sequential block0{nullptr}, block1{nullptr};
};

/// A Linear wrapped with volt::Sharded between two plain ones.
class WrappedNet : public volt::Module {
 public:
  WrappedNet() {
    first = register_module("first", torch::nn::Linear(4, 8));
    middle = register_module("middle", volt::Sharded<torch::nn::LinearImpl>(8, 8));
    last = register_module("last", torch::nn::Linear(8, 2));
  }
  at::Tensor training_step(volt::Batch& b, volt::StepContext&) override { return last(middle(first(b[0]))).sum(); }
  volt::OptimizerConfig configure_optimizers() override { return {}; }
  torch::nn::Linear first{nullptr}, last{nullptr};
  volt::Sharded<torch::nn::LinearImpl> middle{nullptr};
};

std::shared_ptr<volt::strategies::Strategy> fsdp_on_two_ranks(const std::string& policy = "") {
  volt::TrainerOptions o;
  o.accelerator = "cpu";
  o.strategy = "fsdp";
  o.devices = "2";
  o.fsdp_auto_wrap_policy = policy;
  auto hw = volt::accelerators::HardwareProbe::assume("cpu", volt::Environ());
  hw.cpu_cores = 4;
  return volt::connectors::AcceleratorConnector(o, volt::Environ(), hw).create_strategy();
}

std::map<std::string, std::vector<std::string>> units(const std::string& policy) {
  Net net;
  std::map<std::string, std::vector<std::string>> out;
  for (auto& [name, params] : FSDPStrategy::wrap_units(net, policy)) out[name] = params;
  return out;
}

}  // namespace

TEST(FSDPFlags, ShardingStrategiesAreLightningsNamesInAnyCase) {
  EXPECT_EQ(volt::strategies::parse_sharding_strategy("FULL_SHARD"), ShardingStrategy::kFullShard);
  EXPECT_EQ(volt::strategies::parse_sharding_strategy("shard_grad_op"), ShardingStrategy::kShardGradOp);
  EXPECT_EQ(volt::strategies::parse_sharding_strategy("No_Shard"), ShardingStrategy::kNoShard);
  EXPECT_TRUE(volt::testing::mentions(volt::testing::error_message<volt::ConfigError>([&] { volt::strategies::parse_sharding_strategy("HYBRID_SHARD"); }), {"fsdp.sharding_strategy='HYBRID_SHARD' is not known. Use FULL_SHARD"}));
  for (const std::string bad : {"size:", "size:-3", "size:1e5", "class:", "class:Linear,", "module:Linear", "all"}) {
    EXPECT_THROW(volt::strategies::check_auto_wrap_policy(bad), volt::ConfigError) << bad;
  }
  EXPECT_NO_THROW(volt::strategies::check_auto_wrap_policy(""));
  EXPECT_NO_THROW(volt::strategies::check_auto_wrap_policy("size:100000"));
  EXPECT_NO_THROW(volt::strategies::check_auto_wrap_policy("class:Linear,torch::nn::SequentialImpl"));
}

TEST(FSDPUnits, NoPolicyIsOneUnitOfEveryTrainableParameterInRegistrationOrder) {
  const auto u = units("");
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u.at(""), (std::vector<std::string>{"embed.weight", "embed.bias", "block0.0.weight", "block0.0.bias",
                                                "block1.0.weight", "block1.0.bias", "head.weight", "head.bias"}));
}

TEST(FSDPUnits, ASizePolicyWrapsTheInnermostSubmodulesThatReachIt) {
  // 4160 >= 1000: each block's Linear ("block0.0") takes its parameters before its Sequential could.
  const auto u = units("size:1000");
  ASSERT_EQ(u.size(), 3u);
  EXPECT_EQ(u.at("block0.0"), (std::vector<std::string>{"block0.0.weight", "block0.0.bias"}));
  EXPECT_EQ(u.at("block1.0"), (std::vector<std::string>{"block1.0.weight", "block1.0.bias"}));
  EXPECT_EQ(u.at(""), (std::vector<std::string>{"embed.weight", "embed.bias", "head.weight", "head.bias"}));
  EXPECT_EQ(units("size:300").size(), 4u) << "embed (320) too; head (130) stays with the root";
  EXPECT_EQ(units("size:5000").size(), 1u) << "nothing reaches 5000";
}

TEST(FSDPUnits, AClassPolicyTakesShortOrFullClassNamesAndLeavesTheRestToTheRoot) {
  const auto seq = units("class:Sequential");
  ASSERT_EQ(seq.size(), 3u);
  EXPECT_EQ(seq.at("block1"), (std::vector<std::string>{"block1.0.weight", "block1.0.bias"}));
  EXPECT_EQ(units("class:torch::nn::SequentialImpl"), seq);
  const auto lin = units("class:Linear");
  EXPECT_EQ(lin.size(), 4u) << "embed, block0.0, block1.0, head; the frozen Linear has nothing trainable";
  EXPECT_EQ(lin.count(""), 0u) << "nothing left for the root";
}

TEST(FSDPUnits, APolicyThatWrapsNothingIsRefusedNamingTheClassesAndTheLargestSubmodule) {
  Net net;
  volt::TrainerOptions o;
  o.accelerator = "cpu";
  o.strategy = "fsdp";
  o.devices = "2";
  o.fsdp_auto_wrap_policy = "size:100000";
  auto hw = volt::accelerators::HardwareProbe::assume("cpu", volt::Environ());
  hw.cpu_cores = 4;
  auto strategy = volt::connectors::AcceleratorConnector(o, volt::Environ(), hw).create_strategy();
  ASSERT_NE(dynamic_cast<FSDPStrategy*>(strategy.get()), nullptr);
  EXPECT_TRUE(volt::testing::mentions(volt::testing::error_message<volt::ConfigError>([&] { strategy->check_module(net); }), {"fsdp.auto_wrap_policy='size:100000' wraps none of the submodules"}));
  EXPECT_TRUE(volt::testing::mentions(volt::testing::error_message<volt::ConfigError>([&] { strategy->check_module(net); }), {"Linear, Sequential"}));
  EXPECT_TRUE(volt::testing::mentions(volt::testing::error_message<volt::ConfigError>([&] { strategy->check_module(net); }), {"the largest holds 4160"}));
}

TEST(FSDPPlan, WhatARankHoldsUnderEachStrategy) {
  using volt::strategies::rank_memory;
  // 1001 float32 parameters with Adam on 2 ranks: pieces of 501 elements (one padded).
  const auto full = rank_memory("fsdp", ShardingStrategy::kFullShard, 2, 1001, 4, 2);
  EXPECT_EQ(full.parameters, 2004);
  EXPECT_EQ(full.gradients, 2004);
  EXPECT_EQ(full.optimizer_state, 4008);
  const auto grad_op = rank_memory("fsdp", ShardingStrategy::kShardGradOp, 2, 1001, 4, 2);
  EXPECT_EQ(grad_op.parameters, 4008) << "whole parameters, padded";
  EXPECT_EQ(grad_op.gradients, 2004);
  const auto ddp = rank_memory("ddp", ShardingStrategy::kFullShard, 2, 1001, 4, 2);
  EXPECT_EQ(ddp.total(), 4 * 1001 * 4);
  EXPECT_EQ(ddp.communication_buffers, 4004) << "the Reducer's buckets";
  EXPECT_EQ(rank_memory("ddp", ShardingStrategy::kFullShard, 2, 1001, 4, 2, true).communication_buffers, 0);
  EXPECT_EQ(rank_memory("fsdp", ShardingStrategy::kNoShard, 2, 1001, 4, 2).total(), ddp.total());
  EXPECT_EQ(rank_memory("single_device", ShardingStrategy::kFullShard, 1, 1001, 2, 0).total(), 2 * 1001 * 2);
}

TEST(FSDPPlan, TheConnectorRefusesOneProcessAndWarnsThatCommHooksDoNotApply) {
  volt::TrainerOptions o;
  o.accelerator = "cpu";
  o.strategy = "fsdp";
  o.devices = "1";
  auto hw = volt::accelerators::HardwareProbe::assume("cpu", volt::Environ());
  hw.cpu_cores = 4;
  EXPECT_TRUE(volt::testing::mentions(volt::testing::error_message<volt::ConfigError>([&] { (void)volt::connectors::AcceleratorConnector(o, volt::Environ(), hw); }), {"strategy='fsdp' shards the model over several processes, but devices=1"}));
  o.devices = "2";
  o.ddp_comm_hook = "fp16";
  o.fsdp_sharding_strategy = "shard_grad_op";
  volt::connectors::AcceleratorConnector connector(o, volt::Environ(), hw);
  EXPECT_EQ(connector.plan().fsdp.sharding_strategy, ShardingStrategy::kShardGradOp);
  bool warned = false;
  for (const auto& w : connector.plan().warnings) warned = warned || w.find("ddp.comm_hook='fp16' has no effect") == 0;
  EXPECT_TRUE(warned);
}

TEST(FSDPUnits, AModuleWrappedWithShardedIsAUnitUnderAnyPolicy) {
  WrappedNet net;
  std::map<std::string, std::vector<std::string>> u;
  for (auto& [name, params] : FSDPStrategy::wrap_units(net, "")) u[name] = params;
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u.at("middle"), (std::vector<std::string>{"middle.weight", "middle.bias"})) << "its names stay a Linear's";
  EXPECT_EQ(u.at(""), (std::vector<std::string>{"first.weight", "first.bias", "last.weight", "last.bias"}));
  u.clear();
  for (auto& [name, params] : FSDPStrategy::wrap_units(net, "size:1000")) u[name] = params;
  EXPECT_EQ(u.size(), 2u) << "72 elements do not reach size:1000, but the wrapper makes it a unit";
  // Without a strategy that shards, the wrapper is the module itself.
  torch::manual_seed(3);
  torch::nn::Linear plain(8, 8);
  torch::manual_seed(3);
  volt::Sharded<torch::nn::LinearImpl> wrapped(8, 8);
  const at::Tensor x = torch::randn({5, 8});
  EXPECT_TRUE(torch::equal(plain(x), wrapped(x)));
  EXPECT_FALSE(wrapped->has_unit_hooks());
  // An empty policy with a wrapped module is not "a policy that wraps nothing".
  EXPECT_NO_THROW(fsdp_on_two_ranks()->check_module(net));
}

TEST(FSDPUnits, TiedWeightsAreRefusedNamingBothParameters) {
  WrappedNet net;
  net.first->register_parameter("tied", net.last->weight);  // the same tensor under two names
  const std::string message = volt::testing::error_message<volt::NotSupportedError>(
      [&] { fsdp_on_two_ranks()->check_module(net); });
  EXPECT_TRUE(volt::testing::mentions(message, {"first.tied and last.weight", "tied weights", "NO_SHARD"})) << message;
}
