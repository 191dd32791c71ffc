// Checkpoints both ways with PyTorch Lightning 2.2.5 (../shared/oracle, on Debian's python3-torch), issue 17:
// a fit Volt checkpointed after 2 epochs is continued to 4 epochs by Lightning's Trainer.fit(ckpt_path=...),
// and one Lightning checkpointed is continued by Volt's fit(ckpt_path=...). Each continuation starts at epoch
// 2 and step 6 and ends with the weights the other side reaches from the same file (float tolerance: two
// implementations of the same optimizer), for SGD with momentum and an epoch StepLR, Adam with a step StepLR
// and AdamW. Lightning's load_from_checkpoint reads Volt's file, and torch.load(weights_only=True) does
// (tests/checkpoint_io/torch_load_check.py says what that means on torch 1.13). Files are made at test time.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <ATen/ops/arange.h>
#include <ATen/ops/mse_loss.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <nlohmann/json.hpp>

#include "support/boring_module.h"
#include "volt/checkpoint_io/optimizer_state.h"
#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/checkpoint_io/weights_file.h"
#include "volt/core/lr_scheduler.h"
#include "volt/core/seed.h"
#include "volt/data/dataloader.h"
#include "volt/data/dataset.h"
#include "volt/trainer/trainer.h"
#include "support/oracle.h"
#include "support/source_dir.h"

namespace {

namespace fs = std::filesystem;
using volt::testing::ScratchDir;

const char* kRoundTripPython = "/usr/bin/python3";

fs::path source_dir() {
  return volt::testing::source_dir();
}

bool roundtrip_python_has_torch() {
  static const bool has =
      fs::exists(kRoundTripPython) && std::system((std::string(kRoundTripPython) + " -c 'import torch' 2>/dev/null").c_str()) == 0;
  return has;
}

/// Lightning's PYTHONPATH (the oracle unpacked once, under a lock: ctest runs tests in parallel), or "".
using volt::testing::oracle_pythonpath;

// The module on both sides: fc = Linear(4, 2), MSE loss, the optimizer and schedule named by `opt`.
const char* kRoundTripScript = R"(
import json, os, sys
import torch
from torch import nn
sys.path.insert(0, os.environ["VOLT_CHECK_DIR"])
import compat  # noqa: F401  (../shared/oracle)
import lightning.pytorch as pl
from torch_load_check import safe_load

mode, opt, ckpt, out = sys.argv[1:5]
torch.set_num_threads(1)
x = torch.arange(48, dtype=torch.float32).reshape(12, 4) / 48
y = x[:, :2] * 2 - x[:, 2:]
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=4)

class Net(pl.LightningModule):
    def __init__(self, opt="sgd"):
        super().__init__()
        self.save_hyperparameters()
        self.fc = nn.Linear(4, 2)
    def training_step(self, batch, i):
        return nn.functional.mse_loss(self.fc(batch[0]), batch[1])
    def configure_optimizers(self):
        o = self.hparams.opt
        if o == "sgd":
            op = torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)
            return [op], [torch.optim.lr_scheduler.StepLR(op, 1, 0.5)]
        if o == "adam":
            op = torch.optim.Adam(self.parameters(), lr=0.01)
            return {"optimizer": op, "lr_scheduler": {"scheduler": torch.optim.lr_scheduler.StepLR(op, 2, 0.5),
                                                        "interval": "step"}}
        return torch.optim.AdamW(self.parameters(), lr=0.01, weight_decay=0.1)

class Starts(pl.Callback):
    def on_train_start(self, trainer, module):
        self.start = {"epoch": trainer.current_epoch, "step": trainer.global_step,
                      "lr": trainer.optimizers[0].param_groups[0]["lr"]}

def trainer(epochs, callbacks=()):
    return pl.Trainer(max_epochs=epochs, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False, callbacks=list(callbacks), accelerator="cpu", devices=1)

if mode == "write":  # Lightning trains 2 epochs and writes the checkpoint Volt continues
    torch.manual_seed(5)
    if out == "callback":  # ModelCheckpoint's file of the last epoch, saved in the epoch's end hooks
        folder = os.path.dirname(ckpt)
        cb = pl.callbacks.ModelCheckpoint(dirpath=folder, filename="end-{epoch}")
        t = pl.Trainer(max_epochs=2, logger=False, enable_progress_bar=False, enable_model_summary=False,
                       callbacks=[cb], accelerator="cpu", devices=1)
        t.fit(Net(opt), loader)
        os.replace(os.path.join(folder, "end-epoch=1.ckpt"), ckpt)
    else:  # Trainer.save_checkpoint after fit
        t = trainer(2)
        t.fit(Net(opt), loader)
        t.save_checkpoint(ckpt)
    sys.exit(0)

