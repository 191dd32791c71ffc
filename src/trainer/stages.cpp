// A stage in this process: set-up and teardown around the loops, the one error boundary,
// and the bodies of fit, validate/test and predict.
#include "trainer/detail/trainer_impl.h"

#include <algorithm>
#include <iostream>

#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/core/error_boundary.h"
#include "volt/core/file_check.h"
#include "volt/environments/torchelastic_error_file.h"
#include "volt/loops/evaluation_loop.h"
#include "volt/loops/fit_loop.h"
#include "volt/loops/forward_pass.h"
#include "volt/loops/prediction_loop.h"

namespace volt {

// On failure: the callbacks' on_exception, the loggers closed as "failed", then the error
// re-thrown as a volt::Error that names the stage and the step that failed (a LibTorch or
// standard exception never leaves a stage as it is). `phase` is the step running now; the
// body updates it.
template <typename Body>
auto Trainer::Impl::run_stage(Module& module, connectors::DataConnector& data, Stage stage, StagePhase& phase,
                              Body&& body) -> decltype(body()) {
  auto& impl = *this;
  auto& state = owner_.state_;
  auto& strategy = *strategy_;
  module_ = &module;
  data_ = &data;
  struct DataGuard {
    connectors::DataConnector*& d;
    ~DataGuard() { d = nullptr; }
  } data_guard{data_};
  // Module::log_image/log_text reach the loggers through the view while the stage runs.
  struct ViewGuard {
    Module& m;
    ~ViewGuard() { m.set_trainer_view(nullptr); }
  } view_guard{module};
  module.set_trainer_view(&impl);
  using CB = callbacks::Callback;
  const std::string name = to_string(stage);
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
    const std::exception_ptr error =
        to_volt_error(std::current_exception(), name + " failed while " + phase.what, phase.kind);
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      // Under torchrun: the failure summary names this error (a no-op elsewhere).
      environments::record_torchelastic_error(e, std::string("Trainer stage ") + to_string(stage) + " on global rank " +
                                                     std::to_string(strategy.global_rank()));
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

void Trainer::Impl::configure_optimizers_once(Module& module) {
  // Optimizers are built once per module: a second fit() continues with their state.
  const auto& o = owner_.options_;
  auto& impl = *this;
  auto& state = owner_.state_;
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
    state.current_epoch = 0;
    state.global_step = 0;
    state.batches_done = 0;
    state.batches_seen = 0;
  }
  impl.strategy_->setup_optimizers(impl.optimizers_);
}

void Trainer::Impl::run_fit(Module& module, connectors::DataConnector& data, const std::string& ckpt_path,
                            const std::string& handover_dir) {
  auto& impl = *this;
  auto& state = owner_.state_;
  state.fn = TrainerFn::kFitting;
  StagePhase phase;
  run_stage(module, data, Stage::kFit, phase, [&] {
    const auto& o = owner_.options_;
    phase = {"counting the batches of the loaders", ErrorKind::kData};
    state.num_training_batches =
        connectors::DataConnector::num_batches(data.train_loader(), o.limit_train_batches, "limit_train_batches");
    state.num_val_batches =
        connectors::DataConnector::num_batches(data.val_loader(), o.limit_val_batches, "limit_val_batches");
    if (state.num_training_batches == 0) {
      const auto& train = *data.train_loader();
      throw ConfigError("fit has no training batch to run: the train loader has " +
                        (train.has_length() ? std::to_string(train.num_batches()) : std::string("an unknown number of")) +
                        " batches and limit_train_batches=" +
                        o.limit_train_batches.to_string() + ". Give more data or raise limit_train_batches.");
    }
    if (state.num_training_batches == kInfiniteBatches && o.val_check_interval.is_fraction &&
        o.val_check_interval.value != 1.0) {
      throw ConfigError("val_check_interval=" + o.val_check_interval.to_string() +
                        " is a share of the training epoch, but the train loader reads an IterableDataset, which has "
                        "no length. Use val_check_interval=1.0 (validate when the stream ends) or a batch count "
                        "such as val_check_interval=100 (as Lightning requires).");
    }
    if (!o.val_check_interval.is_fraction && o.check_val_every_n_epoch && data.val_loader() &&
        o.val_check_interval.value > static_cast<double>(state.num_training_batches)) {
      throw ConfigError("val_check_interval=" + o.val_check_interval.to_string() + " is more than the " +
                        std::to_string(state.num_training_batches) +
                        " training batches of an epoch. Use a value up to " +
                        std::to_string(state.num_training_batches) +
                        ", a fraction such as 0.5, or check_val_every_n_epoch=null to count batches across epochs.");
    }

    phase = {"configure_optimizers (building the optimizers and LR schedulers)", ErrorKind::kConfig};
    configure_optimizers_once(module);
    phase = {"removing temporary files of dead checkpoint writers", ErrorKind::kCheckpoint};
    if (state.is_global_zero) checkpoint_io::remove_dead_writers_temp_files(o.default_root_dir);
    if (!handover_dir.empty()) spawn_restore_start(module, handover_dir, /*full=*/true);
    std::string resume_from = ckpt_path;
    if (resume_from.empty()) {
      // A job requeued by SLURM continues from the checkpoint its predecessor saved.
      resume_from = connectors::SignalConnector::latest_requeue_checkpoint(o.default_root_dir);
      if (!resume_from.empty() && state.is_global_zero) {
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
        {SIGTERM, SIGINT}, connectors::SignalConnector::slurm_requeue(o, impl.accelerator_connector_.plan().cluster_env,
                                                                      Environ::current()));
    state.interrupted_by = 0;
    state.interrupt_checkpoint.clear();
    auto ctx = impl.loop_context(module, data, &signals);
    phase = {"training (training_step, validation_step, backward, optimizer step, callbacks)", ErrorKind::kError};
    using loops::Hook;
    loops::FitLoop fit_loop(ctx);
    // The run's bounds as callbacks see them from on_fit_start on (Lightning's trainer.max_epochs).
    state.max_epochs = fit_loop.max_epochs();
    state.max_steps = o.max_steps;
    ctx.hooks.callbacks(Hook::on_fit_start, [&](CB& cb) { cb.on_fit_start(impl); });
    ctx.hooks.module(Hook::on_fit_start, [&] { module.on_fit_start(); });
    fit_loop.run();
    ctx.hooks.callbacks(Hook::on_fit_end, [&](CB& cb) { cb.on_fit_end(impl); });
    ctx.hooks.module(Hook::on_fit_end, [&] { module.on_fit_end(); });
    return 0;
  });
}

void Trainer::Impl::set_lr_schedulers(std::vector<LRSchedulerConfig> schedulers) {
  if (owner_.state_.fn != TrainerFn::kFitting) {
    throw Error("set_lr_schedulers outside fit: the LR schedulers belong to a fit; call it from a fit hook.");
  }
  for (const auto& s : schedulers) {
    if (!s.scheduler) throw ConfigError("set_lr_schedulers got an LR scheduler config without a scheduler.");
    if (s.frequency < 1) {
      throw ConfigError("set_lr_schedulers got an LR scheduler with frequency=" + std::to_string(s.frequency) +
                        "; use 1 or more.");
    }
  }
  // In place: the running loop's context refers to this vector.
  lr_schedulers_ = std::move(schedulers);
}

void Trainer::Impl::forward_training_data() {
  if (owner_.state_.fn != TrainerFn::kFitting || module_ == nullptr || data_ == nullptr) {
    throw Error("forward_training_data outside fit: it runs the training data of a fit; call it from a fit hook.");
  }
  auto ctx = loop_context(*module_, *data_);
  loops::ForwardPass(ctx).run();
}

void Trainer::Impl::load_weights(Module& module, const std::string& ckpt_path) {
  if (ckpt_path.empty()) return;
  const std::string path = resolve_ckpt_path(ckpt_path, to_string(owner_.state_.fn));
  if (path.empty()) return;  // "last" without a last checkpoint: the weights in memory
  const Checkpoint ckpt = checkpoint_connector_.load(path);
  module.on_load_checkpoint(ckpt);
  connectors::CheckpointConnector::restore_module(module, ckpt, path);
}

MetricMap Trainer::Impl::run_evaluation(Module& module, connectors::DataConnector& data, const std::string& ckpt_path,
                                        bool testing, const std::string& handover_dir) {
  auto& impl = *this;
  auto& state = owner_.state_;
  const auto& o = owner_.options_;
  const Stage stage = testing ? Stage::kTest : Stage::kValidate;
  state.fn = testing ? TrainerFn::kTesting : TrainerFn::kValidating;
  StagePhase phase;
  return run_stage(module, data, stage, phase, [&] {
    if (!handover_dir.empty()) spawn_restore_start(module, handover_dir, /*full=*/false);
    phase = {"loading the weights of the checkpoint " + quote_path(ckpt_path), ErrorKind::kCheckpoint};
    load_weights(module, ckpt_path);
    phase = {testing ? "testing (test_step)" : "validating (validation_step)", ErrorKind::kError};
    auto loader = testing ? data.test_loader() : data.val_loader();
    const int64_t n =
        connectors::DataConnector::num_batches(loader, testing ? o.limit_test_batches : o.limit_val_batches,
                                               testing ? "limit_test_batches" : "limit_val_batches");
    state.num_val_batches = n;
    auto ctx = impl.loop_context(module, data);
    loops::EvaluationLoop loop(ctx, testing ? RunningStage::kTesting : RunningStage::kValidating);
    MetricMap metrics = loop.run(*loader, n);
    if (state.is_global_zero && o.enable_progress_bar) print_metrics(testing ? "test" : "validate", metrics);
    return metrics;
  });
}

std::vector<at::Tensor> Trainer::Impl::run_predict(Module& module, connectors::DataConnector& data,
                                                   const std::string& ckpt_path, const std::string& handover_dir) {
  auto& impl = *this;
  owner_.state_.fn = TrainerFn::kPredicting;
  const auto& o = owner_.options_;
  StagePhase phase;
  return run_stage(module, data, Stage::kPredict, phase, [&] {
    if (!handover_dir.empty()) spawn_restore_start(module, handover_dir, /*full=*/false);
    phase = {"loading the weights of the checkpoint " + quote_path(ckpt_path), ErrorKind::kCheckpoint};
    load_weights(module, ckpt_path);
    phase = {"predicting (predict_step)", ErrorKind::kError};
    auto loader = data.predict_loader();
    const int64_t n = connectors::DataConnector::num_batches(loader, o.limit_predict_batches, "limit_predict_batches");
    auto ctx = impl.loop_context(module, data);
    loops::PredictionLoop loop(ctx);
    return loop.run(*loader, n);
  });
}

void Trainer::Impl::print_metrics(const std::string& stage, const MetricMap& metrics) {
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
