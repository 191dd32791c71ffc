// Where a stage starts: the one call of the strategy's launcher, and the Trainer's side of
// the spawn launchers' hand-over (ddp_spawn, xla): the parent's state for the workers
// through a private folder, rank 0's result back through the same folder.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <ATen/core/ivalue.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include "trainer/detail/trainer_impl.h"
#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/strategies/launchers/launcher.h"

namespace volt {
namespace {

constexpr const char* kStartFile = "start.ckpt";
constexpr const char* kResultFile = "result.ckpt";
constexpr const char* kPredictionsFile = "predictions.pt";

MetricMap metrics_of(const Checkpoint& ckpt) {
  MetricMap out;
  const auto& volt = connectors::CheckpointConnector::volt_section(ckpt);
  if (!volt.is_object()) return out;
  const auto it = volt.find("metrics");
  if (it == volt.end() || !it->is_object()) return out;
  for (const auto& [k, v] : it->items()) {
    if (v.is_number()) out[k] = v.get<double>();
  }
  return out;
}

}  // namespace

/// A stage call as the strategy's launcher sees it; the result stays here.
class Trainer::Impl::LaunchedTrainerStage final : public strategies::launchers::LaunchedStage {
 public:
  LaunchedTrainerStage(Impl& impl, Stage stage, Module& module, const StageBody& body)
      : impl_(impl), stage_(stage), module_(module), body_(body) {}

  std::string name() const override { return to_string(stage_); }
  void run(const std::string& handover_dir) override { result = body_(handover_dir); }
  void save_start(const std::string& dir) override { impl_.spawn_save_start(stage_, module_, dir); }
  void hand_back(const std::string& dir) override { impl_.spawn_hand_back(stage_, result, dir); }
  void take_back(const std::string& dir) override { result = impl_.spawn_take_back(stage_, module_, dir); }

  StageResult result;

 private:
  Impl& impl_;
  Stage stage_;
  Module& module_;
  const StageBody& body_;
};

Trainer::Impl::StageResult Trainer::Impl::launch(Stage stage, Module& module, const StageBody& body) {
  strategy_->check_module(module);
  strategies::launchers::Launcher* launcher = strategy_->launcher();
  if (launcher == nullptr) return body("");
  LaunchedTrainerStage launched(*this, stage, module, body);
  launcher->launch(launched);
  return std::move(launched.result);
}

void Trainer::Impl::fit_stage(Module& module, connectors::DataConnector& data, const std::string& ckpt_path) {
  launch(Stage::kFit, module, [&](const std::string& handover_dir) {
    run_fit(module, data, ckpt_path, handover_dir);
    return StageResult{};
  });
}

MetricMap Trainer::Impl::evaluation_stage(Module& module, connectors::DataConnector& data, const std::string& ckpt_path,
                                          bool testing) {
  const Stage stage = testing ? Stage::kTest : Stage::kValidate;
  return launch(stage, module,
                [&](const std::string& handover_dir) {
                  return StageResult{run_evaluation(module, data, ckpt_path, testing, handover_dir), {}};
                })
      .metrics;
}

std::vector<at::Tensor> Trainer::Impl::predict_stage(Module& module, connectors::DataConnector& data,
                                                     const std::string& ckpt_path) {
  return launch(Stage::kPredict, module,
                [&](const std::string& handover_dir) {
                  return StageResult{{}, run_predict(module, data, ckpt_path, handover_dir)};
                })
      .predictions;
}

void Trainer::Impl::spawn_save_start(Stage stage, Module& module, const std::string& dir) {
  module_ = &module;
  // What the workers start from: for a fit that continues an earlier one, everything
  // (weights, optimizers, progress, callbacks); otherwise the module's weights.
  const bool full = stage == Stage::kFit && configured_module_ == &module;
  const Checkpoint start = checkpoint_connector_.dump(parts(), !full, logger_connector_.version());
  strategy_->checkpoint_io().save_checkpoint(start, dir + "/" + kStartFile);
}

void Trainer::Impl::spawn_restore_start(Module& module, const std::string& dir, bool full) {
  const std::string path = dir + "/" + kStartFile;
  const Checkpoint start = strategy_->checkpoint_io().load_checkpoint(path);
  connectors::CheckpointConnector::restore_module(module, start, path);
  if (full && !connectors::CheckpointConnector::volt_section(start).value("weights_only", false)) {
    checkpoint_connector_.restore_training_state(parts(), start, path);
  }
}

void Trainer::Impl::spawn_hand_back(Stage stage, const StageResult& result, const std::string& dir) {
  auto& strategy = *strategy_;
  try {
    if (stage == Stage::kPredict) {
      if (strategy.is_global_zero()) {
        c10::List<at::Tensor> list;
        for (const auto& t : result.predictions) list.push_back(t.cpu());
        const std::vector<char> bytes = torch::jit::pickle_save(list);
        checkpoint_io::atomic_write(dir + "/" + kPredictionsFile, bytes.data(), bytes.size());
      }
    } else {
      if (stage != Stage::kFit) logger_connector_.set_callback_metrics(result.metrics);
      // Rank 0 writes; every rank takes part (the strategy decides who writes).
      checkpoint_connector_.save(parts(), dir + "/" + kResultFile, /*weights_only=*/stage != Stage::kFit,
                                 logger_connector_.version());
    }
    strategy.barrier("spawn_handback");
  } catch (const std::exception& e) {
    throw DistributedError("spawned rank " + std::to_string(strategy.global_rank()) + " could not hand its result of " +
                           to_string(stage) + " back: " + e.what());
  }
}

Trainer::Impl::StageResult Trainer::Impl::spawn_take_back(Stage stage, Module& module, const std::string& dir) {
  StageResult out;
  if (stage == Stage::kPredict) {
    const std::string path = dir + "/" + kPredictionsFile;
    std::ifstream in(path, std::ios::binary);
    if (!in) throw DistributedError("the spawned workers finished but left no predictions (" + path + ").");
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto list = torch::jit::pickle_load(bytes).toTensorList();
    for (size_t i = 0; i < list.size(); ++i) out.predictions.push_back(list.get(i));
    return out;
  }
  const std::string path = dir + "/" + kResultFile;
  const Checkpoint result = strategy_->checkpoint_io().load_checkpoint(path);
  out.metrics = metrics_of(result);
  if (stage == Stage::kFit) {
    configure_optimizers_once(module);
    module.on_load_checkpoint(result);
    connectors::CheckpointConnector::restore_module(module, result, path);
    checkpoint_connector_.restore_training_state(parts(), result, path);
  }
  logger_connector_.set_callback_metrics(out.metrics);
  return out;
}

}  // namespace volt
