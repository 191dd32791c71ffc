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

namespace {

namespace fs = std::filesystem;

const char* kPython = "/usr/bin/python3";

bool python_has_torch() {
  return fs::exists(kPython) && std::system((std::string(kPython) + " -c 'import torch' 2>/dev/null").c_str()) == 0;
}

const char* kScript = R"(
import json, sys, torch
d = torch.load(sys.argv[1])
w = d["tensors"]["state_dict.w"]
assert w.dtype == torch.float64 and w.numel() == 300000, (w.dtype, w.numel())
assert bool((w == 7).all())
assert bytes(d["blobs"]["optimizer.0"].tolist()) == b"h" * 64
assert json.loads(d["meta"])["step"] == 7
# Two entries per dict: Python pickles a one-entry dict with SETITEM, an opcode LibTorch
# 1.13's unpickler does not know (it reads SETITEMS).
torch.save({"tensors": {"state_dict.w": torch.arange(6, dtype=torch.float32).reshape(2, 3),
                        "rng.cpu": torch.zeros(4, dtype=torch.uint8)},
            "blobs": {"optimizer.0": torch.tensor(list(b"xy\0z"), dtype=torch.uint8),
                      "optimizer.1": torch.tensor([], dtype=torch.uint8)},
            "meta": json.dumps({"step": 3})}, sys.argv[2])
)";

TEST(TorchCheckpointIOPython, TorchLoadReadsVoltsFileAndVoltReadsTorchSave) {
  if (!python_has_torch()) GTEST_SKIP() << kPython << " with torch (python3-torch) is not installed";
  std::string pattern = (fs::temp_directory_path() / "volt_py_XXXXXX").string();
  const fs::path dir = ::mkdtemp(pattern.data());
  volt::Checkpoint c;
  c.tensors["state_dict.w"] = at::full({300000}, 7.0, at::kDouble);
  c.blobs["optimizer.0"] = std::string(64, 'h');
  c.meta["step"] = 7;
  volt::checkpoint_io::TorchCheckpointIO io;
  io.save_checkpoint(c, (dir / "volt.ckpt").string());
  std::ofstream(dir / "check.py") << kScript;
  const std::string cmd = std::string(kPython) + " " + (dir / "check.py").string() + " " +
                          (dir / "volt.ckpt").string() + " " + (dir / "python.ckpt").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const auto back = io.load_checkpoint((dir / "python.ckpt").string());
  EXPECT_TRUE(back.tensors.at("state_dict.w").equal(at::arange(6, at::kFloat).reshape({2, 3})));
  EXPECT_EQ(back.blobs.at("optimizer.0"), std::string("xy\0z", 4));
  EXPECT_EQ(back.meta.at("step"), 3);
  fs::remove_all(dir);
}

}  // namespace