# mode "continue": check the file, then continue it to 4 epochs with Lightning
ck = safe_load(ckpt)
for key in ["epoch", "global_step", "pytorch-lightning_version", "state_dict", "loops", "callbacks",
            "optimizer_states", "lr_schedulers", "hyper_parameters"]:
    assert key in ck, key
assert isinstance(ck["state_dict"], dict) and all(torch.is_tensor(v) for v in ck["state_dict"].values())
state = ck["optimizer_states"][0]
assert state["param_groups"][0]["params"] == [0, 1], state["param_groups"]
names = {"sgd": {"momentum_buffer"}, "adam": {"step", "exp_avg", "exp_avg_sq"},
         "adamw": {"step", "exp_avg", "exp_avg_sq"}}[opt]
assert set(state["state"][0].keys()) == names, state["state"][0].keys()
loaded = Net.load_from_checkpoint(ckpt)
assert loaded.hparams.opt == opt, loaded.hparams
for k, v in ck["state_dict"].items():
    assert torch.equal(loaded.state_dict()[k], v), k
starts = Starts()
net = Net(opt)
t = trainer(4, [starts])
t.fit(net, loader, ckpt_path=ckpt)
result = {"start": starts.start, "end_step": t.global_step, "end_epoch": t.current_epoch}
torch.save({k: v.detach().clone() for k, v in net.state_dict().items()}, out + ".pt")
with open(out, "w") as f:
    json.dump(result, f)
)";

class RoundTripNet : public volt::Module {
 public:
  explicit RoundTripNet(std::string opt) : opt_(std::move(opt)) {
    fc = register_module("fc", torch::nn::Linear(4, 2));
    save_hyperparameters({{"opt", opt_}});
  }
  at::Tensor training_step(volt::Batch& b, volt::StepContext&) override {
    return at::mse_loss(fc->forward(b[0]), b[1]);
  }
  volt::OptimizerConfig configure_optimizers() override {
    if (opt_ == "sgd") {
      auto o = std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
      return {o, volt::LRSchedulerConfig{std::make_shared<volt::StepLR>(*o, 1, 0.5), volt::Interval::kEpoch}};
    }
    if (opt_ == "adam") {
      auto o = std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(0.01));
      return {o, volt::LRSchedulerConfig{std::make_shared<volt::StepLR>(*o, 2, 0.5), volt::Interval::kStep}};
    }
    return std::make_shared<torch::optim::AdamW>(parameters(), torch::optim::AdamWOptions(0.01).weight_decay(0.1));
  }
  torch::nn::Linear fc{nullptr};

 private:
  std::string opt_;
};

std::shared_ptr<volt::data::DataLoader> loader() {
  const at::Tensor x = at::arange(48, at::kFloat).reshape({12, 4}) / 48;
  const at::Tensor y = x.slice(1, 0, 2) * 2 - x.slice(1, 2, 4);
  volt::data::DataLoaderOptions o;
  o.batch_size = 4;
  return std::make_shared<volt::data::DataLoader>(
      std::make_shared<volt::data::TensorDataset>(std::vector<at::Tensor>{x, y}), o);
}

/// Records where the fit starts.
class Starts : public volt::callbacks::Callback {
 public:
  std::string state_key() const override { return "Starts"; }
  void on_train_start(volt::TrainerView& view) override {
    epoch = view.state().current_epoch;
    step = view.state().global_step;
    lr = view.optimizers()[0]->param_groups()[0].options().get_lr();
  }
  int64_t epoch = -1, step = -1;
  double lr = -1;
};

volt::TrainerOptions options(const std::string& root, int64_t epochs) {
  auto o = volt::testing::quiet_options(root);
  o.max_epochs = epochs;
  return o;
}

std::string python(const std::string& pythonpath, const std::string& args) {
  return "VOLT_CHECK_DIR='" + (source_dir() / "tests" / "checkpoint_io").string() + "' PYTHONPATH='" + pythonpath +
         "' PYTHONDONTWRITEBYTECODE=1 " + kRoundTripPython + " " + args + " > /dev/null 2>&1";
}

void expect_close(const at::Tensor& a, const at::Tensor& b, const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  EXPECT_TRUE(a.allclose(b, /*rtol=*/1e-5, /*atol=*/1e-6)) << what << "\n" << a << "\n" << b;
}

