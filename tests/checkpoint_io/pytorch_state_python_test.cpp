// Optimizer and LR scheduler state in PyTorch's names, checked by PyTorch itself (Debian's python3-torch).
// Optimizers (optimizer_state.h): SGD with momentum, Adam, AdamW (amsgrad), RMSprop (centered, momentum) and
// Adagrad state that Volt wrote after three steps is accepted by torch.optim's class of the same name
// (load_state_dict), and one more step on the same batch gives the weights Volt's next step gives (within
// 1e-6); LBFGS (its history under the first parameter, 4 iterations a step) within 1e-5. Schedulers
// (lightning_layout.h, pytorch_scheduler_state): every schedule Volt has, stepped a few times in two parameter groups
// and saved in a checkpoint's lr_schedulers, is loaded by torch.optim.lr_scheduler's class of the same name
// (constructed with other settings, so the file's must win), whose entries are exactly PyTorch's, whose get_last_lr is
// Volt's, and whose next steps set the rates Volt's next steps set.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/Context.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/mse_loss.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/lbfgs.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include "support/temp_dir.h"
#include "volt/checkpoint_io/lightning_layout.h"
#include "volt/checkpoint_io/optimizer_state.h"
#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/core/lr_scheduler.h"
#include "support/source_dir.h"

namespace {

namespace fs = std::filesystem;
using volt::testing::TempDir;

const char* kStatePython = "/usr/bin/python3";

bool state_python_has_torch() {
  return fs::exists(kStatePython) && std::system((std::string(kStatePython) + " -c 'import torch' 2>/dev/null").c_str()) == 0;
}

// For each entry: PyTorch's class built with other settings loads Volt's state; its keys are those of the
// class's own state_dict(); its rates now and after each further step are Volt's.
const char* kStateScript = R"(
import math, os, sys, torch
sys.path.insert(0, os.environ["VOLT_CHECK_DIR"])
from torch_load_check import safe_load
S = torch.optim.lr_scheduler
d = safe_load(sys.argv[1])
def make(name, opt):
    if name == "StepLR": return S.StepLR(opt, 99, 0.9)
    if name == "MultiStepLR": return S.MultiStepLR(opt, [50], 0.9)
    if name == "ExponentialLR": return S.ExponentialLR(opt, 0.5)
    if name == "CosineAnnealingLR": return S.CosineAnnealingLR(opt, 99, 0.5)
    if name == "LambdaLR": return S.LambdaLR(opt, lambda e: 1.0 / (1 + e))
    raise AssertionError(name)
for name, state, expected in zip(d["names"], d["lr_schedulers"], d["expected"]):
    p = torch.nn.Parameter(torch.zeros(2))
    q = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([{"params": [p], "lr": 7.0}, {"params": [q], "lr": 7.0}], lr=7.0)
    sched = make(name, opt)
    assert set(state) == set(sched.state_dict()), (name, sorted(state), sorted(sched.state_dict()))
    sched.load_state_dict(state)
    # The optimizer's state (its param_groups) brings the rates, as Lightning restores it before the scheduler.
    for g, lr in zip(opt.param_groups, state["_last_lr"]): g["lr"] = lr
    assert sched.get_last_lr() == state["_last_lr"], (name, sched.get_last_lr(), state["_last_lr"])
    assert sched.last_epoch == state["last_epoch"] and sched.base_lrs == state["base_lrs"], name
    for step, want in enumerate(expected):
        sched.step()
        got = sched.get_last_lr()
        assert all(math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-15) for a, b in zip(got, want)), (name, step, got, want)
print("ok", len(d["names"]))
)";

fs::path check_dir() {
  return volt::testing::source_dir() / "tests" / "checkpoint_io";
}

int run_script(const TempDir& dir, const char* script, const std::string& file) {
  std::ofstream(dir / "check.py") << script;
  const std::string cmd =
      "VOLT_CHECK_DIR='" + check_dir().string() + "' " + std::string(kStatePython) + " " + (dir / "check.py") + " " + file;
  return std::system(cmd.c_str());
}

