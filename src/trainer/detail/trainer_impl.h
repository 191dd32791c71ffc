#pragma once
// The Trainer's parts, its TrainerView and the code of its stages: trainer.cpp (the public
// entries), stages.cpp (running a stage in this process) and stage_launch.cpp (the one call
// of the strategy's launcher, and the spawn launchers' hand-over).
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>

#include <torch/optim/optimizer.h>

#include "volt/callbacks/model_checkpoint.h"
#include "volt/checkpoint_io/safetensors.h"
#include "volt/connectors/callback_connector.h"
#include "volt/connectors/checkpoint_connector.h"
#include "volt/connectors/data_connector.h"
#include "volt/connectors/logger_connector.h"
#include "volt/connectors/signal_connector.h"
#include "volt/core/error.h"
#include "volt/core/error_boundary.h"
#include "volt/core/trainer_control.h"
#include "volt/loggers/csv_logger.h"
#include "volt/loggers/logger_registry.h"
#include "volt/loops/loop.h"
#include "volt/profilers/profiler.h"
#include "volt/trainer/trainer.h"

namespace volt {

class Trainer::Impl : public TrainerView, public TrainerControl {
 public:
  Impl(Trainer& owner, std::vector<std::shared_ptr<callbacks::Callback>> user_callbacks,
       std::vector<std::shared_ptr<loggers::Logger>> user_loggers, connectors::PluginObjects plugins)
      : owner_(owner),
        accelerator_connector_(owner.options_, std::move(plugins)),
        strategy_(accelerator_connector_.create_strategy()),
        callback_connector_(std::move(user_callbacks), owner.options_),
        logger_connector_(make_loggers(owner.options_, std::move(user_loggers)), owner.options_.log_every_n_steps,
                          *strategy_),
        checkpoint_connector_(*strategy_) {}

  /// The run's loggers: the objects given, or those `logger` names (true: one CSV
  /// logger), none under fast_dev_run. Every logger after the first follows the first
  /// one's version, so that all write into one version_N (Lightning's layout).
  static std::vector<std::shared_ptr<loggers::Logger>> make_loggers(const TrainerOptions& o,
                                                                    std::vector<std::shared_ptr<loggers::Logger>> given) {
    if (o.fast_dev_run > 0) return {};  // a debugging run leaves no logs behind
    std::vector<std::shared_ptr<loggers::Logger>> out;
    if (!given.empty()) {
      if (!o.logger) {
        throw ConfigError("loggers were passed to the Trainer but logger=false. Remove the loggers or set logger=true.");
      }
      if (!o.logger.names().empty()) {
        throw ConfigError("loggers were passed to the Trainer and logger='" + o.logger.to_string() +
                          "' names loggers too. Use one of the two: add those loggers to the objects passed, or "
                          "register yours with volt::loggers::register_logger and name it in logger=.");
      }
      for (auto& l : given) {
        if (!l) throw ConfigError("loggers contains a null pointer; pass constructed loggers only.");
      }
      out = std::move(given);
    } else if (!o.logger) {
      return {};
    } else if (o.logger.names().empty()) {
      out.push_back(std::make_shared<loggers::CSVLogger>(o.default_root_dir));
    } else {
      for (const auto& name : o.logger.names()) {
        auto logger = loggers::logger_registry().create(name, o);
        if (!logger) throw ConfigError("the factory of logger '" + name + "' returned a null pointer.");
        out.push_back(std::move(logger));
      }
    }
    if (out.size() > 1) {
      const std::string version = out.front()->version();
      for (size_t i = 1; i < out.size(); ++i) out[i]->follow_version(version);
    }
    return out;
  }

