// The profilers end to end: the simple profiler's actions and counts match what ran (every
// callback hook, the module's hooks, batches, optimizer steps, validations, checkpoint
// saves), the advanced profiler's statistics are consistent, the pytorch profiler's Chrome
// trace parses and holds Volt's ranges and LibTorch's operators, names are checked.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include "support/boring_module.h"
#include "support/expect.h"
#include "volt/callbacks/model_checkpoint.h"
#include "volt/core/error.h"
#include "volt/profilers/advanced_profiler.h"
#include "volt/profilers/pytorch_profiler.h"
#include "volt/profilers/simple_profiler.h"
#include "volt/trainer/trainer.h"

namespace {

using volt::Batch;
using volt::Trainer;
using volt::TrainerView;
using volt::profilers::AdvancedProfiler;
using volt::profilers::PyTorchProfiler;
using volt::profilers::SimpleProfiler;
using volt::testing::BoringModule;
using volt::testing::quiet_options;
using volt::testing::random_loader;
using volt::testing::ScratchDir;

/// Counts every hook it receives, by Lightning's hook name.
class CountingCallback : public volt::callbacks::Callback {
 public:
  std::map<std::string, int64_t> calls;
  int64_t saves = 0;
  std::string state_key() const override { return "CountingCallback"; }
  void on_fit_start(TrainerView&) override { ++calls["on_fit_start"]; }
  void on_fit_end(TrainerView&) override { ++calls["on_fit_end"]; }
  void on_sanity_check_start(TrainerView&) override { ++calls["on_sanity_check_start"]; }
  void on_sanity_check_end(TrainerView&) override { ++calls["on_sanity_check_end"]; }
  void on_train_start(TrainerView&) override { ++calls["on_train_start"]; }
  void on_train_end(TrainerView&) override { ++calls["on_train_end"]; }
  void on_train_epoch_start(TrainerView&) override { ++calls["on_train_epoch_start"]; }
  void on_train_epoch_end(TrainerView&) override { ++calls["on_train_epoch_end"]; }
  void on_train_batch_start(TrainerView&, const Batch&, int64_t) override { ++calls["on_train_batch_start"]; }
  void on_train_batch_end(TrainerView&, const at::Tensor&, const Batch&, int64_t) override {
    ++calls["on_train_batch_end"];
  }
  void on_validation_start(TrainerView&) override { ++calls["on_validation_start"]; }
  void on_validation_end(TrainerView&) override { ++calls["on_validation_end"]; }
  void on_validation_epoch_start(TrainerView&) override { ++calls["on_validation_epoch_start"]; }
  void on_validation_epoch_end(TrainerView&) override { ++calls["on_validation_epoch_end"]; }
  void on_validation_batch_start(TrainerView&, const Batch&, int64_t) override { ++calls["on_validation_batch_start"]; }
  void on_validation_batch_end(TrainerView&, const Batch&, int64_t) override { ++calls["on_validation_batch_end"]; }
  void on_before_backward(TrainerView&, const at::Tensor&) override { ++calls["on_before_backward"]; }
  void on_after_backward(TrainerView&) override { ++calls["on_after_backward"]; }
  void on_before_optimizer_step(TrainerView&, torch::optim::Optimizer&, size_t) override {
    ++calls["on_before_optimizer_step"];
  }
  void on_before_zero_grad(TrainerView&, torch::optim::Optimizer&) override { ++calls["on_before_zero_grad"]; }
  void on_save_checkpoint(TrainerView&, volt::Checkpoint&) override { ++saves; }
};

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// A fit of 2 epochs x 5 batches with 2 validation batches per epoch, a sanity check of 1
/// batch, checkpointing on; `profiler` set through the option or the object.
struct ProfiledFit {
  ScratchDir dir;
  BoringModule module;
  std::shared_ptr<CountingCallback> counter = std::make_shared<CountingCallback>();
  volt::TrainerOptions options() const {
    auto o = quiet_options(dir.path());
    o.max_epochs = 2;
    o.num_sanity_val_steps = 1;
    o.enable_checkpointing = true;
    return o;
  }
  void run(Trainer& trainer) { trainer.fit(module, random_loader(20, 4, 1), random_loader(8, 4, 2)); }
};

TEST(SimpleProfiler, CountsEveryActionAsOftenAsItRan) {
  ProfiledFit f;
  auto o = f.options();
  o.profiler = "simple";
  Trainer trainer(o, {f.counter});
  f.run(trainer);
  auto* p = dynamic_cast<SimpleProfiler*>(trainer.profiler());
  ASSERT_NE(p, nullptr);
  const int64_t batches = 10, steps = trainer.global_step();
  ASSERT_EQ(steps, batches);
  EXPECT_EQ(p->stats("run_training_epoch").count, 2);
  EXPECT_EQ(p->stats("run_training_batch").count, batches);
  EXPECT_EQ(p->stats("[_TrainingEpochLoop].train_dataloader_next").count, batches);
  EXPECT_EQ(p->stats("[Strategy]SingleDeviceStrategy.training_step").count, f.module.train_steps);
  EXPECT_EQ(p->stats("[Strategy]SingleDeviceStrategy.backward").count, batches);
  EXPECT_EQ(p->stats("[Strategy]SingleDeviceStrategy.optimizer_step").count, steps);
  EXPECT_EQ(p->stats("[LightningModule]BoringModule.optimizer_zero_grad").count, steps);
  EXPECT_EQ(p->stats("run_sanity_check").count, 1);
  EXPECT_EQ(p->stats("run_validation").count, 2);
  EXPECT_EQ(p->stats("[Strategy]SingleDeviceStrategy.validation_step").count,
            f.module.val_steps + f.module.sanity_steps);
  EXPECT_EQ(p->stats("[_EvaluationLoop].val_next").count, 2 * 2 + 1);
  EXPECT_EQ(p->stats("[LightningModule]BoringModule.on_train_batch_start").count, batches);
  EXPECT_EQ(p->stats("[LightningModule]BoringModule.on_fit_start").count, 1);
  // Every hook the callback received is one timed call, and nothing more.
  for (const auto& [hook, n] : f.counter->calls) {
    EXPECT_EQ(p->stats("[Callback]CountingCallback." + hook).count, n) << hook;
  }
  EXPECT_EQ(f.counter->calls["on_train_batch_end"], batches);
  for (const std::string& name : p->action_names()) {
    if (name.rfind("[Callback]CountingCallback.", 0) != 0) continue;
    const std::string hook = name.substr(std::string("[Callback]CountingCallback.").size());
    EXPECT_EQ(p->stats(name).count, f.counter->calls.count(hook) ? f.counter->calls[hook] : 0) << name;
  }
  // ModelCheckpoint's hooks are timed under its state key, as in Lightning.
  const auto* mc = dynamic_cast<volt::callbacks::ModelCheckpoint*>(trainer.callbacks().back().get());
  ASSERT_NE(mc, nullptr);
  EXPECT_EQ(p->stats("[Callback]" + mc->state_key() + ".on_train_epoch_end").count, 2);
  ASSERT_GE(f.counter->saves, 1);
  EXPECT_EQ(p->stats("save_checkpoint").count, f.counter->saves);

  const std::string report = read_file(f.dir.path() + "/fit-profile.txt");
  EXPECT_TRUE(volt::testing::mentions(report, {"FIT Profiler Report", "Mean duration (s)", "run_training_batch",
                                               "[Strategy]SingleDeviceStrategy.optimizer_step"}));
  // Nothing left behind by the atomic write.
  for (const auto& file : volt::testing::files_under(f.dir.path()))
    EXPECT_EQ(file.find(".tmp."), std::string::npos) << file;
}

TEST(SimpleProfiler, LeavesTrainingBitwiseUnchanged) {
  std::vector<at::Tensor> with, without;
  for (const std::string name : {"", "simple"}) {
    ProfiledFit f;
    auto o = f.options();
    o.profiler = name;
    at::manual_seed(7);
    BoringModule m;
    Trainer trainer(o);
    trainer.fit(m, random_loader(20, 4, 1), random_loader(8, 4, 2));
    (name.empty() ? without : with) = volt::testing::weights(m);
  }
  volt::testing::expect_bitwise_equal(with, without);
}

TEST(SimpleProfiler, ValidateWritesItsOwnReport) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.profiler = "simple";
  BoringModule m;
  Trainer trainer(o);
  trainer.validate(m, random_loader(12, 4, 3));
  auto* p = dynamic_cast<SimpleProfiler*>(trainer.profiler());
  ASSERT_NE(p, nullptr);
  const std::string report = read_file(dir.path() + "/validate-profile.txt");
  EXPECT_TRUE(
      volt::testing::mentions(report, {"VALIDATE Profiler Report", "run_validation", "[_EvaluationLoop].val_next"}));
  EXPECT_EQ(p->stats("run_validation").count, 1);
  EXPECT_EQ(p->stats("[_EvaluationLoop].val_next").count, 3);
  // A second stage starts from zero.
  trainer.validate(m, random_loader(8, 4, 3));
  EXPECT_EQ(p->stats("run_validation").count, 1);
  EXPECT_EQ(p->stats("[_EvaluationLoop].val_next").count, 2);
}

