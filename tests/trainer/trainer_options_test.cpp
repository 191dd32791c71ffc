// Trainer flags checked at construction (one table of bad values), and the flags that
// decide what a run leaves behind or how it repeats: fast_dev_run, seed, deterministic,
// default_root_dir with checkpointing and logging, log_every_n_steps, ckpt_path.
#include <gtest/gtest.h>

#include "support/expect.h"

#include <ATen/Context.h>
#include <ATen/ops/equal.h>

#include <filesystem>
#include <fstream>
#include <cstdlib>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "support/boring_module.h"
#include "volt/core/error.h"
#include "volt/core/trainer_flags.h"
#include "volt/precision/precision.h"
#include "volt/trainer/trainer.h"
#include "support/source_dir.h"

namespace {

using volt::BatchLimit;
using volt::ConfigError;
using volt::Trainer;
using volt::TrainerOptions;
using volt::testing::BoringModule;
using volt::testing::files_under;
using volt::testing::quiet_options;
using volt::testing::random_loader;
using volt::testing::ScratchDir;

using volt::testing::contains;

// The ConfigError message `f` throws, or a marker that fails every comparison.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<no ConfigError thrown>";
}

// --- validation at construction ---

struct BadOption {
  const char* label;
  std::function<void(TrainerOptions&)> set;
  std::vector<std::string> message_parts;  // each must appear in the message
  bool not_supported_allowed = false;      // NotSupportedError is as good as ConfigError
};

