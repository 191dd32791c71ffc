// Weights alone into a module (issue 17): from a torch.save(model.state_dict()) file, a .safetensors file and
// a Lightning .ckpt, all written by Python at test time (Debian's python3-torch; Lightning 2.2.5 from
// ../shared/oracle), and format detection for each. A Python model with the same names gives the same
// predictions as the Volt module after the load, bit for bit.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <ATen/ops/arange.h>
#include <ATen/ops/relu.h>
#include <gtest/gtest.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include "support/expect.h"
#include "support/temp_dir.h"
#include "volt/checkpoint_io/load_weights.h"
#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/checkpoint_io/weights_file.h"
#include "volt/core/error.h"
#include "support/oracle.h"

namespace fs = std::filesystem;
using volt::checkpoint_io::FileFormat;
using volt::checkpoint_io::load_weights;
using volt::checkpoint_io::read_weights_file;
using volt::testing::error_message;
using volt::testing::mentions;

namespace {

const char* kWeightsPython = "/usr/bin/python3";

// The model on both sides: fc2(relu(fc1(x))), 4 -> 8 -> 3 (fc2's width can be changed to make shapes differ).
struct Net : torch::nn::Module {
  explicit Net(int64_t out = 3) {
    fc1 = register_module("fc1", torch::nn::Linear(4, 8));
    fc2 = register_module("fc2", torch::nn::Linear(8, out));
  }
  at::Tensor forward(const at::Tensor& x) { return fc2->forward(at::relu(fc1->forward(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

const char* kWeightsScript = R"(
import json, os, struct, sys
import torch
from torch import nn
out = sys.argv[1]
torch.set_num_threads(1)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 3)
    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))
x = torch.randn(5, 4, generator=torch.Generator().manual_seed(1))
torch.manual_seed(2)
net = Net()
torch.save(net.state_dict(), os.path.join(out, "sd.pt"))
predictions = {"x": x, "y_sd": net(x).detach()}
# safetensors, written by hand as the format's spec says: header length, JSON header, little-endian bytes.
torch.manual_seed(3)
net = Net()
header, blobs, at = {}, [], 0
for name, t in net.state_dict().items():
    b = t.contiguous().numpy().tobytes()
    header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [at, at + len(b)]}
    blobs.append(b)
    at += len(b)
h = json.dumps(header).encode()
h += b" " * (-len(h) % 8)
with open(os.path.join(out, "w.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
predictions["y_st"] = net(x).detach()
torch.save({"only": torch.ones(2)}, os.path.join(out, "one.pt"))  # a one-entry dict: SETITEM
try:
    import compat  # noqa: F401  (../shared/oracle)
    import lightning.pytorch as pl
except ImportError:
    pl = None
if pl is not None:
    class Lit(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = Net()
        def training_step(self, batch, i):
            return self.model(batch[0]).pow(2).mean()
        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)
    torch.manual_seed(4)
    lit = Lit()
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 4)), batch_size=4)
    trainer = pl.Trainer(max_steps=3, logger=False, enable_progress_bar=False, enable_model_summary=False,
                         enable_checkpointing=False, default_root_dir=out)
    trainer.fit(lit, data)
    trainer.save_checkpoint(os.path.join(out, "lit.ckpt"))
    predictions["y_lit"] = lit.model(x).detach()
torch.save(predictions, os.path.join(out, "predictions.pt"))
)";

bool weights_python_has_torch() {
  static const bool has =
      fs::exists(kWeightsPython) && std::system((std::string(kWeightsPython) + " -c 'import torch' 2>/dev/null").c_str()) == 0;
  return has;
}

/// Lightning's PYTHONPATH from ../shared/oracle (unpacked once into the test's folder), or "" without it.
using volt::testing::oracle_available;
using volt::testing::oracle_pythonpath;

/// The files the script writes, made once for all tests of this file.
class PythonWeights : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!weights_python_has_torch()) return;
    dir_ = std::make_unique<volt::testing::TempDir>("volt_weights");
    std::ofstream(dir_->file("make.py")) << kWeightsScript;
    const std::string path = oracle_pythonpath();
    const std::string cmd = (path.empty() ? std::string() : "PYTHONPATH='" + path + "' ") + kWeightsPython + " " +
                            dir_->file("make.py") + " " + dir_->str() + " > " + dir_->file("make.log") + " 2>&1";
    made_ = std::system(cmd.c_str()) == 0;
  }
  static void TearDownTestSuite() { dir_.reset(); }
  void SetUp() override {
    if (!weights_python_has_torch()) GTEST_SKIP() << kWeightsPython << " with torch (python3-torch) is not installed";
    ASSERT_TRUE(made_) << "the Python script failed; see " << dir_->file("make.log");
  }
  static std::string file(const std::string& name) { return dir_->file(name); }
  static at::Tensor prediction(const std::string& key) {
    return read_weights_file(file("predictions.pt")).state_dict.at(key);
  }
  static bool has_lightning() { return fs::exists(file("lit.ckpt")); }

  static std::unique_ptr<volt::testing::TempDir> dir_;
  static bool made_;
};

