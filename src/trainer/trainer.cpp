#include "volt/trainer/trainer.h"

#include "trainer/detail/trainer_impl.h"

#include <ATen/Context.h>
#include <torch/optim/optimizer.h>

#include <iostream>

#include "volt/callbacks/model_checkpoint.h"
#include "volt/checkpoint_io/safetensors.h"
#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/connectors/callback_connector.h"
#include "volt/connectors/checkpoint_connector.h"
#include "volt/connectors/data_connector.h"
#include "volt/connectors/logger_connector.h"
#include "volt/connectors/signal_connector.h"
#include "volt/core/error.h"
#include "volt/core/error_boundary.h"
#include "volt/core/file_check.h"
#include "volt/core/seed.h"
#include "volt/environments/torchelastic_error_file.h"
#include "volt/loggers/csv_logger.h"
#include "volt/loops/evaluation_loop.h"
#include "volt/loops/fit_loop.h"
#include "volt/loops/prediction_loop.h"

namespace volt {

namespace {

TrainerOptions apply_fast_dev_run(TrainerOptions o) {
  if (o.fast_dev_run <= 0) return o;
  const auto n = BatchLimit::count(o.fast_dev_run);
  o.limit_train_batches = o.limit_val_batches = o.limit_test_batches = o.limit_predict_batches = n;
  o.max_steps = o.fast_dev_run;
  o.max_epochs = 1;
  o.num_sanity_val_steps = 0;
  o.val_check_interval = BatchLimit::fraction(1.0);
  o.check_val_every_n_epoch = 1;
  o.log_every_n_steps = 1;
  return o;
}

}  // namespace

Trainer::Trainer(TrainerOptions options, std::vector<std::shared_ptr<callbacks::Callback>> callbacks,
                 std::vector<std::shared_ptr<loggers::Logger>> loggers,
                 std::vector<std::shared_ptr<precision::Precision>> precision_plugins)
    : Trainer(std::move(options),
              TrainerPlugins{nullptr, nullptr, {precision_plugins.begin(), precision_plugins.end()}},
              std::move(callbacks), std::move(loggers)) {}

Trainer::Trainer(TrainerOptions options, TrainerPlugins plugins,
                 std::vector<std::shared_ptr<callbacks::Callback>> callbacks,
                 std::vector<std::shared_ptr<loggers::Logger>> loggers) {
  try {
    validate_trainer_options(options);
    options_ = apply_fast_dev_run(std::move(options));
    state_.default_root_dir = options_.default_root_dir;
    impl_ = std::make_unique<Impl>(*this, std::move(callbacks), std::move(loggers), plugins.sorted());
    impl_->profiler_ = profilers::make_profiler(options_.profiler);
    state_.is_global_zero = impl_->strategy_->is_global_zero();
    state_.world_size = impl_->strategy_->world_size();
    if (options_.seed) seed_everything(*options_.seed);
    if (options_.deterministic) at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
  } catch (...) {
    rethrow_as_volt_error("the Trainer could not be set up from its options", ErrorKind::kConfig);
  }
}

Trainer::~Trainer() = default;

const connectors::Plan& Trainer::plan() const {
  return impl_->accelerator_connector_.plan();
}
const MetricMap& Trainer::callback_metrics() const {
  return impl_->logger_connector_.callback_metrics();
}
const MetricMap& Trainer::logged_metrics() const {
  return impl_->logger_connector_.logged_metrics();
}
const MetricMap& Trainer::progress_bar_metrics() const {
  return impl_->logger_connector_.progress_bar_metrics();
}
const std::vector<std::shared_ptr<callbacks::Callback>>& Trainer::callbacks() const {
  return impl_->callback_connector_.callbacks();
}
const std::vector<std::shared_ptr<loggers::Logger>>& Trainer::loggers() const {
  return impl_->logger_connector_.loggers();
}
std::string Trainer::log_dir() const {
  return impl_->log_dir();
}
std::string Trainer::best_model_path() const {
  const auto cbs = impl_->callback_connector_.checkpoint_callbacks();
  return cbs.empty() ? std::string() : cbs.front()->best_model_path();
}
strategies::Strategy& Trainer::strategy() const {
  return *impl_->strategy_;
}

void Trainer::set_profiler(std::shared_ptr<profilers::Profiler> profiler) {
  if (state_.fn != TrainerFn::kNone) {
    throw Error(std::string("set_profiler was called while a stage runs (") + to_string(state_.fn) +
                "); set the profiler before fit, validate, test or predict.");
  }
  impl_->profiler_ = std::move(profiler);
}

profilers::Profiler* Trainer::profiler() const {
  return impl_->profiler_.get();
}

void Trainer::set_max_steps(int64_t max_steps) {
  if (max_steps < -1) {
    throw ConfigError("max_steps=" + std::to_string(max_steps) + " is not valid. Use -1 (no limit) or a step count.");
  }
  options_.max_steps = max_steps;
}

void Trainer::set_max_epochs(int64_t max_epochs) {
  if (max_epochs < -1) {
    throw ConfigError("max_epochs=" + std::to_string(max_epochs) + " is not valid. Use -1 or an epoch count.");
  }
  options_.max_epochs = max_epochs;
}

void Trainer::save_checkpoint(const std::string& path, bool weights_only) {
  try {
    impl_->save_checkpoint(path, weights_only);
  } catch (...) {
    rethrow_as_volt_error("save_checkpoint(" + quote_path(path) + ")", ErrorKind::kCheckpoint);
  }
}

namespace {

/// Runs a public stage entry: whatever escapes (the spawn launcher's side, a DataConnector
/// refusing a DataModule) leaves as a volt::Error.
template <typename Body>
auto guarded(const char* stage, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (...) {
    rethrow_as_volt_error(std::string(stage) + " failed");
  }
}

/// The step of a stage that runs now, and the error kind a foreign exception there becomes.
struct StagePhase {
  std::string what;
  ErrorKind kind = ErrorKind::kError;
};

const char* stage_name(Stage stage) {
  switch (stage) {
    case Stage::kFit: return "fit";
    case Stage::kValidate: return "validate";
    case Stage::kTest: return "test";
    case Stage::kPredict: return "predict";
  }
  return "stage";
}

/// Runs `body` as one stage: set-up and teardown around it, and on failure the
/// callbacks' on_exception, the loggers closed as "failed", then the error re-thrown as a
/// volt::Error that names the stage and the step that failed (the one error boundary:
/// a LibTorch or standard exception never leaves a stage as it is). `phase` is the step
/// running now; the body updates it.
template <typename Body>
auto run_stage(Trainer::Impl& impl, TrainerState& state, Module& module, connectors::DataConnector& data, Stage stage,
               StagePhase& phase, Body&& body) -> decltype(body()) {
  auto& strategy = *impl.strategy_;
  impl.module_ = &module;
  // Module::log_image/log_text reach the loggers through the view while the stage runs.
  struct ViewGuard {
    Module& m;
    ~ViewGuard() { m.set_trainer_view(nullptr); }
  } view_guard{module};
  module.set_trainer_view(&impl);
  using CB = callbacks::Callback;
  const std::string name = stage_name(stage);
  try {
    phase = {"setting up the process group and devices", ErrorKind::kDistributed};
    strategy.setup_environment();
    impl.logger_connector_.sync_across_ranks();
    if (auto* profiler = impl.profiler_.get()) {
      phase = {"setting up the profiler", ErrorKind::kError};
      profiler->setup(name, impl.log_dir(), strategy.global_rank(), strategy.world_size());
    }
    phase = {"preparing the data (DataModule prepare_data/setup, " + name + ")", ErrorKind::kData};
    data.prepare(stage, strategy.local_rank() == 0);
    data.distribute(strategy.world_size(), strategy.global_rank());
    phase = {"Module::setup", ErrorKind::kError};
    module.setup(stage);
    impl.callback_connector_.call([&](CB& cb) { cb.setup(impl, stage); });
    phase = {"moving the model to its device", ErrorKind::kError};
    strategy.setup(module);
    auto result = body();
    phase = {"tearing down", ErrorKind::kError};
    impl.callback_connector_.call([&](CB& cb) { cb.teardown(impl, stage); });
    module.teardown(stage);
    data.teardown(stage);
    if (auto* profiler = impl.profiler_.get()) {
      phase = {"writing the profiler's report", ErrorKind::kError};
      profiler->describe();
      profiler->teardown();
    }
    impl.logger_connector_.finalize("success");
    strategy.teardown();
    state.fn = TrainerFn::kNone;
    state.stage = RunningStage::kNone;
    return result;
  } catch (...) {
    const std::exception_ptr error = to_volt_error(std::current_exception(), name + " failed while " + phase.what,
                                                   phase.kind);
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      // Under torchrun: the failure summary names this error (a no-op elsewhere).
      environments::record_torchelastic_error(e, std::string("Trainer stage ") + to_string(stage) +
                                                     " on global rank " + std::to_string(strategy.global_rank()));
      impl.callback_connector_.call([&](CB& cb) {
        try {
          cb.on_exception(impl, e);
        } catch (...) {
          // The original error is the one to report.
        }
      });
    }
    try {
      // What was timed up to the failure is reported too (Lightning's _teardown).
      if (auto* profiler = impl.profiler_.get()) {
        profiler->describe();
        profiler->teardown();
      }
    } catch (...) {
    }
    try {
      strategy.on_exception();
      impl.logger_connector_.finalize("failed");
      strategy.teardown();
    } catch (...) {
    }
    state.fn = TrainerFn::kNone;
    state.stage = RunningStage::kNone;
    std::rethrow_exception(error);
  }
}

}  // namespace