TEST(TrainerOptionsValidation, EveryBadFlagThrowsAtConstructionNamingTheFlagAndTheValue) {
  const std::vector<BadOption> cases = {
      {"max_epochs=-2", [](TrainerOptions& o) { o.max_epochs = -2; }, {"max_epochs=-2"}},
      {"min_epochs>max_epochs",
       [](TrainerOptions& o) {
         o.min_epochs = 5;
         o.max_epochs = 2;
       },
       {"min_epochs=5", "max_epochs=2"}},
      {"min_epochs=-1", [](TrainerOptions& o) { o.min_epochs = -1; }, {"min_epochs=-1"}},
      {"max_steps=-2", [](TrainerOptions& o) { o.max_steps = -2; }, {"max_steps=-2"}},
      {"min_steps>max_steps",
       [](TrainerOptions& o) {
         o.min_steps = 10;
         o.max_steps = 5;
       },
       {"min_steps=10", "max_steps=5"}},
      {"limit_train_batches=1.5",
       [](TrainerOptions& o) { o.limit_train_batches = BatchLimit::fraction(1.5); },
       {"limit_train_batches=1.5"}},
      {"limit_train_batches=-1",
       [](TrainerOptions& o) { o.limit_train_batches = BatchLimit::count(-1); },
       {"limit_train_batches=-1"}},
      {"limit_val_batches=-0.5",
       [](TrainerOptions& o) { o.limit_val_batches = BatchLimit::fraction(-0.5); },
       {"limit_val_batches=-0.5"}},
      {"limit_test_batches=-3",
       [](TrainerOptions& o) { o.limit_test_batches = BatchLimit::count(-3); },
       {"limit_test_batches=-3"}},
      {"limit_predict_batches=2.0",
       [](TrainerOptions& o) { o.limit_predict_batches = BatchLimit::fraction(2.0); },
       {"limit_predict_batches=2.0"}},
      {"val_check_interval=0.0",
       [](TrainerOptions& o) { o.val_check_interval = BatchLimit::fraction(0.0); },
       {"val_check_interval=0.0"}},
      {"val_check_interval=1.5",
       [](TrainerOptions& o) { o.val_check_interval = BatchLimit::fraction(1.5); },
       {"val_check_interval=1.5"}},
      {"val_check_interval=0 (count)",
       [](TrainerOptions& o) { o.val_check_interval = BatchLimit::count(0); },
       {"val_check_interval=0"}},
      {"fraction val_check_interval without check_val_every_n_epoch",
       [](TrainerOptions& o) {
         o.val_check_interval = BatchLimit::fraction(0.5);
         o.check_val_every_n_epoch = std::nullopt;
       },
       {"check_val_every_n_epoch", "val_check_interval=0.5"}},
      {"accumulate_grad_batches=0",
       [](TrainerOptions& o) { o.accumulate_grad_batches = 0; },
       {"accumulate_grad_batches=0"}},
      {"gradient_clip_val=-1", [](TrainerOptions& o) { o.gradient_clip_val = -1; }, {"gradient_clip_val=-1"}},
      {"gradient_clip_algorithm=foo",
       [](TrainerOptions& o) { o.gradient_clip_algorithm = "foo"; },
       {"gradient_clip_algorithm", "foo", "norm", "value"}},
      {"num_sanity_val_steps=-2",
       [](TrainerOptions& o) { o.num_sanity_val_steps = -2; },
       {"num_sanity_val_steps=-2"}},
      {"log_every_n_steps=0", [](TrainerOptions& o) { o.log_every_n_steps = 0; }, {"log_every_n_steps=0"}},
      {"fast_dev_run=-1", [](TrainerOptions& o) { o.fast_dev_run = -1; }, {"fast_dev_run=-1"}},
      {"check_val_every_n_epoch=0",
       [](TrainerOptions& o) { o.check_val_every_n_epoch = 0; },
       {"check_val_every_n_epoch=0"}},
      {"num_threads=-1", [](TrainerOptions& o) { o.num_threads = -1; }, {"num_threads=-1"}},
      {"num_nodes=0", [](TrainerOptions& o) { o.num_nodes = 0; }, {"num_nodes=0"}},
      {"default_root_dir empty", [](TrainerOptions& o) { o.default_root_dir = ""; }, {"default_root_dir"}},
      {"devices=0", [](TrainerOptions& o) { o.devices = "0"; }, {"devices=0"}},
      {"devices=-1 on cpu",
       [](TrainerOptions& o) {
         o.accelerator = "cpu";
         o.devices = "-1";
       },
       {"devices=-1", "cpu"}},
      {"devices=0,1 on cpu",
       [](TrainerOptions& o) {
         o.accelerator = "cpu";
         o.devices = "0,1";
       },
       {"devices='0,1'", "cpu"}},
      {"devices=abc", [](TrainerOptions& o) { o.devices = "abc"; }, {"devices='abc'"}},
      {"accelerator=gpu without CUDA",
       [](TrainerOptions& o) { o.accelerator = "gpu"; },
       {"accelerator='gpu'", "cpu"},
       /*not_supported_allowed=*/true},
      {"accelerator=foo", [](TrainerOptions& o) { o.accelerator = "foo"; }, {"accelerator='foo'", "cpu"}},
      // Valid Lightning values this build cannot run: NotSupportedError is the right kind too.
      {"process_group_backend=nccl without CUDA",
       [](TrainerOptions& o) {
         o.strategy = "ddp";
         o.process_group_backend = "nccl";
       },
       {"process_group_backend='nccl'", "gloo"}},
      {"process_group_timeout_s=0", [](TrainerOptions& o) { o.process_group_timeout_s = 0; },
       {"process_group_timeout_s=0", "1800"}},
      {"strategy=single_device with 2 processes",
       [](TrainerOptions& o) {
         o.strategy = "single_device";
         o.devices = "2";
       },
       {"single_device", "devices=2"}},
      {"precision=foo", [](TrainerOptions& o) { o.precision = "foo"; }, {"precision='foo'"}},
  };
  ScratchDir dir;
  for (const auto& c : cases) {
    TrainerOptions o = quiet_options(dir.path());
    o.accelerator = "auto";
    o.devices = "auto";
    c.set(o);
    std::string message;
    bool right_kind = false;
    try {
      Trainer trainer(o);
      message = "<no error>";
    } catch (const ConfigError& e) {
      message = e.what();
      right_kind = true;
    } catch (const volt::NotSupportedError& e) {
      message = e.what();
      right_kind = c.not_supported_allowed;
    } catch (const std::exception& e) {
      message = std::string("<other exception> ") + e.what();
    }
    EXPECT_TRUE(right_kind) << c.label << ": " << message;
    for (const auto& part : c.message_parts) {
      EXPECT_TRUE(contains(message, part)) << c.label << ": '" << part << "' not in: " << message;
    }
  }
  // And validate_trainer_options is the same check, usable without a Trainer.
  TrainerOptions o;
  o.max_epochs = -2;
  EXPECT_THROW(volt::validate_trainer_options(o), ConfigError);
}

