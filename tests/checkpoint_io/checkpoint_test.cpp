// Checkpoint files (TorchCheckpointIO, atomic_write) and what goes in them
// (CheckpointConnector: dump, save, load, restore).
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ops/arange.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include "support/temp_dir.h"
#include "support/expect.h"
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include "support/fake_trainer_view.h"
#include "volt/accelerators/cpu_accelerator.h"
#include "volt/callbacks/callback.h"
#include "volt/checkpoint_io/lightning_layout.h"
#include "volt/checkpoint_io/optimizer_state.h"
#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/connectors/checkpoint_connector.h"
#include "volt/core/compat.h"
#include "volt/core/error.h"
#include "volt/core/lr_scheduler.h"
#include "volt/core/version.h"
#include "volt/environments/default_environment.h"
#include "volt/precision/precision.h"
#include "volt/strategies/single_device_strategy.h"

namespace {

namespace fs = std::filesystem;
using volt::Checkpoint;
using volt::CheckpointError;
using volt::checkpoint_io::TorchCheckpointIO;
using volt::connectors::CheckpointConnector;
using volt::connectors::CheckpointParts;

using volt::testing::TempDir;

std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_file_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<std::string> folder_entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

bool has_temp_file(const fs::path& dir) {
  for (const auto& name : folder_entries(dir)) {
    if (name.size() > 1 && name[0] == '.' && name.find(".tmp.") != std::string::npos) return true;
  }
  return false;
}

using volt::testing::contains;
using volt::testing::error_message;

Checkpoint small_checkpoint() {
  Checkpoint c;
  c.tensors["state_dict.w"] = at::arange(12, at::kFloat).reshape({3, 4});
  c.blobs["optimizer.0"] = std::string("abc\0def", 7);
  c.meta["format_version"] = volt::kCheckpointFormatVersion;
  c.meta["epoch"] = 2;
  return c;
}

// Lowers this process's file-size limit for the guard's lifetime, so that writes past
// `bytes` fail with EFBIG (root ignores file permissions, but not RLIMIT_FSIZE).
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &saved_);
    old_handler_ = ::signal(SIGXFSZ, SIG_IGN);
    rlimit lowered = saved_;
    lowered.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &lowered);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved_);
    ::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit saved_{};
  void (*old_handler_)(int) = nullptr;
};

// ---------------------------------------------------------------- TorchCheckpointIO

TEST(TorchCheckpointIO, RoundTripsTensorsOfSeveralDtypes) {
  TempDir dir;
  Checkpoint c;
  const at::Tensor base = at::randn({4, 6});
  c.tensors["float"] = at::randn({3, 5});
  c.tensors["int64"] = at::arange(10, at::kLong) * int64_t{1000000007};
  c.tensors["bool"] = at::arange(7, at::kLong).remainder(2).eq(0);
  c.tensors["view"] = base.t().slice(/*dim=*/0, 1, 6, 2);  // non-contiguous, offset into storage
  c.tensors["scalar"] = at::tensor(3.5);
  ASSERT_FALSE(c.tensors["view"].is_contiguous());
  TorchCheckpointIO io;
  io.save_checkpoint(c, dir / "t.ckpt");
  const Checkpoint loaded = io.load_checkpoint(dir / "t.ckpt");
  ASSERT_EQ(loaded.tensors.size(), c.tensors.size());
  for (const auto& [name, t] : c.tensors) {
    ASSERT_TRUE(loaded.tensors.count(name)) << name;
    const at::Tensor& got = loaded.tensors.at(name);
    EXPECT_EQ(got.scalar_type(), t.scalar_type()) << name;
    EXPECT_EQ(got.sizes(), t.sizes()) << name;
    EXPECT_TRUE(got.equal(t)) << name;
  }
}

TEST(TorchCheckpointIO, RoundTripsBlobsWithArbitraryBytes) {
  TempDir dir;
  Checkpoint c;
  std::string every_byte;
  for (int i = 0; i < 256; ++i) every_byte.push_back(static_cast<char>(i));
  c.blobs["every_byte"] = every_byte + every_byte;
  c.blobs["zeros"] = std::string(5, '\0');
  c.blobs["text"] = "plain";
  c.blobs["empty"] = "";
  TorchCheckpointIO io;
  io.save_checkpoint(c, dir / "b.ckpt");
  const Checkpoint loaded = io.load_checkpoint(dir / "b.ckpt");
  EXPECT_EQ(loaded.blobs, c.blobs);
}