void Trainer::fit(Module& module, data::DataModule& datamodule, const std::string& ckpt_path) {
  guarded("fit", [&] {
    connectors::DataConnector data(datamodule);
    run_fit(module, data, ckpt_path);
  });
}

void Trainer::fit(Module& module, std::shared_ptr<data::DataLoader> train, std::shared_ptr<data::DataLoader> val,
                  const std::string& ckpt_path) {
  if (!train) throw ConfigError("fit was given a null train loader.");
  guarded("fit", [&] {
    connectors::DataConnector data(std::move(train), std::move(val), nullptr, nullptr);
    run_fit(module, data, ckpt_path);
  });
}

void Trainer::configure_optimizers_once(Module& module) {
  // Optimizers are built once per module: a second fit() continues with their state.
  const auto& o = options_;
  auto& impl = *impl_;
  if (impl.configured_module_ != &module) {
    OptimizerConfig config = module.configure_optimizers();
    if (config.optimizers.empty()) {
      throw ConfigError("configure_optimizers of " + module.name() +
                        " returned no optimizer. Return at least one, e.g. "
                        "std::make_shared<torch::optim::Adam>(parameters(), 1e-3).");
    }
    for (const auto& opt : config.optimizers) {
      if (!opt) throw ConfigError("configure_optimizers of " + module.name() + " returned a null optimizer.");
    }
    if (module.automatic_optimization() && config.optimizers.size() > 1) {
      throw ConfigError("configure_optimizers returned " + std::to_string(config.optimizers.size()) +
                        " optimizers with automatic optimization on. Call set_automatic_optimization(false) and "
                        "step them yourself in training_step (ctx.manual_backward, ctx.optimizer_step).");
    }
    if (!module.automatic_optimization() && o.accumulate_grad_batches > 1) {
      throw ConfigError("accumulate_grad_batches=" + std::to_string(o.accumulate_grad_batches) +
                        " with manual optimization: the Trainer does not step optimizers in manual mode, so it "
                        "cannot accumulate. Set accumulate_grad_batches=1 and step every N batches in "
                        "training_step yourself.");
    }
    for (const auto& s : config.lr_schedulers) {
      if (!s.scheduler) throw ConfigError("configure_optimizers returned an LR scheduler config without a scheduler.");
      if (s.frequency < 1) {
        throw ConfigError("an LR scheduler has frequency=" + std::to_string(s.frequency) + "; use 1 or more.");
      }
    }
    impl.optimizers_ = std::move(config.optimizers);
    impl.lr_schedulers_ = std::move(config.lr_schedulers);
    impl.configured_module_ = &module;
    state_.current_epoch = 0;
    state_.global_step = 0;
    state_.batches_done = 0;
    state_.batches_seen = 0;
  }
}