std::unique_ptr<volt::testing::TempDir> PythonWeights::dir_;
bool PythonWeights::made_ = false;

}  // namespace

TEST_F(PythonWeights, ATorchSaveStateDictReproducesPythonsPredictionsExactly) {
  Net net;
  at::NoGradGuard no_grad;
  const auto before = net.forward(prediction("x"));
  const auto report = load_weights(net, file("sd.pt"));
  EXPECT_EQ(report.format, FileFormat::kTorchStateDict);
  EXPECT_TRUE(report.clean()) << report.describe();
  EXPECT_EQ(report.loaded.size(), 4u);
  EXPECT_FALSE(before.equal(prediction("y_sd")));
  EXPECT_TRUE(net.forward(prediction("x")).equal(prediction("y_sd")));
}

TEST_F(PythonWeights, ASafetensorsFileReproducesPythonsPredictionsExactly) {
  Net net;
  at::NoGradGuard no_grad;
  EXPECT_EQ(load_weights(net, file("w.safetensors")).format, FileFormat::kSafetensors);
  EXPECT_TRUE(net.forward(prediction("x")).equal(prediction("y_st")));
}

TEST_F(PythonWeights, ALightningCheckpointLoadsWithItsModelPrefixStripped) {
  if (!has_lightning()) {
    ASSERT_FALSE(oracle_available()) << "../shared/oracle is there but the script wrote no lit.ckpt; see "
                                     << file("make.log");
    GTEST_SKIP() << "Lightning (../shared/oracle) is not available";
  }
  Net net;
  // Lightning names the weights after the LightningModule's attribute: strict without a map names them all.
  const std::string msg = error_message<volt::CheckpointError>([&] { load_weights(net, file("lit.ckpt")); });
  EXPECT_TRUE(mentions(msg, {"lit.ckpt", "Lightning checkpoint", "missing in the file [fc1.bias, fc1.weight",
                             "unexpected in the file [model.fc1.bias", "strip_prefix", "Nothing was loaded"}));
  volt::checkpoint_io::LoadWeightsOptions options;
  options.key_map = volt::checkpoint_io::strip_prefix("model.");
  const auto report = load_weights(net, file("lit.ckpt"), options);
  EXPECT_EQ(report.format, FileFormat::kLightningCheckpoint);
  EXPECT_TRUE(report.clean()) << report.describe();
  at::NoGradGuard no_grad;
  EXPECT_TRUE(net.forward(prediction("x")).equal(prediction("y_lit")));
}

TEST_F(PythonWeights, ALightningCheckpointIsDetectedAndDescribed) {
  if (!has_lightning()) {
    ASSERT_FALSE(oracle_available()) << "../shared/oracle is there but the script wrote no lit.ckpt; see "
                                     << file("make.log");
    GTEST_SKIP() << "Lightning (../shared/oracle) is not available";
  }
  const auto f = read_weights_file(file("lit.ckpt"));
  EXPECT_EQ(f.format, FileFormat::kLightningCheckpoint);
  EXPECT_EQ(f.info.at("global_step"), 3);
  EXPECT_EQ(f.info.at("pytorch-lightning_version"), "2.2.5");
  EXPECT_EQ(f.state_dict.count("model.fc2.weight"), 1u);
  EXPECT_TRUE(f.info.at("optimizer_states").is_array()) << f.info.dump();
}

TEST_F(PythonWeights, MisShapedNamesAreListedWithBothShapesAndNothingIsCopied) {
  Net net(/*out=*/4);
  const auto before = net.fc1->weight.clone();
  const std::string msg = error_message<volt::CheckpointError>([&] { load_weights(net, file("sd.pt")); });
  EXPECT_TRUE(mentions(msg, {"sd.pt",
                             "shape differs [fc2.bias (module [4], file [3]), fc2.weight (module [4, 8], "
                             "file [3, 8])]"}));
  EXPECT_TRUE(net.fc1->weight.equal(before)) << "a refused strict load copied weights";
}