TEST(TorchCheckpointIO, RoundTripsMetaJson) {
  TempDir dir;
  Checkpoint c;
  c.meta = {{"format_version", 1},
            {"name", "run \"quoted\" \xc3\xa9"},
            {"nested", {{"list", {1, 2.5, "three", nullptr, true}}, {"empty", nlohmann::json::object()}}},
            {"big", 9007199254740993LL}};
  TorchCheckpointIO io;
  io.save_checkpoint(c, dir / "m.ckpt");
  EXPECT_EQ(io.load_checkpoint(dir / "m.ckpt").meta, c.meta);
}

TEST(TorchCheckpointIO, SaveOverExistingFileReplacesItAndLeavesNoTempFiles) {
  TempDir dir;
  TorchCheckpointIO io;
  Checkpoint first = small_checkpoint();
  io.save_checkpoint(first, dir / "last.ckpt");
  Checkpoint second = small_checkpoint();
  second.meta["epoch"] = 3;
  io.save_checkpoint(second, dir / "last.ckpt");
  EXPECT_EQ(folder_entries(dir.path()), std::vector<std::string>{"last.ckpt"});
  EXPECT_EQ(io.load_checkpoint(dir / "last.ckpt").meta["epoch"], 3);
}

TEST(TorchCheckpointIO, SaveCreatesMissingNestedFolders) {
  TempDir dir;
  TorchCheckpointIO io;
  const std::string path = dir / "a/b/c/epoch=0.ckpt";
  io.save_checkpoint(small_checkpoint(), path);
  ASSERT_TRUE(fs::is_regular_file(path));
  EXPECT_EQ(io.load_checkpoint(path).meta["epoch"], 2);
}

TEST(TorchCheckpointIO, SaveUnderARegularFileThrowsAndLeavesThatFileIntact) {
  TempDir dir;
  const std::string blocker = dir / "not_a_folder";
  write_file_bytes(blocker, "keep me");
  TorchCheckpointIO io;
  const std::string path = blocker + "/x.ckpt";
  const std::string msg = error_message<CheckpointError>([&] { io.save_checkpoint(small_checkpoint(), path); });
  EXPECT_TRUE(contains(msg, path)) << msg;
  EXPECT_EQ(read_file_bytes(blocker), "keep me");
  EXPECT_EQ(folder_entries(dir.path()), std::vector<std::string>{"not_a_folder"});
}

TEST(TorchCheckpointIO, FailedWriteKeepsPreviousFileByteIdenticalAndRemovesTempFile) {
  TempDir dir;
  TorchCheckpointIO io;
  const std::string path = dir / "last.ckpt";
  io.save_checkpoint(small_checkpoint(), path);
  const std::string before = read_file_bytes(path);
  ASSERT_FALSE(before.empty());
  Checkpoint big = small_checkpoint();
  big.tensors["state_dict.big"] = at::ones({256 * 1024});  // 1 MiB: over the limit below
  std::string msg;
  {
    FileSizeLimit limit(before.size() + 64 * 1024);
    msg = error_message<CheckpointError>([&] { io.save_checkpoint(big, path); });
  }
  EXPECT_TRUE(contains(msg, "last.ckpt")) << msg;
  EXPECT_EQ(read_file_bytes(path), before);
  EXPECT_FALSE(has_temp_file(dir.path())) << ::testing::PrintToString(folder_entries(dir.path()));
  EXPECT_EQ(io.load_checkpoint(path).meta["epoch"], 2);
}

TEST(TorchCheckpointIO, LoadOfMissingFileThrowsNamingThePath) {
  TempDir dir;
  TorchCheckpointIO io;
  const std::string path = dir / "nope.ckpt";
  const std::string msg = error_message<CheckpointError>([&] { io.load_checkpoint(path); });
  EXPECT_TRUE(contains(msg, path)) << msg;
}