TEST(Profiler, UserActionsAndMisuse) {
  SimpleProfiler p;
  { auto g = p.profile("my_block"); }
  p.start("my_block");
  p.stop("my_block");
  EXPECT_EQ(p.stats("my_block").count, 2);
  EXPECT_TRUE(volt::testing::mentions(volt::testing::error_message<volt::Error>([&] { p.stop("never_started"); }),
                                      {"never_started", "not started"}));
  p.start("twice");
  EXPECT_TRUE(volt::testing::mentions(volt::testing::error_message<volt::Error>([&] { p.start("twice"); }),
                                      {"twice", "already running"}));
}

TEST(AdvancedProfiler, StatisticsAreConsistent) {
  ProfiledFit f;
  auto o = f.options();
  o.profiler = "advanced";
  Trainer trainer(o, {f.counter});
  f.run(trainer);
  auto* p = dynamic_cast<AdvancedProfiler*>(trainer.profiler());
  ASSERT_NE(p, nullptr);
  const auto batch = p->stats("run_training_batch");
  EXPECT_EQ(batch.count, 10);
  EXPECT_LE(batch.min_s, batch.p50_s);
  EXPECT_LE(batch.p50_s, batch.p90_s);
  EXPECT_LE(batch.p90_s, batch.p99_s);
  EXPECT_LE(batch.p99_s, batch.max_s);
  EXPECT_EQ(p->stats("[Strategy]SingleDeviceStrategy.optimizer_step").count, trainer.global_step());
  EXPECT_EQ(p->stats("[Callback]CountingCallback.on_train_batch_end").count, 10);
  const std::string report = read_file(f.dir.path() + "/fit-profile.txt");
  EXPECT_TRUE(volt::testing::mentions(report, {"P50 (s)", "P99 (s)", "Stddev (s)", "run_training_batch"}));

  AdvancedProfiler q;
  for (int i = 1; i <= 50; ++i) {
    auto g = q.profile("spin");
    volatile double x = 0;
    for (int k = 0; k < i * 200; ++k) x = x + k;
  }
  const auto s = q.stats("spin");
  EXPECT_EQ(s.count, 50);
  EXPECT_LE(s.min_s, s.p50_s);
  EXPECT_LE(s.p50_s, s.p90_s);
  EXPECT_LE(s.p90_s, s.p99_s);
  EXPECT_LE(s.p99_s, s.max_s);
  EXPECT_LT(s.min_s, s.max_s);
  EXPECT_GE(s.stddev_s, 0.0);
  EXPECT_NEAR(s.mean_s * 50, s.total_s, 1e-9);
}