TEST_F(PythonWeights, ANonStrictLoadCopiesWhatFitsAndReportsTheRest) {
  Net net(/*out=*/4);
  volt::checkpoint_io::LoadWeightsOptions options;
  options.strict = false;
  const auto report = load_weights(net, file("sd.pt"), options);
  EXPECT_FALSE(report.clean());
  EXPECT_EQ(report.loaded, (std::vector<std::string>{"fc1.weight", "fc1.bias"}));
  ASSERT_EQ(report.mismatched.size(), 2u);
  EXPECT_EQ(report.mismatched[0].expected, "[4, 8]");
  EXPECT_EQ(report.mismatched[0].got, "[3, 8]");
  EXPECT_TRUE(net.fc1->weight.equal(read_weights_file(file("sd.pt")).state_dict.at("fc1.weight")));
}

TEST_F(PythonWeights, KeysMappedOntoOneNameAreRefused) {
  Net net;
  volt::checkpoint_io::LoadWeightsOptions options;
  options.key_map = [](const std::string&) { return std::string("fc1.weight"); };
  EXPECT_TRUE(mentions(error_message<volt::CheckpointError>([&] { load_weights(net, file("sd.pt"), options); }),
                       {"the same name 'fc1.weight'"}));
}

TEST_F(PythonWeights, APythonOneEntryDictIsRead) {
  const auto f = read_weights_file(file("one.pt"));
  EXPECT_EQ(f.format, FileFormat::kTorchStateDict);
  EXPECT_TRUE(f.state_dict.at("only").equal(at::ones({2})));
}

TEST(WeightsFile, AVoltCheckpointIsDetectedAndItsStateDictRead) {
  volt::testing::TempDir dir;
  volt::Checkpoint c;
  c.tensors["state_dict.fc.weight"] = at::arange(6, at::kFloat).reshape({2, 3});
  c.tensors["rng.cpu"] = at::zeros({4}, at::kByte);
  c.meta = {{"format_version", 1}, {"epoch", 3}};
  volt::checkpoint_io::TorchCheckpointIO().save_checkpoint(c, dir / "v.ckpt");
  const auto f = read_weights_file(dir / "v.ckpt");
  EXPECT_EQ(f.format, FileFormat::kVoltCheckpoint);
  ASSERT_EQ(f.state_dict.size(), 1u);
  EXPECT_TRUE(f.state_dict.at("fc.weight").equal(c.tensors.at("state_dict.fc.weight")));
  EXPECT_EQ(f.info.at("epoch"), 3);
}

TEST(WeightsFile, AFileOfNoKnownFormatIsRefusedSayingWhatItIs) {
  volt::testing::TempDir dir;
  std::ofstream(dir / "notes.txt") << "plain text, not weights";
  EXPECT_TRUE(mentions(error_message<volt::CheckpointError>([&] { read_weights_file(dir / "notes.txt"); }),
                       {"notes.txt", "neither a zip archive", "nor a .safetensors file"}));
}

namespace {

/// `volt-core inspect --json FILE`'s output (the build's binary, beside the tests), or "" when not built.
std::string inspect_json(const std::string& path) {
  const fs::path cli = fs::absolute("../tools/volt/volt-core");
  if (!fs::exists(cli)) return "";
  const std::string cmd = "'" + cli.string() + "' inspect --json '" + path + "' 2>&1";
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
    ::pclose(p);
  }
  return out;
}

}  // namespace

TEST_F(PythonWeights, VoltInspectSaysWhichFormatEachFileIs) {
  if (!fs::exists("../tools/volt/volt-core")) GTEST_SKIP() << "volt-core is not built beside the tests";
  EXPECT_TRUE(mentions(inspect_json(file("sd.pt")), {"\"format\":\"torch.save state_dict\"", "\"fc2.weight\""}));
  EXPECT_TRUE(mentions(inspect_json(file("w.safetensors")), {"\"format\":\"safetensors\""}));
  if (has_lightning()) {
    EXPECT_TRUE(mentions(inspect_json(file("lit.ckpt")),
                         {"\"format\":\"Lightning checkpoint\"", "\"global_step\":3", "\"model.fc1.weight\""}));
  }
  volt::Checkpoint c;
  c.tensors["state_dict.w"] = at::ones({2});
  c.meta = {{"volt", {{"format_version", 2}, {"weights_only", true}}}, {"epoch", 1}, {"global_step", 2}};
  volt::checkpoint_io::TorchCheckpointIO().save_checkpoint(c, file("v.ckpt"));
  EXPECT_TRUE(mentions(inspect_json(file("v.ckpt")), {"\"format\":\"Volt checkpoint\"", "\"state_dict.w\""}));
}
