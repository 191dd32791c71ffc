// Exact resume beyond the basic SIGTERM case: interrupted during validation, in the
// middle of gradient accumulation, with an epoch LR schedule, killed with SIGKILL after a
// checkpoint; background (async) checkpoint writes; SLURM's requeue signal; weights as
// .safetensors from ModelCheckpoint. "Exact" means bitwise-identical weights and the same
// metrics.csv as a run that was never interrupted.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <ATen/ops/cross_entropy_loss.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include "support/boring_module.h"
#include "support/expect.h"
#include "volt/callbacks/model_checkpoint.h"
#include "volt/checkpoint_io/async_checkpoint_io.h"
#include "volt/checkpoint_io/safetensors.h"
#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/connectors/signal_connector.h"
#include "volt/core/error.h"
#include "volt/core/lr_scheduler.h"
#include "volt/core/seed.h"
#include "volt/loggers/csv_logger.h"
#include "volt/trainer/trainer.h"

namespace {

namespace fs = std::filesystem;
using volt::Trainer;
using volt::testing::contains;
using volt::testing::expect_bitwise_equal;
using volt::testing::quiet_options;
using volt::testing::weights;
using volt::testing::ScratchDir;

/// Where and how a run is interrupted.
struct Interrupt {
  int64_t at_step = -1;       ///< global step at which to raise
  bool in_validation = false;  ///< raise in validation_step instead of training_step
  int signal = SIGTERM;
};

/// Dropout (CPU RNG), SGD with momentum, a step or epoch LR schedule, a validation metric.
class Net : public volt::Module {
 public:
  Net(Interrupt interrupt, volt::Interval schedule) : interrupt_(interrupt), schedule_(schedule) {
    fc1 = register_module("fc1", torch::nn::Linear(32, 16));
    drop = register_module("drop", torch::nn::Dropout(0.5));
    fc2 = register_module("fc2", torch::nn::Linear(16, 2));
  }
  at::Tensor forward(const at::Tensor& x) { return fc2->forward(drop->forward(fc1->forward(x).relu())); }
  at::Tensor training_step(volt::Batch& b, volt::StepContext& ctx) override {
    maybe_raise(ctx, false);
    auto loss = at::cross_entropy_loss(forward(b[0]), b[1]);
    ctx.log("train_loss", loss);
    return loss;
  }
  void validation_step(volt::Batch& b, volt::StepContext& ctx) override {
    maybe_raise(ctx, true);
    ctx.log("val_loss", at::cross_entropy_loss(forward(b[0]), b[1]));
  }
  volt::OptimizerConfig configure_optimizers() override {
    auto sgd = std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    const int64_t every = schedule_ == volt::Interval::kStep ? 3 : 1;
    return {sgd, volt::LRSchedulerConfig{std::make_shared<volt::StepLR>(*sgd, every, 0.5), schedule_}};
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::Dropout drop{nullptr};

 private:
  void maybe_raise(volt::StepContext& ctx, bool validating) {
    if (raised_ || validating != interrupt_.in_validation || ctx.global_step() != interrupt_.at_step) return;
    raised_ = true;  // a second signal of the same kind would terminate the process
    std::raise(interrupt_.signal);
  }
  Interrupt interrupt_;
  volt::Interval schedule_;
  bool raised_ = false;
};

struct RunSetup {
  int64_t train_samples = 16;  ///< batches of 4
  int64_t accumulate = 1;
  volt::Interval schedule = volt::Interval::kStep;
  double val_check_interval = 1.0;
  bool async = false;
};

std::shared_ptr<volt::data::DataLoader> loader(int64_t n, uint64_t seed, bool shuffle) {
  volt::data::DataLoaderOptions o;
  o.batch_size = 4;
  o.shuffle = shuffle;
  o.seed = seed;
  return std::make_shared<volt::data::DataLoader>(volt::testing::random_dataset(n, seed), o);
}

volt::TrainerOptions options(const std::string& root, const RunSetup& s) {
  auto o = quiet_options(root);
  o.max_epochs = 3;
  o.accumulate_grad_batches = s.accumulate;
  o.val_check_interval = volt::BatchLimit::fraction(s.val_check_interval);
  o.log_every_n_steps = 1;
  o.async_checkpoint = s.async;
  return o;
}


std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

/// One fit into `root` (metrics under root/logs/run/version_0); returns the weights.
struct RunResult {
  std::vector<at::Tensor> weights;
  int64_t global_step = 0;
  int interrupted_by = 0;
  std::string interrupt_checkpoint;
  std::string stop_reason;
};

RunResult fit(const std::string& root, const RunSetup& s, Interrupt interrupt, const std::string& ckpt_path = "",
        std::vector<std::shared_ptr<volt::callbacks::Callback>> callbacks = {}) {
  Net m(interrupt, s.schedule);
  auto o = options(root, s);
  o.logger = true;
  o.enable_checkpointing = !callbacks.empty();
  Trainer trainer(o, std::move(callbacks), {std::make_shared<volt::loggers::CSVLogger>(root + "/logs", "run", 0)});
  trainer.fit(m, loader(s.train_samples, 9, true), loader(8, 4, false), ckpt_path);
  return RunResult{weights(m), trainer.global_step(), trainer.state().interrupted_by, trainer.state().interrupt_checkpoint,
             trainer.state().stop_reason};
}

std::string metrics_csv(const std::string& root) {
  return read_file(root + "/logs/run/version_0/metrics.csv");
}

/// The uninterrupted run, then the same run interrupted and resumed (both from seed 21,
/// the resume after re-seeding with another seed): same weights, same metrics.csv.
void expect_exact_resume(const RunSetup& s, Interrupt interrupt, int64_t expected_stop_step) {
  ScratchDir dir;
  volt::seed_everything(21);
  const RunResult reference = fit(dir / "reference", s, {});
  const int64_t total = reference.global_step;

  volt::seed_everything(21);
  const RunResult first = fit(dir / "resumed", s, interrupt);
  EXPECT_EQ(first.interrupted_by, interrupt.signal);
  EXPECT_EQ(first.global_step, expected_stop_step);
  ASSERT_TRUE(fs::exists(first.interrupt_checkpoint)) << first.stop_reason;

  volt::seed_everything(999);  // the checkpoint's RNG state must win
  const RunResult second = fit(dir / "resumed", s, {}, first.interrupt_checkpoint);
  EXPECT_EQ(second.global_step, total);
  expect_bitwise_equal(reference.weights, second.weights);
  const std::string want = metrics_csv(dir / "reference");
  EXPECT_FALSE(want.empty());
  EXPECT_TRUE(contains(want, "val_loss")) << want;
  EXPECT_EQ(metrics_csv(dir / "resumed"), want);
}

TEST(ExactResume, SigtermDuringMidEpochValidation) {
  RunSetup s;
  s.val_check_interval = 0.5;  // validation after batches 2 and 4 of each epoch
  // Global step 6 is epoch 1 after its second batch: the validation there is interrupted.
  expect_exact_resume(s, Interrupt{6, true}, 6);
}

TEST(ExactResume, SigtermDuringEpochEndValidation) {
  expect_exact_resume(RunSetup{}, Interrupt{8, true, SIGINT}, 8);
}

TEST(ExactResume, SigtermMidAccumulationFinishesTheOptimizerStepFirst) {
  RunSetup s;
  s.train_samples = 24;  // 6 batches: 3 optimizer steps an epoch with accumulate_grad_batches=2
  s.accumulate = 2;
  // Raised in the first batch of a window (epoch 1, batch 2): the gradient of that batch
  // is not in any checkpoint, so the loop stops after the window's optimizer step.
  expect_exact_resume(s, Interrupt{4}, 5);
}

TEST(ExactResume, EpochLRScheduleInterruptedMidEpoch) {
  RunSetup s;
  s.schedule = volt::Interval::kEpoch;
  expect_exact_resume(s, Interrupt{5}, 6);
}

TEST(ExactResume, EpochLRScheduleInterruptedAtTheEpochsLastBatch) {
  RunSetup s;
  s.schedule = volt::Interval::kEpoch;
  expect_exact_resume(s, Interrupt{7}, 8);
}

TEST(ExactResume, StepLRScheduleWithAsyncCheckpointing) {
  RunSetup s;
  s.async = true;
  expect_exact_resume(s, Interrupt{5}, 6);
}

const char* const kSigkillChildRoot = "VOLT_TEST_SIGKILL_CHILD_ROOT";

std::vector<std::shared_ptr<volt::callbacks::Callback>> step_checkpoints(const std::string& root) {
  volt::callbacks::ModelCheckpoint::Options o;
  o.dirpath = root + "/ckpts";
  o.every_n_train_steps = 1;
  o.save_last = true;
  o.save_top_k = 0;
  return {std::make_shared<volt::callbacks::ModelCheckpoint>(o)};
}

TEST(ExactResume, SigkillAfterACheckpointResumesFromLastBitwise) {
  const RunSetup s;
  if (const char* root = std::getenv(kSigkillChildRoot)) {
    // The child: trains and is killed (no handler can run) inside step 6, after the
    // checkpoint of step 5 was written.
    volt::seed_everything(21);
    fit(root, s, Interrupt{6, false, SIGKILL}, "", step_checkpoints(root));
    std::_Exit(3);  // not reached when the kill works
  }
  ScratchDir dir;
  volt::seed_everything(21);
  const RunResult reference = fit(dir / "reference", s, {}, "", step_checkpoints(dir / "reference"));

  // A fresh process (this test binary again), not a bare fork: LibTorch 2.x refuses to
  // run autograd in a forked child of a process that already ran it.
  const std::string killed = dir / "killed";
  const std::string filter = "--gtest_filter=ExactResume.SigkillAfterACheckpointResumesFromLastBitwise";
  const std::string env_entry = std::string(kSigkillChildRoot) + "=" + killed;
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
  envp.push_back(const_cast<char*>(env_entry.c_str()));
  envp.push_back(nullptr);
  char exe[] = "/proc/self/exe";
  std::vector<char*> argv{exe, const_cast<char*>(filter.c_str()), nullptr};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execve(exe, argv.data(), envp.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  const std::string last = killed + "/ckpts/last.ckpt";
  ASSERT_TRUE(fs::exists(last));
  EXPECT_EQ(volt::checkpoint_io::TorchCheckpointIO().load_checkpoint(last).meta.at("global_step").get<int64_t>(), 6)
      << "the last checkpoint before the kill is the one of step 6 (global_step counts steps done)";

  volt::seed_everything(5);
  const RunResult resumed = fit(killed, s, {}, last, step_checkpoints(killed));
  EXPECT_EQ(resumed.global_step, reference.global_step);
  expect_bitwise_equal(reference.weights, resumed.weights);
}

// ---------------------------------------------------------------- async checkpointing

TEST(AsyncCheckpointing, TrainerOptionInstallsAsyncCheckpointIOAndFilesAreCompleteAfterFit) {
  ScratchDir dir;
  RunSetup s;
  s.async = true;
  Net m({}, s.schedule);
  volt::callbacks::ModelCheckpoint::Options co;
  co.save_last = true;
  co.every_n_train_steps = 2;
  auto o = options(dir.path(), s);
  o.enable_checkpointing = true;
  Trainer trainer(o, {std::make_shared<volt::callbacks::ModelCheckpoint>(co)});
  EXPECT_NE(dynamic_cast<volt::checkpoint_io::AsyncCheckpointIO*>(&trainer.strategy().checkpoint_io()), nullptr);
  trainer.fit(m, loader(16, 9, true));
  const std::string last = dir / "checkpoints/last.ckpt";
  const auto ckpt = volt::checkpoint_io::TorchCheckpointIO().load_checkpoint(last);
  EXPECT_EQ(ckpt.meta.at("global_step").get<int64_t>(), 12);
  for (const auto& item : m.named_parameters()) {
    EXPECT_TRUE(ckpt.tensors.at("state_dict." + item.key()).equal(item.value())) << item.key();
  }
  Trainer sync(options(dir.path(), RunSetup{}));
  EXPECT_NE(dynamic_cast<volt::checkpoint_io::TorchCheckpointIO*>(&sync.strategy().checkpoint_io()), nullptr);
}

// ---------------------------------------------------------------- ModelCheckpoint .safetensors

TEST(ModelCheckpointSafetensors, WritesWeightsBesideEachCheckpointAndRemovesThemTogether) {
  ScratchDir dir;
  Net m({}, volt::Interval::kStep);
  volt::callbacks::ModelCheckpoint::Options co;
  co.save_safetensors = true;
  co.save_last = true;  // save_top_k=1: each epoch's file replaces the previous one
  auto o = options(dir.path(), RunSetup{});
  o.enable_checkpointing = true;
  Trainer trainer(o, {std::make_shared<volt::callbacks::ModelCheckpoint>(co)});
  trainer.fit(m, loader(16, 9, true));
  EXPECT_EQ(volt::testing::files_under(dir / "checkpoints"),
            (std::vector<std::string>{"epoch=2-step=12.ckpt", "epoch=2-step=12.safetensors", "last.ckpt",
                                      "last.safetensors"}));
  const auto file = volt::checkpoint_io::load_safetensors(dir / "checkpoints/epoch=2-step=12.safetensors");
  EXPECT_EQ(file.metadata.at("global_step"), "12");
  EXPECT_EQ(file.metadata.at("epoch"), "2");
  const auto params = m.named_parameters();
  ASSERT_EQ(file.tensors.size(), params.size());
  for (const auto& item : params) EXPECT_TRUE(file.tensors.at(item.key()).equal(item.value())) << item.key();
  Net fresh({}, volt::Interval::kStep);
  volt::checkpoint_io::load_module_safetensors(fresh, dir / "checkpoints/last.safetensors");
  expect_bitwise_equal(weights(m), weights(fresh));
}

// ---------------------------------------------------------------- SLURM requeue

/// Sets SLURM's variables for a one-task job for the guard's lifetime.
class SlurmJob {
 public:
  explicit SlurmJob(std::map<std::string, std::string> extra = {}) {
    std::map<std::string, std::string> vars = {{"SLURM_NTASKS", "1"},  {"SLURM_PROCID", "0"},
                                               {"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "0"},
                                               {"SLURM_NNODES", "1"},  {"SLURM_NTASKS_PER_NODE", "1"},
                                               {"SLURM_JOB_ID", "4242"}, {"SLURM_JOB_NAME", "train"}};
    for (auto& [k, v] : extra) vars[k] = v;
    for (const auto& [k, v] : vars) {
      names_.push_back(k);
      ::setenv(k.c_str(), v.c_str(), 1);
    }
  }
  ~SlurmJob() {
    for (const auto& k : names_) ::unsetenv(k.c_str());
  }

 private:
  std::vector<std::string> names_;
};

/// A stand-in for scontrol that appends its arguments to `log` and exits with `code`.
std::string fake_scontrol(const ScratchDir& dir, int code = 0) {
  const std::string path = dir / "scontrol";
  std::ofstream(path) << "#!/bin/sh\necho \"$@\" >> '" << (dir / "scontrol.log") << "'\nexit " << code << "\n";
  ::chmod(path.c_str(), 0755);
  return path;
}

TEST(SlurmRequeue, RequeueSignalSavesRequeuesTheJobAndTheRequeuedJobResumesBitwise) {
  ScratchDir dir;
  const RunSetup s;
  volt::seed_everything(21);
  const RunResult reference = fit(dir / "reference", s, {});

  SlurmJob job;
  auto o = options(dir / "job", s);
  o.slurm_requeue_command = fake_scontrol(dir) + " requeue";
  volt::seed_everything(21);
  {
    Net m(Interrupt{5, false, SIGUSR1}, s.schedule);
    Trainer trainer(o);
    ASSERT_EQ(trainer.plan().cluster_env, "slurm");
    trainer.fit(m, loader(16, 9, true), loader(8, 4, false));
    EXPECT_EQ(trainer.state().interrupted_by, SIGUSR1);
    EXPECT_EQ(trainer.global_step(), 6);
    EXPECT_EQ(trainer.state().interrupt_checkpoint, dir / "job/hpc_ckpt_1.ckpt");
    EXPECT_TRUE(contains(trainer.state().stop_reason, "requeued job 4242")) << trainer.state().stop_reason;
  }
  EXPECT_EQ(read_file(dir / "scontrol.log"), "requeue 4242\n");

  // The requeued job: same command line, no ckpt_path; it finds hpc_ckpt_1.ckpt.
  SlurmJob restarted(std::map<std::string, std::string>{{"SLURM_RESTART_COUNT", "1"}});
  volt::seed_everything(77);
  Net m(Interrupt{}, s.schedule);
  Trainer trainer(o);
  trainer.fit(m, loader(16, 9, true), loader(8, 4, false));
  EXPECT_EQ(trainer.global_step(), 12);
  expect_bitwise_equal(reference.weights, weights(m));
}

TEST(SlurmRequeue, ArrayTaskRequeuesOnlyItselfOnAConfiguredSignal) {
  ScratchDir dir;
  SlurmJob job(std::map<std::string, std::string>{{"SLURM_ARRAY_JOB_ID", "100"}, {"SLURM_ARRAY_TASK_ID", "7"}});
  auto o = options(dir / "job", RunSetup{});
  o.slurm_requeue_signal = "USR2";
  o.slurm_requeue_command = fake_scontrol(dir) + " requeue --hold";
  Net m(Interrupt{2, false, SIGUSR2}, volt::Interval::kStep);
  Trainer trainer(o);
  trainer.fit(m, loader(16, 9, true));
  EXPECT_EQ(trainer.state().interrupted_by, SIGUSR2);
  EXPECT_EQ(read_file(dir / "scontrol.log"), "requeue --hold 100_7\n");
  EXPECT_TRUE(fs::exists(dir / "job/hpc_ckpt_1.ckpt"));
}

TEST(SlurmRequeue, AFailingRequeueCommandIsReportedAndTheCheckpointStays) {
  ScratchDir dir;
  SlurmJob job;
  auto o = options(dir / "job", RunSetup{});
  o.slurm_requeue_command = fake_scontrol(dir, 1) + " requeue";
  Net m(Interrupt{2, false, SIGUSR1}, volt::Interval::kStep);
  Trainer trainer(o);
  trainer.fit(m, loader(16, 9, true));
  EXPECT_TRUE(contains(trainer.state().stop_reason, "failed")) << trainer.state().stop_reason;
  EXPECT_TRUE(contains(trainer.state().stop_reason, "exited with status 1")) << trainer.state().stop_reason;
  EXPECT_EQ(trainer.global_step(), 3);
  EXPECT_TRUE(fs::exists(dir / "job/hpc_ckpt_1.ckpt"));
}

TEST(SlurmRequeue, OutsideSlurmTheRequeueSignalIsNotCaught) {
  ScratchDir dir;
  Trainer trainer(options(dir.path(), RunSetup{}));
  EXPECT_NE(trainer.plan().cluster_env, "slurm");
  // Nothing to raise here (it would end the test process): the settings say "off".
  const auto r = volt::connectors::SignalConnector::slurm_requeue(trainer.options(), trainer.plan().cluster_env,
                                                                  volt::Environ::current());
  EXPECT_EQ(r.signal, 0);
}

TEST(SlurmRequeue, BadRequeueSignalOrEmptyCommandIsAConfigErrorAtConstruction) {
  ScratchDir dir;
  auto o = options(dir.path(), RunSetup{});
  o.slurm_requeue_signal = "SIGKILL";
  const std::string msg = volt::testing::error_message<volt::ConfigError>([&] { Trainer t(o); });
  EXPECT_TRUE(contains(msg, "slurm_requeue_signal='SIGKILL'")) << msg;
  o.slurm_requeue_signal = "SIGUSR1";
  o.slurm_requeue_command = " ";
  EXPECT_TRUE(contains(volt::testing::error_message<volt::ConfigError>([&] { Trainer t(o); }), "slurm_requeue_command"));
  o.slurm_auto_requeue = false;
  Trainer fine(o);
}

TEST(SlurmRequeue, RequeueCheckpointNamesCountUp) {
  ScratchDir dir;
  using volt::connectors::SignalConnector;
  fs::create_directories(dir.path());
  EXPECT_EQ(SignalConnector::latest_requeue_checkpoint(dir.path()), "");
  EXPECT_EQ(SignalConnector::requeue_checkpoint_path(dir.path()), dir / "hpc_ckpt_1.ckpt");
  std::ofstream(dir / "hpc_ckpt_2.ckpt") << "x";
  std::ofstream(dir / "hpc_ckpt_10.ckpt") << "x";
  std::ofstream(dir / "hpc_ckpt_x.ckpt") << "x";
  EXPECT_EQ(SignalConnector::latest_requeue_checkpoint(dir.path()), dir / "hpc_ckpt_10.ckpt");
  EXPECT_EQ(SignalConnector::requeue_checkpoint_path(dir.path()), dir / "hpc_ckpt_11.ckpt");
}

}  // namespace