void Trainer::run_fit(Module& module, connectors::DataConnector& data, const std::string& ckpt_path) {
  auto& impl = *impl_;
  if (impl.spawn_parent()) {
    run_spawned(Stage::kFit, module, nullptr, nullptr);
    return;
  }
  const bool spawn_worker = impl.spawn_worker();
  if (spawn_worker && !spawn_worker_runs_this_call()) return;
  state_.fn = TrainerFn::kFitting;
  StagePhase phase;
  run_stage(impl, state_, module, data, Stage::kFit, phase, [&] {
    const auto& o = options_;
    phase = {"counting the batches of the loaders", ErrorKind::kData};
    state_.num_training_batches =
        connectors::DataConnector::num_batches(data.train_loader(), o.limit_train_batches, "limit_train_batches");
    state_.num_val_batches =
        connectors::DataConnector::num_batches(data.val_loader(), o.limit_val_batches, "limit_val_batches");
    if (state_.num_training_batches == 0) {
      throw ConfigError("fit has no training batch to run: the train loader has " +
                        std::to_string(data.train_loader()->num_batches()) +
                        " batches and limit_train_batches=" + o.limit_train_batches.to_string() +
                        ". Give more data or raise limit_train_batches.");
    }
    if (!o.val_check_interval.is_fraction && o.check_val_every_n_epoch && data.val_loader() &&
        o.val_check_interval.value > static_cast<double>(state_.num_training_batches)) {
      throw ConfigError("val_check_interval=" + o.val_check_interval.to_string() +
                        " is more than the " + std::to_string(state_.num_training_batches) +
                        " training batches of an epoch. Use a value up to " +
                        std::to_string(state_.num_training_batches) +
                        ", a fraction such as 0.5, or check_val_every_n_epoch=null to count batches across epochs.");
    }

    phase = {"configure_optimizers (building the optimizers and LR schedulers)", ErrorKind::kConfig};
    configure_optimizers_once(module);
    phase = {"removing temporary files of dead checkpoint writers", ErrorKind::kCheckpoint};
    if (state_.is_global_zero) checkpoint_io::remove_dead_writers_temp_files(o.default_root_dir);
    if (spawn_worker) spawn_worker_restore_start(module, /*full=*/true);
    std::string resume_from = ckpt_path;
    if (resume_from.empty()) {
      // A job requeued by SLURM continues from the checkpoint its predecessor saved.
      resume_from = connectors::SignalConnector::latest_requeue_checkpoint(o.default_root_dir);
      if (!resume_from.empty() && state_.is_global_zero) {
        std::cout << "volt: resuming from the requeue checkpoint " << resume_from << std::endl;
      }
    }
    if (!resume_from.empty()) {
      phase = {"resuming from the checkpoint " + quote_path(resume_from) +
                   " (model weights, optimizer and scheduler state, loops)",
               ErrorKind::kCheckpoint};
    }
    // "last" without a checkpoint yet resolves to nothing: training starts from scratch (Lightning's rule).
    const std::string path = resume_from.empty() ? std::string() : impl.resolve_ckpt_path(resume_from);
    if (!path.empty()) {
      const Checkpoint ckpt = impl.checkpoint_connector_.load(path);
      module.on_load_checkpoint(ckpt);
      connectors::CheckpointConnector::restore_module(module, ckpt, path);
      impl.checkpoint_connector_.restore_training_state(impl.parts(), ckpt, path);
    }
    phase = {"writing the hyperparameters to the loggers", ErrorKind::kError};
    impl.logger_connector_.log_hyperparams(module.hparams());

    using CB = callbacks::Callback;
    // SIGTERM/SIGINT during fit: finish the step, checkpoint, stop (see TrainingEpochLoop);
    // under SLURM also the requeue signal, which requeues the job after the checkpoint.
    connectors::SignalConnector signals(
        {SIGTERM, SIGINT},
        connectors::SignalConnector::slurm_requeue(o, impl.accelerator_connector_.plan().cluster_env, Environ::current()));
    state_.interrupted_by = 0;
    state_.interrupt_checkpoint.clear();
    auto ctx = impl.loop_context(module, data, &signals);
    phase = {"training (training_step, validation_step, backward, optimizer step, callbacks)", ErrorKind::kError};
    using loops::Hook;
    ctx.hooks.callbacks(Hook::on_fit_start, [&](CB& cb) { cb.on_fit_start(impl); });
    ctx.hooks.module(Hook::on_fit_start, [&] { module.on_fit_start(); });
    loops::FitLoop fit_loop(ctx);
    fit_loop.run();
    ctx.hooks.callbacks(Hook::on_fit_end, [&](CB& cb) { cb.on_fit_end(impl); });
    ctx.hooks.module(Hook::on_fit_end, [&] { module.on_fit_end(); });
    return 0;
  });
  if (spawn_worker) spawn_worker_finish(Stage::kFit, nullptr, nullptr);
}

