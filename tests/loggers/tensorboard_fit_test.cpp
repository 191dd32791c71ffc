// Several loggers in a fit: csv and tensorboard in one version folder with the same rows,
// the logger option's spellings (C++, command line, YAML), the registry (unknown names,
// a user's logger by name), Module::log_image/log_text, HistogramMonitor, and a SIGTERM
// stop that keeps every row.
#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include "loggers/tensorboard_support.h"
#include "support/boring_module.h"
#include "volt/callbacks/histogram_monitor.h"
#include "volt/cli/cli.h"
#include "volt/core/error.h"
#include "volt/loggers/csv_logger.h"
#include "volt/loggers/event_file.h"
#include "volt/loggers/logger_registry.h"
#include "volt/loggers/tensorboard_logger.h"
#include "volt/trainer/trainer.h"

namespace {

using volt::Trainer;
using volt::TrainerOptions;
using volt::testing::BoringModule;
using volt::testing::quiet_options;
using volt::testing::random_loader;
using volt::testing::ScratchDir;
namespace tb = volt::testing::tb;
namespace fs = std::filesystem;

std::string tb_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

/// metrics.csv as (step -> column -> value) for every non-empty cell.
std::vector<std::pair<int64_t, volt::MetricMap>> csv_rows(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  std::vector<std::string> header;
  std::stringstream hs(line);
  for (std::string cell; std::getline(hs, cell, ',');) header.push_back(cell);
  std::vector<std::pair<int64_t, volt::MetricMap>> rows;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream ls(line);
    for (std::string cell; std::getline(ls, cell, ',');) cells.push_back(cell);
    cells.resize(header.size());
    int64_t step = 0;
    volt::MetricMap m;
    for (size_t i = 0; i < header.size(); ++i) {
      if (cells[i].empty()) continue;
      if (header[i] == "step") {
        step = std::stoll(cells[i]);
      } else {
        m[header[i]] = std::stod(cells[i]);
      }
    }
    rows.emplace_back(step, m);
  }
  return rows;
}

TEST(TensorBoardFit, CsvAndTensorboardWriteOneVersionFolderWithTheSameRows) {
  ScratchDir dir;
  fs::create_directories(fs::path(dir.path()) / "lightning_logs" / "version_0");  // an earlier run
  TrainerOptions o = quiet_options(dir.path());
  o.logger = {"csv", "tensorboard"};
  o.max_epochs = 2;
  o.log_every_n_steps = 2;
  BoringModule model;
  model.save_hyperparameters({{"lr", "0.1"}, {"arch", "linear"}});
  Trainer trainer(o);
  ASSERT_EQ(trainer.loggers().size(), 2u);
  trainer.fit(model, random_loader(32, 4, 1), random_loader(8, 4, 2));

  const fs::path version = fs::path(dir.path()) / "lightning_logs" / "version_1";
  EXPECT_EQ(trainer.log_dir(), version.string());
  EXPECT_EQ(trainer.loggers()[0]->log_dir(), trainer.loggers()[1]->log_dir());
  const auto events = tb::event_files(dir.path());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(fs::path(events[0]).parent_path(), version);
  ASSERT_TRUE(fs::exists(version / "metrics.csv"));

  // Every CSV cell is a scalar of the event file at the same step (float32 in the event),
  // and nothing else is.
  using Cell = std::tuple<int64_t, std::string, float>;
  std::vector<Cell> from_events, from_csv;
  for (const auto& p : volt::loggers::read_event_scalars(events[0])) {
    from_events.emplace_back(p.step, p.tag, static_cast<float>(p.value));
  }
  for (const auto& [step, metrics] : csv_rows((version / "metrics.csv").string())) {
    for (const auto& [name, value] : metrics) from_csv.emplace_back(step, name, static_cast<float>(value));
  }
  std::sort(from_events.begin(), from_events.end());
  std::sort(from_csv.begin(), from_csv.end());
  EXPECT_EQ(from_events, from_csv);
  EXPECT_GE(from_csv.size(), 10u);

  // The independent reader sees the same file, with the HParams session and its end.
  if (tb::python_skip_reason().empty()) {
    const tb::PythonResult r = tb::python_dump(version.string());
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const auto json = nlohmann::json::parse(r.out);
    bool start = false, end = false;
    size_t python_scalars = 0;
    for (const auto& e : json["files"][0]["events"]) {
      for (const auto& v : e["values"]) {
        if (v.value("kind", "") == "scalar") ++python_scalars;
        if (v.contains("hparams") && v["hparams"].contains("session_start_info")) {
          start = v["hparams"]["session_start_info"]["hparams"]["arch"] == "linear";
        }
        if (v.contains("hparams") && v["hparams"].contains("session_end_info")) {
          end = v["hparams"]["session_end_info"]["status"] == 1;
        }
      }
    }
    EXPECT_TRUE(start);
    EXPECT_TRUE(end);
    EXPECT_EQ(python_scalars, from_events.size());
  }
}