TEST(TrainerOptionsValidation, GoodEdgeValuesAreAccepted) {
  ScratchDir dir;
  std::vector<std::function<void(TrainerOptions&)>> good = {
      [](TrainerOptions& o) { o.max_epochs = 0; },
      [](TrainerOptions& o) { o.max_steps = 0; },
      [](TrainerOptions& o) { o.limit_train_batches = BatchLimit::fraction(1.0); },
      [](TrainerOptions& o) { o.limit_val_batches = BatchLimit::fraction(0.0); },
      [](TrainerOptions& o) { o.val_check_interval = BatchLimit::fraction(1.0); },
      [](TrainerOptions& o) {
        o.val_check_interval = BatchLimit::count(1);
        o.check_val_every_n_epoch = std::nullopt;
      },
      [](TrainerOptions& o) { o.num_sanity_val_steps = -1; },
      [](TrainerOptions& o) { o.precision = "32"; },
      [](TrainerOptions& o) { o.devices = "1"; },
      [](TrainerOptions& o) { o.accelerator = "cpu"; },
  };
  for (size_t i = 0; i < good.size(); ++i) {
    TrainerOptions o = quiet_options(dir.path());
    good[i](o);
    EXPECT_NO_THROW(Trainer trainer(o)) << "case " << i;
  }
}

// --- the flag table ---

TEST(TrainerFlagTable, EveryDefaultInTrainerOptionsEqualsTheTables) {
  const TrainerOptions defaults;
  for (const auto& flag : volt::trainer_flags()) {
    EXPECT_EQ(volt::flag_value_text(flag.get(defaults)), flag.default_text) << flag.name;
  }
}

TEST(TrainerFlagTable, NamesAreUniqueAndEachRowReadsAndWritesItsOwnField) {
  std::set<std::string> names;
  for (const auto& flag : volt::trainer_flags()) {
    EXPECT_TRUE(names.insert(flag.name).second) << flag.name << " twice";
    EXPECT_EQ(volt::find_trainer_flag(flag.name), &flag);
    // A value unlike the default, written through the row: only this row's field changes.
    TrainerOptions o;
    const std::string before = volt::flag_value_text(flag.get(o));
    volt::FlagValue changed = flag.get(o);
    std::visit(
        [](auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, bool>) {
            v = !v;
          } else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double>) {
            v = v + 7;
          } else if constexpr (std::is_same_v<T, std::string>) {
            v += "x";
          } else if constexpr (std::is_same_v<T, std::optional<int64_t>> || std::is_same_v<T, std::optional<uint64_t>>) {
            v = v ? std::nullopt : T(3);
          } else if constexpr (std::is_same_v<T, BatchLimit>) {
            v = BatchLimit::count(3);
          } else {
            v = volt::LoggerOption(false);
          }
        },
        changed);
    flag.set(o, changed);
    EXPECT_NE(volt::flag_value_text(flag.get(o)), before) << flag.name;
    for (const auto& other : volt::trainer_flags()) {
      if (&other == &flag) continue;
      EXPECT_EQ(volt::flag_value_text(other.get(o)), other.default_text) << flag.name << " changed " << other.name;
    }
  }
  EXPECT_EQ(volt::find_trainer_flag("no_such_flag"), nullptr);
}

TEST(TrainerFlagTable, ReadmeTableEqualsTheGeneratedOne) {
  const std::string source_dir = volt::testing::source_dir().string();
  std::ifstream in(source_dir + "/README.md");
  ASSERT_TRUE(in) << source_dir << "/README.md";
  std::string table;
  int markers = 0;
  for (std::string line; std::getline(in, line);) {
    if (line == volt::kReadmeFlagsBegin || line == volt::kReadmeFlagsEnd) {
      ++markers;
    } else if (markers == 1) {
      table += line + "\n";
    }
  }
  ASSERT_EQ(markers, 2) << "README.md lacks the flag table's markers";
  EXPECT_EQ(table, volt::trainer_flags_markdown())
      << "README.md's flag table is out of date: run bash scripts/update_readme_flags.sh";
}

TEST(TrainerFlagTable, EveryFlagHasItsRowInTheReadmeTable) {
  const std::string markdown = volt::trainer_flags_markdown();
  for (const auto& flag : volt::trainer_flags()) {
    EXPECT_TRUE(contains(markdown, "| `" + std::string(flag.name) + "` |")) << flag.name;
  }
}

// process_group_backend was checked only when a ddp strategy built its options: a misspelling
// under the default strategy went unnoticed.
TEST(TrainerOptionsValidation, UnknownProcessGroupBackendIsRefusedWhateverTheStrategy) {
  ScratchDir dir;
  TrainerOptions o = quiet_options(dir.path());
  o.process_group_backend = "mpi";
  try {
    Trainer trainer(o);
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "process_group_backend='mpi'")) << e.what();
    EXPECT_TRUE(contains(e.what(), "auto, gloo or nccl")) << e.what();
  }
}

