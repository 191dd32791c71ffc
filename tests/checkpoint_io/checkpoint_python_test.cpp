// Volt's checkpoint files and Python's torch.save/torch.load (Debian's python3-torch): a
// file TorchCheckpointIO streams to disk is read by torch.load, and a dict saved by
// torch.save in Volt's layout loads through TorchCheckpointIO (dicts of two or more
// entries: see the script).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <ATen/ops/arange.h>
#include <ATen/ops/full.h>
#include <gtest/gtest.h>

#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "support/source_dir.h"

namespace {

namespace fs = std::filesystem;

const char* kCkptPython = "/usr/bin/python3";

bool ckpt_python_has_torch() {
  return fs::exists(kCkptPython) && std::system((std::string(kCkptPython) + " -c 'import torch' 2>/dev/null").c_str()) == 0;
}

// Volt's file through torch.load(weights_only=True) (torch_load_check.safe_load: on torch 1.13, whose
// weights-only unpickler has no float opcode, every other opcode and global checked), in Lightning's layout;
// then a dict in Volt's format 1, written by torch.save, which Volt converts on read.
const char* kCkptScript = R"(
import json, os, sys, torch
sys.path.insert(0, os.environ["VOLT_CHECK_DIR"])
from torch_load_check import safe_load
d = safe_load(sys.argv[1])
w = d["state_dict"]["w"]
assert w.dtype == torch.float64 and w.numel() == 300000, (w.dtype, w.numel())
assert bool((w == 7).all())
assert bytes(d["volt_blobs"]["optimizer.0"].tolist()) == b"h" * 64
assert d["step"] == 7 and d["lr"] == 0.25 and d["volt_format_version"] == 2, d
assert d["optimizer_states"][0]["state"][1]["exp_avg"].tolist() == [1.5, 2.5], d["optimizer_states"]
assert d["optimizer_states"][0]["param_groups"][0]["betas"] == (0.9, 0.999), d["optimizer_states"]
assert torch.equal(d["volt_tensors"]["rng.cpu"], torch.arange(5, dtype=torch.uint8))
torch.save({"tensors": {"state_dict.w": torch.arange(6, dtype=torch.float32).reshape(2, 3),
                        "rng.cpu": torch.zeros(4, dtype=torch.uint8)},
            "blobs": {"optimizer.0": torch.tensor(list(b"xy\0z"), dtype=torch.uint8),
                      "optimizer.1": torch.tensor([], dtype=torch.uint8)},
            "meta": json.dumps({"format_version": 1, "epoch": 2, "step": 3})}, sys.argv[2])
)";

TEST(TorchCheckpointIOPython, WeightsOnlyTorchLoadReadsVoltsLightningLayoutAndVoltConvertsItsFormat1) {
  if (!ckpt_python_has_torch()) GTEST_SKIP() << kCkptPython << " with torch (python3-torch) is not installed";
  std::string pattern = (fs::temp_directory_path() / "volt_py_XXXXXX").string();
  const fs::path dir = ::mkdtemp(pattern.data());
  volt::Checkpoint c;
  c.tensors["state_dict.w"] = at::full({300000}, 7.0, at::kDouble);
  c.blobs["optimizer.0"] = std::string(64, 'h');
  c.meta["step"] = 7;
  c.meta["lr"] = 0.25;
  c.meta["optimizer_states"] = {{{"state", {{"1", nlohmann::json::object()}}},
                                 {"param_groups", {{{"betas", {0.9, 0.999}}, {"params", {0, 1}}}}}}};
  c.tensors["optimizer_states.0.state.1.exp_avg"] = at::arange(2, at::kFloat).add(1.5);
  c.tensors["rng.cpu"] = at::arange(5, at::kByte);
  volt::checkpoint_io::TorchCheckpointIO io;
  io.save_checkpoint(c, (dir / "volt.ckpt").string());
  std::ofstream(dir / "check.py") << kCkptScript;
  const fs::path check_dir = volt::testing::source_dir() / "tests" / "checkpoint_io";
  const std::string cmd = "VOLT_CHECK_DIR='" + check_dir.string() + "' " + std::string(kCkptPython) + " " +
                          (dir / "check.py").string() + " " + (dir / "volt.ckpt").string() + " " +
                          (dir / "python.ckpt").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const auto back = io.load_checkpoint((dir / "python.ckpt").string());
  EXPECT_TRUE(back.tensors.at("state_dict.w").equal(at::arange(6, at::kFloat).reshape({2, 3})));
  EXPECT_EQ(back.blobs.at("optimizer.0"), std::string("xy\0z", 4));
  EXPECT_EQ(back.meta.at("step"), 3);
  EXPECT_EQ(back.meta.at("epoch"), 2);
  EXPECT_EQ(back.meta.at("volt").at("converted_from_format"), 1);
  EXPECT_EQ(back.tensors.count("rng.cpu"), 1u);
  // Volt's own file back: the optimizer tensor where it was.
  const auto own = io.load_checkpoint((dir / "volt.ckpt").string());
  EXPECT_TRUE(own.tensors.at("optimizer_states.0.state.1.exp_avg").equal(at::arange(2, at::kFloat).add(1.5)));
  EXPECT_EQ(own.meta.at("lr"), 0.25);
  fs::remove_all(dir);
}

}  // namespace