TEST(TensorBoardFit, LoggerObjectsFollowTheFirstOnesVersion) {
  ScratchDir dir;
  TrainerOptions o = quiet_options(dir.path());
  o.logger = true;
  auto csv = std::make_shared<volt::loggers::CSVLogger>(dir.path());
  auto board = std::make_shared<volt::loggers::TensorBoardLogger>(dir.path());
  auto other_csv = std::make_shared<volt::loggers::CSVLogger>(dir.path());
  EXPECT_EQ(other_csv->version(), "version_0") << "chosen before the Trainer: kept";
  Trainer trainer(o, {}, {csv, board});
  EXPECT_EQ(csv->version(), "version_1");
  EXPECT_EQ(board->version(), "version_1");
  // TensorBoard first: the CSV logger follows it.
  o.logger = {"tensorboard", "csv"};
  Trainer named(o);
  ASSERT_EQ(named.loggers().size(), 2u);
  EXPECT_NE(dynamic_cast<volt::loggers::TensorBoardLogger*>(named.loggers()[0].get()), nullptr);
  EXPECT_EQ(named.loggers()[0]->version(), "version_2");
  EXPECT_EQ(named.loggers()[1]->version(), "version_2");
}

TEST(TensorBoardFit, UnknownLoggerNameIsRefusedWithTheKnownNames) {
  ScratchDir dir;
  TrainerOptions o = quiet_options(dir.path());
  o.logger = "csv,wandb";
  const std::string why = tb_error_of([&] { Trainer trainer(o); });
  EXPECT_NE(why.find("logger='wandb' is not known"), std::string::npos) << why;
  EXPECT_NE(why.find("csv, tensorboard"), std::string::npos) << why;
  EXPECT_TRUE(volt::testing::files_under(dir.path()).empty());
  o.logger = "csv,,tensorboard";
  EXPECT_NE(tb_error_of([&] { Trainer trainer(o); }).find("empty name"), std::string::npos);
  o.logger = {"csv", "CSV"};
  EXPECT_NE(tb_error_of([&] { Trainer trainer(o); }).find("twice"), std::string::npos);
  o.logger = "tensorboard";
  const std::string both =
      tb_error_of([&] { Trainer trainer(o, {}, {std::make_shared<volt::loggers::CSVLogger>(dir.path())}); });
  EXPECT_NE(both.find("names loggers too"), std::string::npos) << both;
}

/// Records what it receives.
class TbRecordingLogger : public volt::loggers::Logger {
 public:
  std::string name() const override { return "recording"; }
  std::string version() override { return "version_0"; }
  std::string log_dir() override { return "."; }
  void log_hyperparams(const std::map<std::string, std::string>& p) override { hparams = p; }
  void log_metrics(const volt::MetricMap& m, int64_t step) override { rows.emplace_back(step, m); }
  void log_text(const std::string& tag, const std::string& text, int64_t step) override {
    texts.push_back(tag + "@" + std::to_string(step) + ":" + text);
  }
  void log_image(const std::string& tag, const at::Tensor& image, int64_t step) override {
    images.push_back(tag + "@" + std::to_string(step) + ":" + std::to_string(image.size(0)));
  }
  void log_histogram(const std::string& tag, const at::Tensor&, int64_t step) override {
    histograms.push_back(tag + "@" + std::to_string(step));
  }
  void finalize(const std::string& s) override { status = s; }
  std::map<std::string, std::string> hparams;
  std::vector<std::pair<int64_t, volt::MetricMap>> rows;
  std::vector<std::string> texts, images, histograms;
  std::string status;
};

TEST(TensorBoardFit, CustomLoggerRegisteredByNameTrains) {
  ScratchDir dir;
  std::shared_ptr<TbRecordingLogger> made;
  volt::loggers::register_logger("recording", "keeps rows in memory", [&](const TrainerOptions&) {
    made = std::make_shared<TbRecordingLogger>();
    return made;
  });
  EXPECT_NE(volt::loggers::logger_registry().known_keys().find("recording"), std::string::npos);
  TrainerOptions o = quiet_options(dir.path());
  o.logger = "Recording";  // names match in any case
  o.log_every_n_steps = 1;
  BoringModule model;
  model.save_hyperparameters({{"lr", "0.1"}});
  Trainer trainer(o);
  trainer.fit(model, random_loader(16, 4, 1));
  ASSERT_NE(made, nullptr);
  EXPECT_EQ(made->rows.size(), 4u);  // train_loss at each of the four steps
  EXPECT_EQ(made->hparams.at("lr"), "0.1");
  EXPECT_EQ(made->status, "success");
  EXPECT_THROW(volt::loggers::register_logger("a,b", "", [](const TrainerOptions&) { return nullptr; }),
               volt::ConfigError);
  EXPECT_THROW(volt::loggers::register_logger("true", "", [](const TrainerOptions&) { return nullptr; }),
               volt::ConfigError);
}