// set_max_steps and set_max_epochs had checks of their own, with other words.
TEST(TrainerOptionsValidation, SettersRefuseWithTheTablesMessage) {
  ScratchDir dir;
  Trainer trainer(quiet_options(dir.path()));
  TrainerOptions bad = quiet_options(dir.path());
  bad.max_steps = -2;
  const std::string steps = error_of([&] { volt::validate_trainer_options(bad); });
  EXPECT_EQ(error_of([&] { trainer.set_max_steps(-2); }), steps);
  bad = quiet_options(dir.path());
  bad.max_epochs = -3;
  const std::string epochs = error_of([&] { volt::validate_trainer_options(bad); });
  EXPECT_EQ(error_of([&] { trainer.set_max_epochs(-3); }), epochs);
  EXPECT_EQ(trainer.options().max_steps, -1);
  EXPECT_EQ(trainer.options().max_epochs, 1);
  trainer.set_max_steps(5);
  EXPECT_EQ(trainer.options().max_steps, 5);
}

TEST(TrainerOptionsValidation, GradientClipAlgorithmResolvesToItsEnumOnce) {
  using volt::precision::ClipAlgorithm;
  EXPECT_EQ(volt::precision::clip_algorithm_from_flag("norm"), ClipAlgorithm::kNorm);
  EXPECT_EQ(volt::precision::clip_algorithm_from_flag("value"), ClipAlgorithm::kValue);
  EXPECT_TRUE(contains(error_of([] { volt::precision::clip_algorithm_from_flag("Value "); }),
                       "gradient_clip_algorithm='Value '"));
}

TEST(TrainerOptionsValidation, MaxEpochsZeroRunsNoBatch) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = 0;
  Trainer trainer(o);
  BoringModule m;
  trainer.fit(m, random_loader(8, 4, 1));
  EXPECT_EQ(m.train_steps, 0);
  EXPECT_EQ(trainer.current_epoch(), 0);
}

// --- fast_dev_run ---

TEST(TrainerOutputs, FastDevRunRunsNBatchesOfEachStageAndWritesNothing) {
  ScratchDir dir;
  TrainerOptions o = quiet_options(dir.path());
  o.logger = true;
  o.enable_checkpointing = true;
  o.num_sanity_val_steps = 2;
  o.max_epochs = 5;
  o.fast_dev_run = 2;
  auto spy = std::make_shared<volt::testing::ValidationSpy>();
  Trainer trainer(o, {spy});
  BoringModule m;
  trainer.fit(m, random_loader(32, 4, 1), random_loader(16, 4, 2));  // 8 train, 4 val batches
  EXPECT_EQ(m.train_steps, 2);
  EXPECT_EQ(m.val_steps, 2);
  EXPECT_EQ(m.sanity_steps, 0);
  EXPECT_EQ(spy->starts.size(), 1u);
  EXPECT_EQ(trainer.current_epoch(), 1);
  EXPECT_EQ(trainer.global_step(), 2);
  EXPECT_TRUE(trainer.loggers().empty());
  EXPECT_FALSE(std::filesystem::exists(dir / "lightning_logs"));
  EXPECT_EQ(files_under(dir.path()), std::vector<std::string>{});
  // test and predict run n batches too.
  trainer.test(m, random_loader(16, 4, 3));
  EXPECT_EQ(m.test_steps, 2);
  EXPECT_EQ(trainer.predict(m, random_loader(16, 4, 3)).size(), 2u);
  // An explicit save_checkpoint is a no-op too.
  trainer.save_checkpoint(dir / "explicit.ckpt");
  EXPECT_EQ(files_under(dir.path()), std::vector<std::string>{});
}

// --- seed and deterministic ---

at::Tensor seeded_run(const std::string& root, uint64_t seed) {
  auto o = quiet_options(root);
  o.seed = seed;
  o.max_epochs = 2;
  Trainer trainer(o);  // seeds here, before the module draws its initial weights
  BoringModule m;
  volt::data::DataLoaderOptions lo;
  lo.batch_size = 4;
  lo.shuffle = true;  // unseeded: takes its order from the seeded global generator
  trainer.fit(m, std::make_shared<volt::data::DataLoader>(volt::testing::random_dataset(32, 9), lo));
  return m.layer->weight.detach().clone();
}