MetricMap Trainer::validate(Module& module, data::DataModule& datamodule, const std::string& ckpt_path) {
  return guarded("validate", [&] {
    connectors::DataConnector data(datamodule);
    return run_evaluation(module, data, ckpt_path, /*testing=*/false);
  });
}

MetricMap Trainer::validate(Module& module, std::shared_ptr<data::DataLoader> loader, const std::string& ckpt_path) {
  if (!loader) throw ConfigError("validate was given a null loader.");
  return guarded("validate", [&] {
    connectors::DataConnector data(nullptr, std::move(loader), nullptr, nullptr);
    return run_evaluation(module, data, ckpt_path, /*testing=*/false);
  });
}

MetricMap Trainer::test(Module& module, data::DataModule& datamodule, const std::string& ckpt_path) {
  return guarded("test", [&] {
    connectors::DataConnector data(datamodule);
    return run_evaluation(module, data, ckpt_path, /*testing=*/true);
  });
}

MetricMap Trainer::test(Module& module, std::shared_ptr<data::DataLoader> loader, const std::string& ckpt_path) {
  if (!loader) throw ConfigError("test was given a null loader.");
  return guarded("test", [&] {
    connectors::DataConnector data(nullptr, nullptr, std::move(loader), nullptr);
    return run_evaluation(module, data, ckpt_path, /*testing=*/true);
  });
}