TEST(TorchCheckpointIO, LoadOfGarbageThrowsNamingThePath) {
  TempDir dir;
  const std::string path = dir / "garbage.ckpt";
  std::string junk;
  for (int i = 0; i < 200; ++i) junk += "this is not a checkpoint ";
  write_file_bytes(path, junk);
  TorchCheckpointIO io;
  const std::string msg = error_message<CheckpointError>([&] { io.load_checkpoint(path); });
  EXPECT_TRUE(contains(msg, path)) << msg;
}

TEST(TorchCheckpointIO, LoadOfEmptyFileThrowsNamingThePath) {
  TempDir dir;
  const std::string path = dir / "empty.ckpt";
  write_file_bytes(path, "");
  TorchCheckpointIO io;
  const std::string msg = error_message<CheckpointError>([&] { io.load_checkpoint(path); });
  EXPECT_TRUE(contains(msg, path)) << msg;
}

TEST(TorchCheckpointIO, LoadOfTruncatedCheckpointThrowsNamingThePath) {
  TempDir dir;
  TorchCheckpointIO io;
  const std::string path = dir / "cut.ckpt";
  Checkpoint c = small_checkpoint();
  c.tensors["state_dict.v"] = at::randn({1000});
  io.save_checkpoint(c, path);
  const std::string full = read_file_bytes(path);
  write_file_bytes(path, full.substr(0, full.size() / 2));
  const std::string msg = error_message<CheckpointError>([&] { io.load_checkpoint(path); });
  EXPECT_TRUE(contains(msg, path)) << msg;
}

TEST(TorchCheckpointIO, LoadOfAPickleThatIsNotACheckpointThrows) {
  TempDir dir;
  TorchCheckpointIO io;
  const std::string not_dict = dir / "int.ckpt";
  const std::vector<char> data = torch::jit::pickle_save(c10::IValue(int64_t{3}));
  write_file_bytes(not_dict, std::string(data.begin(), data.end()));
  std::string msg = error_message<CheckpointError>([&] { io.load_checkpoint(not_dict); });
  EXPECT_TRUE(contains(msg, not_dict)) << msg;

  const std::string wrong_keys = dir / "dict.ckpt";
  c10::impl::GenericDict root(c10::StringType::get(), c10::AnyType::get());
  root.insert("tensors", c10::Dict<std::string, at::Tensor>());
  const std::vector<char> dict_data = torch::jit::pickle_save(root);
  write_file_bytes(wrong_keys, std::string(dict_data.begin(), dict_data.end()));
  msg = error_message<CheckpointError>([&] { io.load_checkpoint(wrong_keys); });
  EXPECT_TRUE(contains(msg, wrong_keys)) << msg;
  EXPECT_TRUE(contains(msg, "blobs")) << msg;
}

TEST(TorchCheckpointIO, RemoveDeletesAndToleratesMissingFile) {
  TempDir dir;
  TorchCheckpointIO io;
  const std::string path = dir / "r.ckpt";
  io.save_checkpoint(small_checkpoint(), path);
  io.remove_checkpoint(path);
  EXPECT_FALSE(fs::exists(path));
  EXPECT_NO_THROW(io.remove_checkpoint(path));
  EXPECT_NO_THROW(io.remove_checkpoint(dir / "never/existed.ckpt"));
}

TEST(AtomicWrite, WritesBytesCreatingFolderAndReplacingAtomically) {
  TempDir dir;
  const std::string path = dir / "sub/data.bin";
  const std::string bytes("a\0b\xff", 4);
  volt::checkpoint_io::atomic_write(path, bytes.data(), bytes.size());
  EXPECT_EQ(read_file_bytes(path), bytes);
  volt::checkpoint_io::atomic_write(path, "new", 3);
  EXPECT_EQ(read_file_bytes(path), "new");
  volt::checkpoint_io::atomic_write(path, "", 0);
  EXPECT_EQ(read_file_bytes(path), "");
  EXPECT_EQ(folder_entries(dir.path() / "sub"), std::vector<std::string>{"data.bin"});
}

TEST(AtomicWrite, FailureThrowsVoltErrorNamingThePath) {
  TempDir dir;
  write_file_bytes(dir / "file", "x");
  const std::string path = dir / "file/data.bin";
  const std::string msg = error_message<volt::Error>([&] { volt::checkpoint_io::atomic_write(path, "abc", 3); });
  EXPECT_TRUE(contains(msg, path)) << msg;
  EXPECT_EQ(read_file_bytes(dir / "file"), "x");
}