TEST(TrainerOutputs, SameSeedGivesIdenticalWeightsAfterFit) {
  ScratchDir dir;
  const at::Tensor a = seeded_run(dir.path(), 7);
  const at::Tensor b = seeded_run(dir.path(), 7);
  const at::Tensor c = seeded_run(dir.path(), 8);
  EXPECT_TRUE(at::equal(a, b));
  EXPECT_FALSE(at::equal(a, c));
}

TEST(TrainerOutputs, DeterministicTrueTurnsOnDeterministicAlgorithmsAndRuns) {
  ScratchDir dir;
  const bool before = at::globalContext().deterministicAlgorithms();
  auto o = quiet_options(dir.path());
  o.deterministic = true;
  {
    Trainer trainer(o);
    EXPECT_TRUE(at::globalContext().deterministicAlgorithms());
    BoringModule m;
    trainer.fit(m, random_loader(16, 4, 1), random_loader(8, 4, 2));
    EXPECT_EQ(m.train_steps, 4);
    EXPECT_EQ(m.val_steps, 2);
  }
  at::globalContext().setDeterministicAlgorithms(before, false);
}

// --- default_root_dir, checkpointing, logging ---

TEST(TrainerOutputs, CheckpointGoesUnderTheLoggersVersionFolder) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.logger = true;
  o.enable_checkpointing = true;
  Trainer trainer(o);
  BoringModule m;
  trainer.fit(m, random_loader(16, 4, 1));
  const auto files = files_under(dir.path());
  const std::set<std::string> set(files.begin(), files.end());
  EXPECT_EQ(set.count("lightning_logs/version_0/checkpoints/epoch=0-step=4.ckpt"), 1u) << ::testing::PrintToString(files);
  EXPECT_EQ(set.count("lightning_logs/version_0/hparams.yaml"), 1u) << ::testing::PrintToString(files);
  EXPECT_EQ(trainer.log_dir(), dir / "lightning_logs/version_0");
  EXPECT_EQ(trainer.best_model_path(), dir / "lightning_logs/version_0/checkpoints/epoch=0-step=4.ckpt");
}

TEST(TrainerOutputs, CheckpointGoesUnderDefaultRootDirWithoutALogger) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.enable_checkpointing = true;
  o.max_epochs = 2;
  Trainer trainer(o);
  BoringModule m;
  trainer.fit(m, random_loader(16, 4, 1));
  // save_top_k=1 without a monitor keeps only the latest.
  EXPECT_EQ(files_under(dir.path()), std::vector<std::string>{"checkpoints/epoch=1-step=8.ckpt"});
  EXPECT_EQ(trainer.log_dir(), dir.path());
}

TEST(TrainerOutputs, NothingIsWrittenWithoutLoggerAndCheckpointing) {
  ScratchDir dir;
  Trainer trainer(quiet_options(dir.path()));
  BoringModule m;
  trainer.fit(m, random_loader(16, 4, 1), random_loader(8, 4, 2));
  EXPECT_EQ(files_under(dir.path()), std::vector<std::string>{});
}

/// metrics.csv as rows of column -> cell.
std::vector<std::map<std::string, std::string>> read_csv(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::map<std::string, std::string>> rows;
  std::string line;
  std::vector<std::string> header;
  auto split = [](const std::string& l) {
    std::vector<std::string> out;
    std::stringstream ss(l);
    std::string cell;
    while (std::getline(ss, cell, ',')) out.push_back(cell);
    if (!l.empty() && l.back() == ',') out.emplace_back();
    return out;
  };
  if (!std::getline(in, line)) return rows;
  header = split(line);
  while (std::getline(in, line)) {
    const auto cells = split(line);
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < header.size(); ++i) row[header[i]] = i < cells.size() ? cells[i] : "";
    rows.push_back(std::move(row));
  }
  return rows;
}

TEST(TrainerOutputs, LogEveryNStepsWritesATrainRowEveryNBatches) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.logger = true;
  o.log_every_n_steps = 2;
  o.max_epochs = 2;
  Trainer trainer(o);
  BoringModule m;
  trainer.fit(m, random_loader(32, 4, 1), random_loader(8, 4, 2));  // 8 train batches
  const auto rows = read_csv(dir / "lightning_logs/version_0/metrics.csv");
  ASSERT_FALSE(rows.empty());
  std::vector<std::string> train_steps;
  std::vector<std::string> val_steps;
  for (const auto& row : rows) {
    auto t = row.find("train_loss");
    if (t != row.end() && !t->second.empty()) train_steps.push_back(row.at("step"));
    auto v = row.find("val_loss");
    if (v != row.end() && !v->second.empty()) val_steps.push_back(row.at("step"));
  }
  // 4 rows an epoch, at Lightning's _batches_that_stepped before the batch's step.
  EXPECT_EQ(train_steps, (std::vector<std::string>{"1", "3", "5", "7", "9", "11", "13", "15"}));
  EXPECT_EQ(val_steps, (std::vector<std::string>{"7", "15"}));
}