TEST(TensorBoardFit, LoggerOptionSpellings) {
  TrainerOptions o;
  EXPECT_TRUE(o.logger.enabled());
  EXPECT_TRUE(o.logger.names().empty());
  o.logger = false;
  EXPECT_FALSE(o.logger);
  o.logger = true;
  EXPECT_TRUE(static_cast<bool>(o.logger));
  o.logger = "tensorboard";
  EXPECT_EQ(o.logger.names(), std::vector<std::string>{"tensorboard"});
  o.logger = {"csv", "tensorboard"};
  EXPECT_EQ(o.logger.to_string(), "csv,tensorboard");
  o.logger = std::string(" csv , tensorboard ");
  EXPECT_EQ(o.logger, volt::LoggerOption({"csv", "tensorboard"}));

  auto parsed = [](std::vector<std::string> args) {
    volt::cli::Cli cli("prog");
    args.insert(args.begin(), "prog");
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    std::ostringstream sink;
    cli.parse(static_cast<int>(argv.size()), argv.data(), sink);
    return cli.trainer_options().logger;
  };
  EXPECT_EQ(parsed({"--trainer.logger=csv,tensorboard"}), volt::LoggerOption({"csv", "tensorboard"}));
  EXPECT_EQ(parsed({"--trainer.logger", "tensorboard"}), volt::LoggerOption("tensorboard"));
  EXPECT_EQ(parsed({"--trainer.logger", "False"}), volt::LoggerOption(false));
  EXPECT_EQ(parsed({"--trainer.logger"}), volt::LoggerOption(true));
  EXPECT_EQ(parsed({}), volt::LoggerOption(true));
  ScratchDir dir;
  const std::string yaml = dir.path() + "/run.yaml";
  std::ofstream(yaml) << "trainer:\n  logger: [csv, tensorboard]\n";
  EXPECT_EQ(parsed({"--config", yaml}), volt::LoggerOption({"csv", "tensorboard"}));
  std::ofstream(yaml) << "trainer:\n  logger: csv,tensorboard\n";
  EXPECT_EQ(parsed({"--config", yaml}), volt::LoggerOption({"csv", "tensorboard"}));
  std::ofstream(yaml) << "trainer:\n  logger: false\n";
  EXPECT_EQ(parsed({"--config", yaml}), volt::LoggerOption(false));
  std::ofstream(yaml) << "trainer:\n  logger: []\n";
  EXPECT_NE(tb_error_of([&] { parsed({"--config", yaml}); }).find("empty list"), std::string::npos);
  // --print-config writes what parses back.
  volt::cli::Cli cli("prog");
  const char* argv[] = {"prog", "--trainer.logger=csv,tensorboard", "--print-config"};
  std::ostringstream printed;
  cli.parse(3, argv, printed);
  EXPECT_NE(printed.str().find("logger: csv,tensorboard"), std::string::npos) << printed.str();
}

/// Logs an image and a text from its hooks.
class Painter : public BoringModule {
 public:
  at::Tensor training_step(volt::Batch& batch, volt::StepContext& ctx) override {
    if (ctx.batch_idx() == 1) log_image("samples", at::zeros({3, 4, 5}));
    return BoringModule::training_step(batch, ctx);
  }
  void on_train_epoch_end() override { log_text("summary", "epoch done"); }
};

TEST(TensorBoardFit, ModuleLogImageAndTextReachEveryLoggerAtTheGlobalStep) {
  ScratchDir dir;
  Painter model;
  const std::string outside = tb_error_of([&] { model.log_image("x", at::zeros({1, 2, 2})); });
  EXPECT_NE(outside.find("not attached to a Trainer"), std::string::npos) << outside;
  EXPECT_NE(tb_error_of([&] { model.log_text("x", "y"); }).find("not attached to a Trainer"), std::string::npos);

  auto recording = std::make_shared<TbRecordingLogger>();
  auto board = std::make_shared<volt::loggers::TensorBoardLogger>(dir.path());
  TrainerOptions o = quiet_options(dir.path());
  o.logger = true;
  Trainer trainer(o, {}, {recording, board});
  trainer.fit(model, random_loader(16, 4, 1));
  EXPECT_EQ(recording->images, std::vector<std::string>{"samples@1:3"});
  EXPECT_EQ(recording->texts, std::vector<std::string>{"summary@4:epoch done"});
  std::vector<std::string> seen;
  for (const auto& e : volt::loggers::read_events(board->event_file_path())) {
    for (const auto& v : e.values) {
      if (v.kind == volt::loggers::SummaryValue::Kind::kImage) seen.push_back(v.tag + "@" + std::to_string(e.step));
      if (v.plugin_name == "text") seen.push_back(v.tag + "@" + std::to_string(e.step) + ":" + v.tensor_strings.at(0));
    }
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"samples@1", "summary@4:epoch done"}));
  EXPECT_NE(tb_error_of([&] { model.log_text("x", "y"); }).find("not attached"), std::string::npos)
      << "detached after the stage";
}