// ---------------------------------------------------------------- CheckpointConnector

class TinyNet : public volt::Module {
 public:
  explicit TinyNet(int64_t in_features = 3, bool extra = false) {
    fc = register_module("fc", torch::nn::Linear(in_features, 2));
    running = register_buffer("running", at::zeros({2}));
    if (extra) register_parameter("extra", at::zeros({1}));
  }
  at::Tensor training_step(volt::Batch&, volt::StepContext&) override { return {}; }
  volt::OptimizerConfig configure_optimizers() override { return {}; }
  void on_save_checkpoint(Checkpoint& ckpt) override { ckpt.meta["tiny_net"] = "was here"; }

  torch::nn::Linear fc{nullptr};
  at::Tensor running;
};

class StateCallback : public volt::callbacks::Callback {
 public:
  std::string state_key() const override { return "StateCallback"; }
  nlohmann::json state_dict() const override { return {{"x", 3}}; }
  void load_state_dict(const nlohmann::json& state) override { loaded = state; }
  std::optional<nlohmann::json> loaded;
};

// One run's parts: a module, SGD with momentum, a StepLR and the loop state.
struct TrainingRun {
  explicit TrainingRun(int64_t in_features = 3, bool extra = false) : module(in_features, extra), view(&module) {
    sgd = std::make_shared<torch::optim::SGD>(module.parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    optimizers = {sgd};
    schedulers = {{std::make_shared<volt::StepLR>(*sgd, 1, 0.5), volt::Interval::kEpoch, 1, ""}};
    callbacks = {callback};
  }
  CheckpointParts parts() { return CheckpointParts{module, optimizers, schedulers, state, callbacks, view}; }
  // One optimizer step on a fixed batch.
  void train_step() {
    const at::Tensor x = at::arange(12, at::kFloat).reshape({4, 3}) / 10.0;
    sgd->zero_grad();
    module.fc->forward(x).pow(2).sum().backward();
    sgd->step();
  }

  TinyNet module;
  std::shared_ptr<torch::optim::SGD> sgd;
  std::vector<std::shared_ptr<torch::optim::Optimizer>> optimizers;
  std::vector<volt::LRSchedulerConfig> schedulers;
  volt::TrainerState state;
  std::shared_ptr<StateCallback> callback = std::make_shared<StateCallback>();
  std::vector<std::shared_ptr<volt::callbacks::Callback>> callbacks;
  volt::testing::FakeTrainerView view;
};

void expect_same_state(const torch::nn::Module& a, const torch::nn::Module& b) {
  const auto pa = a.named_parameters();
  const auto pb = b.named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (const auto& item : pa) {
    ASSERT_TRUE(pb.contains(item.key())) << item.key();
    EXPECT_TRUE(item.value().equal(pb[item.key()])) << item.key();
  }
  const auto ba = a.named_buffers();
  const auto bb = b.named_buffers();
  ASSERT_EQ(ba.size(), bb.size());
  for (const auto& item : ba) EXPECT_TRUE(item.value().equal(bb[item.key()])) << item.key();
}

class CheckpointConnectorTest : public ::testing::Test {
 protected:
  CheckpointConnectorTest()
      : strategy_(c10::Device(c10::kCPU), std::make_shared<volt::accelerators::CPUAccelerator>(1),
                  std::make_shared<volt::precision::Precision>(),
                  std::make_shared<volt::environments::DefaultEnvironment>(), std::make_shared<TorchCheckpointIO>()),
        connector_(strategy_) {}

  // A run after one optimizer step and two scheduler steps, at epoch 1 / step 10.
  static void advance(TrainingRun& run, int64_t batches_done, int64_t num_training_batches) {
    run.train_step();
    run.schedulers[0].scheduler->step();
    run.schedulers[0].scheduler->step();
    run.state.current_epoch = 1;
    run.state.global_step = 10;
    run.state.batches_done = batches_done;
    run.state.num_training_batches = num_training_batches;
  }