TEST(AdvancedProfiler, WorksAsAnObjectGivenToTheTrainer) {
  ProfiledFit f;
  Trainer trainer(f.options());
  auto keep = std::make_shared<AdvancedProfiler>();
  trainer.set_profiler(keep);
  f.run(trainer);
  EXPECT_FALSE(read_file(f.dir.path() + "/fit-profile.txt").empty());
  const auto s = keep->stats("run_training_batch");
  EXPECT_EQ(s.count, 10);
  EXPECT_LE(s.min_s, s.p50_s);
  EXPECT_LE(s.p50_s, s.max_s);
  EXPECT_GT(s.total_s, 0.0);
  EXPECT_EQ(keep->stats("[Strategy]SingleDeviceStrategy.optimizer_step").count, trainer.global_step());
}

TEST(PyTorchProfiler, WritesAChromeTraceWithVoltRangesAndOperators) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.profiler = "pytorch";
  BoringModule m;
  Trainer trainer(o);
  trainer.fit(m, random_loader(32, 4, 1));  // 8 steps: wait 1, warmup 1, active 3
  const std::string text = read_file(dir.path() + "/fit-trace.json");
  ASSERT_FALSE(text.empty());
  const auto trace = nlohmann::json::parse(text);  // throws on invalid JSON
  ASSERT_TRUE(trace.contains("traceEvents"));
  std::map<std::string, int64_t> counts;
  std::set<std::string> categories;
  for (const auto& e : trace["traceEvents"]) {
    EXPECT_EQ(e["ph"], "X");
    EXPECT_TRUE(e["ts"].is_number());
    EXPECT_TRUE(e["dur"].is_number());
    EXPECT_GE(e["dur"].get<double>(), 0.0);
    ++counts[e["name"].get<std::string>()];
    categories.insert(e["cat"].get<std::string>());
  }
  // The 3 active steps, each a Volt range around LibTorch's operators.
  EXPECT_EQ(counts["run_training_batch"], 3);
  EXPECT_EQ(counts["[Strategy]SingleDeviceStrategy.backward"], 3);
  EXPECT_EQ(counts["[Strategy]SingleDeviceStrategy.optimizer_step"], 3);
  EXPECT_GE(counts["aten::addmm"] + counts["aten::linear"], 3);
  EXPECT_TRUE(categories.count("user_annotation"));
  EXPECT_TRUE(categories.count("cpu_op"));
  const std::string table = read_file(dir.path() + "/fit-profile.txt");
  EXPECT_TRUE(volt::testing::mentions(table, {"FIT PyTorch Profiler Report", "Self CPU (ms)", "3 of 3 active steps"}));
}