class LightningRoundTrip : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (!roundtrip_python_has_torch()) GTEST_SKIP() << kRoundTripPython << " with torch (python3-torch) is not installed";
    pythonpath_ = oracle_pythonpath();
    if (pythonpath_.empty()) GTEST_SKIP() << "Lightning 2.2.5 (../shared/oracle) is not there";
    std::ofstream(dir_.path() + "/roundtrip.py") << kRoundTripScript;
  }
  ScratchDir dir_;
  std::string pythonpath_;
};

TEST_P(LightningRoundTrip, LightningContinuesVoltsCheckpointAtItsEpochAndStepAsVoltDoes) {
  const std::string opt = GetParam();
  volt::seed_everything(5);
  RoundTripNet first(opt);
  const std::string ckpt = dir_.path() + "/volt.ckpt";
  {
    volt::Trainer t(options(dir_.path() + "/a", 2));
    t.fit(first, loader());
    t.save_checkpoint(ckpt);
  }
  if (const char* keep = std::getenv("VOLT_KEEP_CHECKPOINT"))
    fs::copy_file(ckpt, keep, fs::copy_options::overwrite_existing);
  const std::string out = dir_.path() + "/lightning.json";
  const std::string cmd = python(pythonpath_, dir_.path() + "/roundtrip.py continue " + opt + " " + ckpt + " " + out);
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const nlohmann::json got = nlohmann::json::parse(std::ifstream(out));
  EXPECT_EQ(got["start"]["epoch"], 2) << got;
  EXPECT_EQ(got["start"]["step"], 6) << got;
  EXPECT_EQ(got["end_step"], 12) << got;
  // Volt continues the same file; both reach the same weights.
  RoundTripNet second(opt);
  Starts* starts = nullptr;
  {
    auto cb = std::make_shared<Starts>();
    starts = cb.get();
    volt::Trainer t(options(dir_.path() + "/b", 4), {cb});
    t.fit(second, loader(), nullptr, ckpt);
    EXPECT_EQ(starts->epoch, 2);
    EXPECT_EQ(starts->step, 6);
    EXPECT_DOUBLE_EQ(starts->lr, got["start"]["lr"].get<double>());
  }
  const auto lightning = volt::checkpoint_io::read_weights_file(out + ".pt").state_dict;
  expect_close(second.fc->weight.detach(), lightning.at("fc.weight"), "fc.weight");
  expect_close(second.fc->bias.detach(), lightning.at("fc.bias"), "fc.bias");
}

void volt_continues(const std::string& dir, const std::string& pythonpath, const std::string& opt,
                    const std::string& how) {
  const std::string ckpt = dir + "/lightning.ckpt";
  const std::string write = python(pythonpath, dir + "/roundtrip.py write " + opt + " " + ckpt + " " + how);
  ASSERT_EQ(std::system(write.c_str()), 0) << write;
  // Lightning's own continuation of its file.
  const std::string out = dir + "/lightning.json";
  const std::string cont = python(pythonpath, dir + "/roundtrip.py continue " + opt + " " + ckpt + " " + out);
  ASSERT_EQ(std::system(cont.c_str()), 0) << cont;
  const nlohmann::json got = nlohmann::json::parse(std::ifstream(out));
  ASSERT_EQ(got["start"]["step"], 6) << got;

  RoundTripNet net(opt);
  auto starts = std::make_shared<Starts>();
  volt::Trainer t(options(dir + "/v-" + how, 4), {starts});
  t.fit(net, loader(), nullptr, ckpt);
  EXPECT_EQ(starts->epoch, 2);
  EXPECT_EQ(starts->step, 6);
  EXPECT_DOUBLE_EQ(starts->lr, got["start"]["lr"].get<double>());
  EXPECT_EQ(t.state().global_step, 12);
  const auto lightning = volt::checkpoint_io::read_weights_file(out + ".pt").state_dict;
  expect_close(net.fc->weight.detach(), lightning.at("fc.weight"), "fc.weight");
  expect_close(net.fc->bias.detach(), lightning.at("fc.bias"), "fc.bias");
}

TEST_P(LightningRoundTrip, VoltContinuesLightningsCheckpointAtItsEpochAndStepAsLightningDoes) {
  volt_continues(dir_.path(), pythonpath_, GetParam(), "save");
}

TEST_P(LightningRoundTrip, VoltContinuesLightningsModelCheckpointFileOfAnEpochsEndAsLightningDoes) {
  volt_continues(dir_.path(), pythonpath_, GetParam(), "callback");
}

INSTANTIATE_TEST_SUITE_P(Optimizers, LightningRoundTrip, ::testing::Values("sgd", "adam", "adamw"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