// Per optimizer: PyTorch's class, built with other options, loads the state; the file's options win; one step.
const char* kOptimizerScript = R"(
import os, sys, torch
sys.path.insert(0, os.environ["VOLT_CHECK_DIR"])
from torch_load_check import safe_load
d = safe_load(sys.argv[1])
O = torch.optim
make = {"SGD": lambda p: O.SGD(p, lr=9.0), "Adam": lambda p: O.Adam(p, lr=9.0), "AdamW": lambda p: O.AdamW(p, lr=9.0),
        "RMSprop": lambda p: O.RMSprop(p, lr=9.0), "Adagrad": lambda p: O.Adagrad(p, lr=9.0),
        "LBFGS": lambda p: O.LBFGS(p, lr=9.0)}
for i, name in enumerate(d["names"]):
    net = torch.nn.Linear(3, 1)
    with torch.no_grad():
        net.weight.copy_(d["volt_tensors"]["case%d.weight" % i])
        net.bias.copy_(d["volt_tensors"]["case%d.bias" % i])
    opt = make[name](net.parameters())
    opt.load_state_dict(d["optimizer_states"][i])
    x = d["volt_tensors"]["case%d.x" % i]
    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(net(x), x.sum(1, keepdim=True))
        loss.backward()
        return loss
    opt.step(closure)
    for k in ["weight", "bias"]:
        want = d["volt_tensors"]["case%d.next_%s" % (i, k)]
        got = getattr(net, k).detach()
        assert torch.allclose(got, want, rtol=0, atol=1e-5 if name == "LBFGS" else 1e-6), (name, k, got, want)
    assert opt.param_groups[0]["lr"] == d["optimizer_states"][i]["param_groups"][0]["lr"], name
print("ok", len(d["names"]))
)";

using MakeOptimizer = std::function<std::shared_ptr<torch::optim::Optimizer>(std::vector<at::Tensor>)>;

TEST(OptimizerStatePython, TorchsOptimizerOfTheSameNameLoadsVoltsStateAndTakesTheSameNextStep) {
  if (!state_python_has_torch()) GTEST_SKIP() << kStatePython << " with torch (python3-torch) is not installed";
  namespace optim = torch::optim;
  const std::vector<std::pair<std::string, MakeOptimizer>> cases = {
      {"SGD",
       [](auto p) {
         return std::make_shared<optim::SGD>(p,
                                             optim::SGDOptions(0.05).momentum(0.9).dampening(0.1).weight_decay(0.01));
       }},
      {"Adam",
       [](auto p) {
         return std::make_shared<optim::Adam>(p, optim::AdamOptions(0.01).betas({0.8, 0.99}).weight_decay(0.01));
       }},
      {"AdamW", [](auto p) { return std::make_shared<optim::AdamW>(p, optim::AdamWOptions(0.01).amsgrad(true)); }},
      {"RMSprop",
       [](auto p) {
         return std::make_shared<optim::RMSprop>(p, optim::RMSpropOptions(0.01).centered(true).momentum(0.5));
       }},
      {"Adagrad",
       [](auto p) {
         return std::make_shared<optim::Adagrad>(
             p, optim::AdagradOptions(0.1).lr_decay(0.01).initial_accumulator_value(0.1));
       }},
      {"LBFGS",
       [](auto p) { return std::make_shared<optim::LBFGS>(p, optim::LBFGSOptions(0.5).max_iter(4).history_size(3)); }},
  };
  volt::Checkpoint c;
  c.meta["names"] = nlohmann::json::array();
  for (size_t i = 0; i < cases.size(); ++i) {
    at::manual_seed(static_cast<uint64_t>(i) + 1);
    torch::nn::Linear net(3, 1);
    auto opt = cases[i].second(net->parameters());
    auto step = [&](const at::Tensor& x) {
      opt->step([&] {
        opt->zero_grad();
        at::Tensor loss = at::mse_loss(net->forward(x), x.sum(1, true));
        loss.backward();
        return loss;
      });
    };
    for (int s = 0; s < 3; ++s) step(at::randn({8, 3}));
    ASSERT_TRUE(volt::checkpoint_io::dump_pytorch_optimizer_state(*opt, i, c)) << cases[i].first;
    // The dump holds the optimizer's own tensors (a save writes them at once); the next step changes them.
    const std::string mine = "optimizer_states." + std::to_string(i) + ".";
    for (auto& [key, t] : c.tensors) {
      if (key.compare(0, mine.size(), mine) == 0) t = t.clone();
    }
    const std::string k = "case" + std::to_string(i) + ".";
    c.tensors[k + "weight"] = net->weight.detach().clone();
    c.tensors[k + "bias"] = net->bias.detach().clone();
    const at::Tensor x = at::randn({8, 3});
    c.tensors[k + "x"] = x;
    step(x);
    c.tensors[k + "next_weight"] = net->weight.detach().clone();
    c.tensors[k + "next_bias"] = net->bias.detach().clone();
    c.meta["names"].push_back(cases[i].first);
  }
  TempDir dir;
  volt::checkpoint_io::TorchCheckpointIO io;
  io.save_checkpoint(c, dir / "o.ckpt");
  ASSERT_EQ(run_script(dir, kOptimizerScript, dir / "o.ckpt"), 0);
}