// Lightning sends step metrics to the loggers only on batches that step the optimizer
// (update_train_step_metrics returns while accumulating) and counts log_every_n_steps in
// optimizer steps (_batches_that_stepped); so does Volt: one row per optimizer step.
TEST(TrainerOutputs, WithAccumulationTrainRowsAreWrittenOnlyOnOptimizerSteps) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.logger = true;
  o.log_every_n_steps = 1;
  o.accumulate_grad_batches = 2;
  Trainer trainer(o);
  BoringModule m;
  trainer.fit(m, random_loader(32, 4, 1));  // 8 batches, 4 optimizer steps
  const auto rows = read_csv(dir / "lightning_logs/version_0/metrics.csv");
  std::vector<std::string> train_steps;
  for (const auto& row : rows) {
    auto t = row.find("train_loss");
    if (t != row.end() && !t->second.empty()) train_steps.push_back(row.at("step"));
  }
  EXPECT_EQ(train_steps, (std::vector<std::string>{"0", "1", "2", "3"}));
}

TEST(TrainerOutputs, LogEveryNStepsLargerThanTheRunLogsNoTrainRow) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.logger = true;
  Trainer trainer(o);  // log_every_n_steps = 50
  BoringModule m;
  trainer.fit(m, random_loader(32, 4, 1));
  const auto rows = read_csv(dir / "lightning_logs/version_0/metrics.csv");
  for (const auto& row : rows) {
    auto t = row.find("train_loss");
    EXPECT_TRUE(t == row.end() || t->second.empty()) << "step " << row.at("step");
  }
}

// --- ckpt_path names ---

TEST(TrainerOutputs, BestCkptPathWithoutModelCheckpointIsAConfigError) {
  ScratchDir dir;
  Trainer trainer(quiet_options(dir.path()));
  BoringModule m;
  try {
    trainer.fit(m, random_loader(8, 4, 1), nullptr, "best");
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "ckpt_path=\"best\"")) << e.what();
    EXPECT_TRUE(contains(e.what(), "ModelCheckpoint")) << e.what();
  }
  EXPECT_EQ(m.train_steps, 0);
  EXPECT_THROW(trainer.validate(m, random_loader(8, 4, 1), "best"), ConfigError);
}

// Lightning: ckpt_path="last" without a last checkpoint is a warning, not an error, so that
// it can be set before the first run: fit trains from scratch, validate uses the weights
// in memory.
TEST(TrainerOutputs, LastCkptPathWithoutModelCheckpointWarnsAndRunsWithoutLoading) {
  ScratchDir dir;
  Trainer trainer(quiet_options(dir.path()));
  BoringModule m;
  ::testing::internal::CaptureStderr();
  trainer.fit(m, random_loader(8, 4, 1), nullptr, "last");
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(m.train_steps, 2);
  EXPECT_TRUE(contains(err, "fit(ckpt_path=\"last\")")) << err;
  EXPECT_TRUE(contains(err, "no ModelCheckpoint")) << err;
  ::testing::internal::CaptureStderr();
  trainer.validate(m, random_loader(8, 4, 1), "last");
  err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(m.val_steps, 2);
  EXPECT_TRUE(contains(err, "validate(ckpt_path=\"last\")")) << err;
  EXPECT_TRUE(contains(err, "weights in memory")) << err;
}

TEST(TrainerOutputs, LastCkptPathBeforeAnyLastCheckpointWarnsAndUsesTheWeightsInMemory) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.enable_checkpointing = true;  // default ModelCheckpoint: save_last off
  Trainer trainer(o);
  BoringModule m;
  trainer.fit(m, random_loader(8, 4, 1));
  ::testing::internal::CaptureStderr();
  trainer.validate(m, random_loader(8, 4, 1), "last");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(contains(err, "save_last")) << err;
  EXPECT_EQ(m.val_steps, 2);
  // "best" is the one checkpoint it kept.
  EXPECT_NO_THROW(trainer.validate(m, random_loader(8, 4, 1), "best"));
}

}  // namespace