  // --- TrainerView ---
  const TrainerState& state() const override { return owner_.state_; }
  const MetricMap& callback_metrics() const override { return logger_connector_.callback_metrics(); }
  const MetricMap& progress_bar_metrics() const override { return logger_connector_.progress_bar_metrics(); }
  const Module& module() const override {
    if (module_ == nullptr) throw Error("no module is attached to the Trainer yet; run fit/validate/test first.");
    return *module_;
  }
  const std::vector<std::shared_ptr<torch::optim::Optimizer>>& optimizers() const override { return optimizers_; }
  const std::vector<LRSchedulerConfig>& lr_schedulers() const override { return lr_schedulers_; }
  std::string log_dir() const override {
    return const_cast<connectors::LoggerConnector&>(logger_connector_).log_dir(owner_.options_.default_root_dir);
  }
  bool has_loggers() const override { return logger_connector_.has_loggers(); }
  void save_checkpoint(const std::string& path, bool weights_only) override {
    if (owner_.options_.fast_dev_run > 0) return;  // Lightning: fast_dev_run writes no checkpoints
    if (module_ == nullptr) throw Error("save_checkpoint('" + path + "') before any stage ran: nothing to save.");
    profilers::Profiler::Guard timed(profiler_.get(), profiler_ ? profiler_->action_id("save_checkpoint") : 0);
    checkpoint_connector_.save(parts(), path, weights_only, logger_connector_.version());
  }
  void save_weights_safetensors(const std::string& path) override {
    if (owner_.options_.fast_dev_run > 0) return;
    if (module_ == nullptr) throw Error("save_weights_safetensors('" + path + "') before any stage ran: nothing to save.");
    if (!strategy_->is_global_zero()) return;
    try {
      checkpoint_io::save_module_safetensors(*module_, path,
                                             {{"format", "pt"},
                                              {"epoch", std::to_string(owner_.state_.current_epoch)},
                                              {"global_step", std::to_string(owner_.state_.global_step)}});
    } catch (const CheckpointError&) {
      throw;
    } catch (const Error& e) {
      throw CheckpointError(std::string("saving weights failed: ") + e.what());
    }
  }
  void save_checkpoint_without_collective(const std::string& path) override {
    if (owner_.options_.fast_dev_run > 0) return;
    if (module_ == nullptr) throw Error("save_checkpoint('" + path + "') before any stage ran: nothing to save.");
    // The strategy's save would wait for every rank in a barrier; a failing run's other ranks may never come.
    strategy_->save_checkpoint_without_collective(
        checkpoint_connector_.dump(parts(), /*weights_only=*/false, logger_connector_.version()), path);
  }
  void set_accumulate_grad_batches(int64_t factor) override {
    if (factor < 1) {
      throw ConfigError("accumulate_grad_batches=" + std::to_string(factor) +
                        " was asked for by a callback; it must be 1 (no accumulation) or more.");
    }
    owner_.state_.accumulate_grad_batches = factor;
  }
  void remove_checkpoint(const std::string& path) override { strategy_->remove_checkpoint(path); }
  void request_stop(const std::string& reason) override {
    auto& state = owner_.state_;
    if (!state.should_stop && state.is_global_zero && !reason.empty()) std::cout << "\nvolt: " << reason << std::endl;
    state.should_stop = true;
    state.stop_reason = reason;
  }
  void log_metrics(const MetricMap& metrics, int64_t step) override { logger_connector_.log_metrics(metrics, step); }
  void log_text(const std::string& tag, const std::string& text, int64_t step) override {
    if (!strategy_->is_global_zero()) return;
    for (const auto& l : logger_connector_.loggers()) l->log_text(tag, text, step);
  }
  void log_histogram(const std::string& tag, const at::Tensor& values, int64_t step) override {
    if (!strategy_->is_global_zero()) return;
    for (const auto& l : logger_connector_.loggers()) l->log_histogram(tag, values, step);
  }
  void log_image(const std::string& tag, const at::Tensor& image, int64_t step) override {
    if (!strategy_->is_global_zero()) return;
    for (const auto& l : logger_connector_.loggers()) l->log_image(tag, image, step);
  }
  bool reduce_boolean_decision(bool decision, bool all) override {
    return strategy_->reduce_boolean_decision(decision, all);
  }
  std::string broadcast_from_rank_zero(const std::string& value) override {
    return strategy_->broadcast_object(value, 0);
  }
  // --- TrainerControl ---
  at::Tensor all_reduce_mean(const at::Tensor& tensor) override {
    return strategy_->all_reduce(tensor, strategies::ReduceOp::kMean);
  }
  void set_lr_schedulers(std::vector<LRSchedulerConfig> schedulers) override;
  void forward_training_data() override;

  connectors::CheckpointParts parts() {
    return connectors::CheckpointParts{*module_, optimizers_, lr_schedulers_, owner_.state_,
                                       callback_connector_.callbacks(), *this};
  }

  /// "best" through the first ModelCheckpoint; "last": the newest "last" checkpoint of
  /// any ModelCheckpoint (its last_model_path or a last*.ckpt in its folder), or, when
  /// there is none, "" after a warning (rank 0): Lightning then trains from scratch (fit)
  /// or uses the weights in memory, so that ckpt_path="last" can be set before the first
  /// run. Anything else is a path.
  std::string resolve_ckpt_path(const std::string& ckpt_path, const std::string& fn = "fit") const {
    if (ckpt_path != "last" && ckpt_path != "best") return ckpt_path;
    const auto cbs = callback_connector_.checkpoint_callbacks();
    if (ckpt_path == "last") {
      std::string newest;
      std::filesystem::file_time_type newest_time{};
      for (const auto& cb : cbs) {
        for (const std::string& path : cb->find_last_checkpoints()) {
          std::error_code ec;
          const auto time = std::filesystem::last_write_time(path, ec);
          if (!ec && (newest.empty() || time > newest_time)) {
            newest = path;
            newest_time = time;
          }
        }
      }
      if (newest.empty() && owner_.state_.is_global_zero) {
        std::cerr << "[volt] warning: " << fn << "(ckpt_path=\"last\") is set, but there is no last checkpoint"
                  << (cbs.empty() ? " (this Trainer has no ModelCheckpoint)" : "") << ", so none is loaded and "
                  << (fn == "fit" ? "training starts from scratch" : "the weights in memory are used")
                  << ". To write one, set ModelCheckpoint's save_last=true.\n";
      }
      return newest;
    }
    if (cbs.empty()) {
      throw ConfigError("ckpt_path=\"" + ckpt_path + "\" needs a ModelCheckpoint callback, and this Trainer has none "
                        "(enable_checkpointing=false?). Pass a file path instead.");
    }
    const std::string path = cbs.front()->best_model_path();
    if (path.empty()) {
      throw ConfigError(
          "ckpt_path=\"best\" but the ModelCheckpoint callback has no best checkpoint yet. Run fit "
          "first or pass a file path.");
    }
    return path;
  }