std::vector<at::Tensor> Trainer::predict(Module& module, data::DataModule& datamodule, const std::string& ckpt_path) {
  return guarded("predict", [&] {
    connectors::DataConnector data(datamodule);
    return run_predict(module, data, ckpt_path);
  });
}

std::vector<at::Tensor> Trainer::predict(Module& module, std::shared_ptr<data::DataLoader> loader,
                                         const std::string& ckpt_path) {
  if (!loader) throw ConfigError("predict was given a null loader.");
  return guarded("predict", [&] {
    connectors::DataConnector data(nullptr, nullptr, nullptr, std::move(loader));
    return run_predict(module, data, ckpt_path);
  });
}

void Trainer::load_weights(Module& module, const std::string& ckpt_path) {
  if (ckpt_path.empty()) return;
  const std::string path = impl_->resolve_ckpt_path(ckpt_path, to_string(state_.fn));
  if (path.empty()) return;  // "last" without a last checkpoint: the weights in memory
  const Checkpoint ckpt = impl_->checkpoint_connector_.load(path);
  module.on_load_checkpoint(ckpt);
  connectors::CheckpointConnector::restore_module(module, ckpt, path);
}

MetricMap Trainer::run_evaluation(Module& module, connectors::DataConnector& data, const std::string& ckpt_path,
                                  bool testing) {
  auto& impl = *impl_;
  const Stage stage = testing ? Stage::kTest : Stage::kValidate;
  if (impl.spawn_parent()) {
    MetricMap metrics;
    run_spawned(stage, module, &metrics, nullptr);
    return metrics;
  }
  const bool spawn_worker = impl.spawn_worker();
  if (spawn_worker && !spawn_worker_runs_this_call()) return {};
  state_.fn = testing ? TrainerFn::kTesting : TrainerFn::kValidating;
  StagePhase phase;
  MetricMap result = run_stage(impl, state_, module, data, stage, phase, [&] {
    if (spawn_worker) spawn_worker_restore_start(module, /*full=*/false);
    phase = {"loading the weights of the checkpoint " + quote_path(ckpt_path), ErrorKind::kCheckpoint};
    load_weights(module, ckpt_path);
    phase = {testing ? "testing (test_step)" : "validating (validation_step)", ErrorKind::kError};
    auto loader = testing ? data.test_loader() : data.val_loader();
    const int64_t n = connectors::DataConnector::num_batches(
        loader, testing ? options_.limit_test_batches : options_.limit_val_batches,
        testing ? "limit_test_batches" : "limit_val_batches");
    state_.num_val_batches = n;
    auto ctx = impl.loop_context(module, data);
    loops::EvaluationLoop loop(ctx, testing ? RunningStage::kTesting : RunningStage::kValidating);
    MetricMap metrics = loop.run(*loader, n);
    if (state_.is_global_zero && options_.enable_progress_bar) print_metrics(testing ? "test" : "validate", metrics);
    return metrics;
  });
  if (spawn_worker) spawn_worker_finish(stage, &result, nullptr);
  return result;
}