TEST(TensorBoardFit, HistogramMonitorLogsWeightsAndGradientsEveryNSteps) {
  ScratchDir dir;
  auto recording = std::make_shared<TbRecordingLogger>();
  auto board = std::make_shared<volt::loggers::TensorBoardLogger>(dir.path());
  TrainerOptions o = quiet_options(dir.path());
  o.logger = true;
  BoringModule model;
  Trainer trainer(o, {std::make_shared<volt::callbacks::HistogramMonitor>(2)}, {recording, board});
  trainer.fit(model, random_loader(20, 4, 1));  // 5 optimizer steps: 0 .. 4
  const std::vector<std::string> expected = {
      "weights/layer.weight@0", "gradients/layer.weight@0", "weights/layer.bias@0", "gradients/layer.bias@0",
      "weights/layer.weight@2", "gradients/layer.weight@2", "weights/layer.bias@2", "gradients/layer.bias@2",
      "weights/layer.weight@4", "gradients/layer.weight@4", "weights/layer.bias@4", "gradients/layer.bias@4"};
  EXPECT_EQ(recording->histograms, expected);
  size_t histograms = 0;
  for (const auto& e : volt::loggers::read_events(board->event_file_path())) {
    for (const auto& v : e.values) {
      if (v.kind != volt::loggers::SummaryValue::Kind::kHistogram) continue;
      ++histograms;
      EXPECT_EQ(v.histogram.num, v.tag.find("layer.weight") != std::string::npos ? 64.0 : 2.0) << v.tag;
    }
  }
  EXPECT_EQ(histograms, expected.size());

  EXPECT_THROW(volt::callbacks::HistogramMonitor(0), volt::ConfigError);
  EXPECT_THROW(volt::callbacks::HistogramMonitor(1, false, false), volt::ConfigError);
  TrainerOptions none = quiet_options(dir.path());
  Trainer without(none, {std::make_shared<volt::callbacks::HistogramMonitor>(1)});
  BoringModule other;
  const std::string why = tb_error_of([&] { without.fit(other, random_loader(8, 4, 1)); });
  EXPECT_NE(why.find("HistogramMonitor needs a logger"), std::string::npos) << why;
}

/// Raises SIGTERM inside the training step of global step `at`.
class Terminated : public BoringModule {
 public:
  explicit Terminated(int64_t at) : at_(at) {}
  at::Tensor training_step(volt::Batch& batch, volt::StepContext& ctx) override {
    if (ctx.global_step() == at_) std::raise(SIGTERM);
    return BoringModule::training_step(batch, ctx);
  }

 private:
  int64_t at_;
};

TEST(TensorBoardFit, SigtermStopKeepsEveryLoggedRowInTheEventFile) {
  ScratchDir dir;
  TrainerOptions o = quiet_options(dir.path());
  o.logger = {"csv", "tensorboard"};
  o.log_every_n_steps = 1;
  o.max_epochs = 5;
  Terminated model(6);
  Trainer trainer(o);
  trainer.fit(model, random_loader(16, 4, 1));
  EXPECT_EQ(trainer.state().interrupted_by, SIGTERM);
  const auto events = tb::event_files(dir.path());
  ASSERT_EQ(events.size(), 1u);
  std::vector<int64_t> loss_steps;
  for (const auto& p : volt::loggers::read_event_scalars(events[0])) {
    if (p.tag == "train_loss") loss_steps.push_back(p.step);
  }
  // The step that saw the signal (global step 6) finishes and is logged, then fit stops.
  EXPECT_EQ(loss_steps, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6})) << "rows lost at the stop";
  size_t csv_loss_rows = 0;
  for (const auto& [step, m] : csv_rows(fs::path(events[0]).parent_path().string() + "/metrics.csv")) {
    csv_loss_rows += m.count("train_loss");
  }
  EXPECT_EQ(csv_loss_rows, loss_steps.size());
}

}  // namespace