  loops::LoopContext loop_context(Module& module, connectors::DataConnector& data,
                                  connectors::SignalConnector* signals = nullptr) {
    return loops::LoopContext{owner_.options_, owner_.state_, module,           *strategy_, callback_connector_,
                              logger_connector_, data,         *this,           optimizers_, lr_schedulers_,
                              signals,
                              loops::Hooks(callback_connector_, module, *strategy_, profiler_.get()),
                              precision::clip_algorithm_from_flag(owner_.options_.gradient_clip_algorithm)};
  }

  // --- stages ---
  /// What a stage call gives back: validate/test's metrics, predict's predictions.
  struct StageResult {
    MetricMap metrics;
    std::vector<at::Tensor> predictions;
  };
  /// A stage's code in this process. `handover_dir`: in a worker of a spawn launcher, the
  /// folder with the parent's start state; empty otherwise.
  using StageBody = std::function<StageResult(const std::string& handover_dir)>;
  /// The step of a stage that runs now, and the error kind a foreign exception there becomes.
  struct StagePhase {
    std::string what;
    ErrorKind kind = ErrorKind::kError;
  };

  /// The public stage entries' way in: each stage call goes through launch() (stage_launch.cpp).
  void fit_stage(Module& module, connectors::DataConnector& data, const std::string& ckpt_path);
  MetricMap evaluation_stage(Module& module, connectors::DataConnector& data, const std::string& ckpt_path,
                             bool testing);
  std::vector<at::Tensor> predict_stage(Module& module, connectors::DataConnector& data,
                                        const std::string& ckpt_path);
  /// The one place where a stage call (fit, validate, test, predict) starts: through the
  /// strategy's launcher when it has one (which runs `body` here, in its workers, or both),
  /// else `body` here.
  StageResult launch(Stage stage, Module& module, const StageBody& body);
  /// The spawn launchers' hand-over, through `dir` (stage_launch.cpp): the parent's state
  /// for the workers, restored in a worker (`full`: optimizers, progress and callbacks too,
  /// when the parent wrote them), the result handed back by rank 0, taken over by the parent.
  void spawn_save_start(Stage stage, Module& module, const std::string& dir);
  void spawn_restore_start(Module& module, const std::string& dir, bool full);
  void spawn_hand_back(Stage stage, const StageResult& result, const std::string& dir);
  StageResult spawn_take_back(Stage stage, Module& module, const std::string& dir);
  class LaunchedTrainerStage;

  /// The stages' bodies in this process (stages.cpp).
  void run_fit(Module& module, connectors::DataConnector& data, const std::string& ckpt_path,
               const std::string& handover_dir);
  MetricMap run_evaluation(Module& module, connectors::DataConnector& data, const std::string& ckpt_path,
                           bool testing, const std::string& handover_dir);
  std::vector<at::Tensor> run_predict(Module& module, connectors::DataConnector& data, const std::string& ckpt_path,
                                      const std::string& handover_dir);
  /// Set-up and teardown around `body`, and the one error boundary of a stage (stages.cpp).
  template <typename Body>
  auto run_stage(Module& module, connectors::DataConnector& data, Stage stage, StagePhase& phase, Body&& body)
      -> decltype(body());
  /// configure_optimizers, once per module (a second fit continues with their state).
  void configure_optimizers_once(Module& module);
  void load_weights(Module& module, const std::string& ckpt_path);
  static void print_metrics(const std::string& stage, const MetricMap& metrics);

  Trainer& owner_;
  connectors::AcceleratorConnector accelerator_connector_;
  std::shared_ptr<strategies::Strategy> strategy_;
  connectors::CallbackConnector callback_connector_;
  connectors::LoggerConnector logger_connector_;
  connectors::CheckpointConnector checkpoint_connector_;
  Module* module_ = nullptr;
  /// The data of the stage that runs now (nullptr between stages).
  connectors::DataConnector* data_ = nullptr;
  /// The `profiler` option's profiler or Trainer::set_profiler's; nullptr: profiling off.
  std::shared_ptr<profilers::Profiler> profiler_;
  std::vector<std::shared_ptr<torch::optim::Optimizer>> optimizers_;
  std::vector<LRSchedulerConfig> lr_schedulers_;
  bool optimizers_configured_for_ = false;
  const Module* configured_module_ = nullptr;
};

}  // namespace volt