TEST(PyTorchProfiler, RefusesAScheduleWithoutActiveSteps) {
  volt::profilers::PyTorchProfilerOptions po;
  po.active = 0;
  EXPECT_TRUE(volt::testing::mentions(volt::testing::error_message<volt::ConfigError>([&] { PyTorchProfiler p(po); }),
                                      {"active=0"}));
}

TEST(Profiler, ReportFilesAreNamedAfterStageAndRank) {
  SimpleProfiler p;
  p.setup("fit", "/runs/version_0", 0, 1);
  EXPECT_EQ(p.report_path(".txt"), "/runs/version_0/fit-profile.txt");
  p.setup("validate", "/runs/version_0", 1, 2);
  EXPECT_EQ(p.report_path(".txt"), "/runs/version_0/validate-profile-1.txt");
  EXPECT_EQ(p.report_path(".json", "trace"), "/runs/version_0/validate-trace-1.json");
}

/// Fails in its third training step.
class FailingModule : public BoringModule {
 public:
  at::Tensor training_step(Batch& batch, volt::StepContext& ctx) override {
    if (train_steps == 2) throw std::runtime_error("step three fails");
    return BoringModule::training_step(batch, ctx);
  }
};

TEST(SimpleProfiler, AFailedFitStillWritesWhatWasTimed) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.profiler = "simple";
  FailingModule m;
  Trainer trainer(o);
  EXPECT_THROW(trainer.fit(m, random_loader(20, 4, 1)), volt::Error);
  auto* p = dynamic_cast<SimpleProfiler*>(trainer.profiler());
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->stats("run_training_batch").count, 3);  // the failed one was stopped while unwinding
  EXPECT_EQ(p->stats("[Strategy]SingleDeviceStrategy.optimizer_step").count, 2);
  EXPECT_TRUE(volt::testing::mentions(read_file(dir.path() + "/fit-profile.txt"), {"run_training_batch"}));
  // A new stage after the failure starts clean (nothing left "running").
  BoringModule ok;
  Trainer again(o);
  again.fit(ok, random_loader(8, 4, 1));
  EXPECT_EQ(dynamic_cast<SimpleProfiler*>(again.profiler())->stats("run_training_batch").count, 2);
}

TEST(ProfilerOption, UnknownNameIsRefusedBeforeAnythingRuns) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.profiler = "fancy";
  const std::string msg = volt::testing::error_message<volt::ConfigError>([&] { Trainer t(o); });
  EXPECT_TRUE(volt::testing::mentions(msg, {"profiler='fancy'", "advanced", "pytorch", "simple"}));
  EXPECT_TRUE(volt::testing::files_under(dir.path()).empty());
}

TEST(ProfilerOption, RegisteredNameIsAccepted) {
  class Named : public SimpleProfiler {};
  volt::profilers::register_profiler("test_named", "a test's profiler", [] { return std::make_shared<Named>(); });
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.profiler = "Test_Named";
  Trainer trainer(o);
  EXPECT_NE(dynamic_cast<Named*>(trainer.profiler()), nullptr);
}

}  // namespace