  TempDir dir_;
  volt::strategies::SingleDeviceStrategy strategy_;
  CheckpointConnector connector_;
};

TEST_F(CheckpointConnectorTest, RoundTripRestoresWeightsOptimizerSchedulerLoopCallbacksAndRng) {
  TrainingRun a;
  advance(a, /*batches_done=*/3, /*num_training_batches=*/5);
  a.module.running.fill_(7.0);
  const std::string path = dir_ / "full.ckpt";
  const Checkpoint dumped = connector_.dump(a.parts(), /*weights_only=*/false, "version_7");
  strategy_.save_checkpoint(dumped, path);
  const at::Tensor rand_after_dump = at::rand({8});

  TrainingRun b;
  at::rand({100});  // move the generator away from the saved state
  const Checkpoint loaded = connector_.load(path);
  EXPECT_EQ(loaded.meta["volt"]["format_version"], volt::kCheckpointFormatVersion);
  EXPECT_EQ(loaded.meta["volt_version"], VOLT_VERSION_STRING);
  EXPECT_EQ(loaded.meta["pytorch-lightning_version"], volt::checkpoint_io::kLightningLayoutVersion);
  EXPECT_EQ(loaded.meta["volt"]["torch_version"], volt::compat::torch_version());
  EXPECT_EQ(loaded.meta["volt"]["logger_version"], "version_7");
  EXPECT_EQ(loaded.meta["tiny_net"], "was here");
  // The optimizer's state in PyTorch's layout, no LibTorch archive.
  EXPECT_TRUE(volt::checkpoint_io::has_pytorch_optimizer_state(loaded, 0));
  EXPECT_TRUE(loaded.blobs.empty());

  CheckpointConnector::restore_module(b.module, loaded, path);
  connector_.restore_training_state(b.parts(), loaded, path);

  EXPECT_TRUE(at::rand({8}).equal(rand_after_dump));
  expect_same_state(a.module, b.module);
  EXPECT_EQ(b.schedulers[0].scheduler->last_epoch(), 2);
  ASSERT_EQ(b.schedulers[0].scheduler->get_last_lr().size(), 1u);
  EXPECT_DOUBLE_EQ(b.schedulers[0].scheduler->get_last_lr()[0], 0.025);
  EXPECT_DOUBLE_EQ(b.sgd->param_groups()[0].options().get_lr(), 0.025);
  EXPECT_EQ(b.state.current_epoch, 1);
  EXPECT_EQ(b.state.global_step, 10);
  EXPECT_EQ(b.state.batches_done, 3);
  ASSERT_TRUE(b.callback->loaded.has_value());
  EXPECT_EQ(*b.callback->loaded, (nlohmann::json{{"x", 3}}));

  // Momentum buffers came back: the next step moves both runs identically (a fresh
  // buffer would make b's step 1/(1+0.9) of a's).
  a.train_step();
  b.train_step();
  expect_same_state(a.module, b.module);
}

TEST_F(CheckpointConnectorTest, CheckpointAfterLastBatchResumesAtNextEpoch) {
  TrainingRun a;
  advance(a, /*batches_done=*/5, /*num_training_batches=*/5);
  const std::string path = dir_ / "epoch_end.ckpt";
  connector_.save(a.parts(), path, /*weights_only=*/false, "");
  TrainingRun b;
  connector_.restore_training_state(b.parts(), connector_.load(path), path);
  EXPECT_EQ(b.state.current_epoch, 2);
  EXPECT_EQ(b.state.batches_done, 0);
  EXPECT_EQ(b.state.global_step, 10);
}

TEST_F(CheckpointConnectorTest, WeightsOnlyCheckpointHasNoOptimizerStateAndCannotResume) {
  TrainingRun a;
  advance(a, 3, 5);
  const std::string path = dir_ / "weights.ckpt";
  connector_.save(a.parts(), path, /*weights_only=*/true, "");
  const Checkpoint loaded = connector_.load(path);
  EXPECT_TRUE(loaded.blobs.empty());
  EXPECT_EQ(loaded.meta["volt"]["weights_only"], true);
  EXPECT_FALSE(loaded.meta.contains("optimizer_states"));
  EXPECT_FALSE(loaded.meta["volt"].contains("loops"));
  TrainingRun b;
  EXPECT_NO_THROW(CheckpointConnector::restore_module(b.module, loaded, path));
  expect_same_state(a.module, b.module);
  const std::string msg =
      error_message<CheckpointError>([&] { connector_.restore_training_state(b.parts(), loaded, path); });
  EXPECT_TRUE(contains(msg, path)) << msg;
  EXPECT_FALSE(b.callback->loaded.has_value());
}

TEST_F(CheckpointConnectorTest, RestoreModuleRejectsDifferentShapeAndLeavesModuleUntouched) {
  TrainingRun a;
  const std::string path = dir_ / "shape.ckpt";
  connector_.save(a.parts(), path, false, "");
  TinyNet other(/*in_features=*/4);
  const at::Tensor bias_before = other.fc->bias.detach().clone();
  const std::string msg =
      error_message<CheckpointError>([&] { CheckpointConnector::restore_module(other, connector_.load(path), path); });
  EXPECT_TRUE(contains(msg, "fc.weight")) << msg;
  EXPECT_FALSE(contains(msg, "fc.bias")) << msg;  // same shape: not listed
  EXPECT_TRUE(contains(msg, path)) << msg;
  // Nothing was copied, not even the parameters that fit.
  EXPECT_TRUE(other.fc->bias.equal(bias_before));
}

TEST_F(CheckpointConnectorTest, RestoreModuleListsParametersMissingFromCheckpoint) {
  TrainingRun a;
  const std::string path = dir_ / "missing.ckpt";
  connector_.save(a.parts(), path, false, "");
  TinyNet bigger(3, /*extra=*/true);
  const std::string msg =
      error_message<CheckpointError>([&] { CheckpointConnector::restore_module(bigger, connector_.load(path), path); });
  EXPECT_TRUE(contains(msg, "extra")) << msg;
}

TEST_F(CheckpointConnectorTest, RestoreModuleListsUnexpectedCheckpointEntries) {
  TrainingRun a(3, /*extra=*/true);
  const std::string path = dir_ / "unexpected.ckpt";
  connector_.save(a.parts(), path, false, "");
  TinyNet smaller;
  const std::string msg = error_message<CheckpointError>(
      [&] { CheckpointConnector::restore_module(smaller, connector_.load(path), path); });
  EXPECT_TRUE(contains(msg, "extra")) << msg;
}

TEST_F(CheckpointConnectorTest, LoadRejectsOtherFormatVersions) {
  TorchCheckpointIO io;
  Checkpoint future = small_checkpoint();
  future.meta["volt"]["format_version"] = volt::kCheckpointFormatVersion + 998;
  const std::string path = dir_ / "future.ckpt";
  io.save_checkpoint(future, path);
  std::string msg = error_message<CheckpointError>([&] { connector_.load(path); });
  EXPECT_TRUE(contains(msg, std::to_string(volt::kCheckpointFormatVersion + 998))) << msg;
  EXPECT_TRUE(contains(msg, path)) << msg;

  Checkpoint unversioned = small_checkpoint();
  unversioned.meta.erase("volt");
  io.save_checkpoint(unversioned, path);
  EXPECT_THROW(connector_.load(path), CheckpointError);
}

TEST_F(CheckpointConnectorTest, NonFiniteMetricsDoNotBreakSaveAndLoad) {
  TrainingRun a;
  a.view.callback_metrics_ = {
      {"val_loss", std::nan("")}, {"best", std::numeric_limits<double>::infinity()}, {"acc", 0.5}};
  const std::string path = dir_ / "nan.ckpt";
  ASSERT_NO_THROW(connector_.save(a.parts(), path, false, ""));
  Checkpoint loaded;
  ASSERT_NO_THROW(loaded = connector_.load(path));
  EXPECT_EQ(loaded.meta["volt"]["metrics"]["acc"], 0.5);
  TrainingRun b;
  EXPECT_NO_THROW(connector_.restore_training_state(b.parts(), loaded, path));
}

TEST_F(CheckpointConnectorTest, RestoreFailsWhenOptimizerStateIsMissing) {
  TrainingRun a;
  a.optimizers.clear();
  const std::string path = dir_ / "no_opt.ckpt";
  connector_.save(a.parts(), path, false, "");
  TrainingRun b;
  EXPECT_THROW(connector_.restore_training_state(b.parts(), connector_.load(path), path), CheckpointError);
}

}  // namespace