struct Case {
  std::string name;
  std::function<std::shared_ptr<volt::LRScheduler>(torch::optim::Optimizer&)> make;
};

TEST(SchedulerStatePython, TorchsSchedulerOfTheSameNameLoadsVoltsStateAndSetsTheSameNextRates) {
  if (!state_python_has_torch()) GTEST_SKIP() << kStatePython << " with torch (python3-torch) is not installed";
  const std::vector<Case> cases = {
      {"StepLR", [](auto& o) { return std::make_shared<volt::StepLR>(o, 3, 0.5); }},
      {"MultiStepLR",
       [](auto& o) {
         return std::make_shared<volt::MultiStepLR>(o, std::vector<int64_t>{2, 6, 6}, 0.5);
       }},
      {"ExponentialLR", [](auto& o) { return std::make_shared<volt::ExponentialLR>(o, 0.9); }},
      {"CosineAnnealingLR", [](auto& o) { return std::make_shared<volt::CosineAnnealingLR>(o, 12, 0.001); }},
      {"LambdaLR",
       [](auto& o) { return std::make_shared<volt::LambdaLR>(o, [](int64_t e) { return 1.0 / (1.0 + e); }); }},
  };
  volt::Checkpoint c;
  c.meta["names"] = nlohmann::json::array();
  c.meta["lr_schedulers"] = nlohmann::json::array();
  c.meta["expected"] = nlohmann::json::array();
  for (const auto& k : cases) {
    at::Tensor p = at::zeros({2}).requires_grad_();
    at::Tensor q = at::zeros({1}).requires_grad_();
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(std::vector<at::Tensor>{p}, std::make_unique<torch::optim::SGDOptions>(0.1));
    groups.emplace_back(std::vector<at::Tensor>{q}, std::make_unique<torch::optim::SGDOptions>(0.03));
    torch::optim::SGD opt(std::move(groups), torch::optim::SGDOptions(0.1));
    auto sched = k.make(opt);
    for (int i = 0; i < 5; ++i) sched->step();
    const auto state = volt::checkpoint_io::pytorch_scheduler_state(*sched);
    nlohmann::json next = nlohmann::json::array();
    for (int i = 0; i < 6; ++i) {
      sched->step();
      next.push_back(sched->get_last_lr());
    }
    c.meta["names"].push_back(k.name);
    c.meta["lr_schedulers"].push_back(state);
    c.meta["expected"].push_back(next);
    EXPECT_EQ(state.at("last_epoch"), 5) << k.name;
    EXPECT_EQ(state.at("_step_count"), 6) << k.name;
  }
  EXPECT_EQ(c.meta["lr_schedulers"][0].at("step_size"), 3);
  EXPECT_EQ(c.meta["lr_schedulers"][1].at("milestones"), (nlohmann::json{{"2", 1}, {"6", 2}}));
  TempDir dir;
  volt::checkpoint_io::TorchCheckpointIO io;
  io.save_checkpoint(c, dir / "s.ckpt");
  ASSERT_EQ(run_script(dir, kStateScript, dir / "s.ckpt"), 0);
  // And back: Volt reads the milestones' integer keys.
  const auto back = io.load_checkpoint(dir / "s.ckpt");
  EXPECT_EQ(back.meta.at("lr_schedulers")[1].at("milestones"), (nlohmann::json{{"2", 1}, {"6", 2}}));
}

}  // namespace