std::vector<at::Tensor> Trainer::run_predict(Module& module, connectors::DataConnector& data,
                                             const std::string& ckpt_path) {
  auto& impl = *impl_;
  if (impl.spawn_parent()) {
    std::vector<at::Tensor> predictions;
    run_spawned(Stage::kPredict, module, nullptr, &predictions);
    return predictions;
  }
  const bool spawn_worker = impl.spawn_worker();
  if (spawn_worker && !spawn_worker_runs_this_call()) return {};
  state_.fn = TrainerFn::kPredicting;
  StagePhase phase;
  auto predictions = run_stage(impl, state_, module, data, Stage::kPredict, phase, [&] {
    if (spawn_worker) spawn_worker_restore_start(module, /*full=*/false);
    phase = {"loading the weights of the checkpoint " + quote_path(ckpt_path), ErrorKind::kCheckpoint};
    load_weights(module, ckpt_path);
    phase = {"predicting (predict_step)", ErrorKind::kError};
    auto loader = data.predict_loader();
    const int64_t n = connectors::DataConnector::num_batches(loader, options_.limit_predict_batches,
                                                             "limit_predict_batches");
    auto ctx = impl.loop_context(module, data);
    loops::PredictionLoop loop(ctx);
    return loop.run(*loader, n);
  });
  if (spawn_worker) spawn_worker_finish(Stage::kPredict, nullptr, &predictions);
  return predictions;
}

void Trainer::print_metrics(const std::string& stage, const MetricMap& metrics) {
  if (metrics.empty()) return;
  size_t width = 6;
  for (const auto& [k, v] : metrics) width = std::max(width, k.size());
  std::cout << "\n" << stage << " metrics:\n";
  for (const auto& [k, v] : metrics) {
    std::cout << "  " << k << std::string(width - k.size() + 2, ' ') << v << "\n";
  }
  std::cout << std::flush;
}

}  // namespace volt
