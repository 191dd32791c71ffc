#pragma once
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "volt/callbacks/callback.h"
#include "volt/connectors/accelerator_connector.h"
#include "volt/core/module.h"
#include "volt/core/trainer_options.h"
#include "volt/core/trainer_state.h"
#include "volt/core/types.h"
#include "volt/data/dataloader.h"
#include "volt/data/datamodule.h"
#include "volt/loggers/logger.h"
#include "volt/precision/precision.h"
#include "volt/profilers/profiler.h"
#include "volt/strategies/strategy.h"
#include "volt/trainer/plugins.h"

namespace volt {

/// Checks every flag and throws a ConfigError naming the flag, the value and a fix.
/// The Trainer's constructor calls it; exposed for tools that check configs up front.
void validate_trainer_options(const TrainerOptions& options);

/// Runs fit, validate, test and predict for a volt::Module, with Lightning's flags,
/// hooks, callbacks and loggers. All configuration is checked at construction, before
/// anything runs. One Trainer can run several stages in a row; a second fit() continues
/// from where the first ended.
class Trainer {
 public:
  /// `callbacks`: extra callbacks (a progress bar, a model summary and a ModelCheckpoint
  /// are added unless disabled or given). `loggers`: none given and options.logger true:
  /// a CSVLogger under default_root_dir/lightning_logs. `precision_plugins`: at most one
  /// Precision object to use instead of the `precision` flag (Lightning's plugins=[...]).
  explicit Trainer(TrainerOptions options = {}, std::vector<std::shared_ptr<callbacks::Callback>> callbacks = {},
                   std::vector<std::shared_ptr<loggers::Logger>> loggers = {},
                   std::vector<std::shared_ptr<precision::Precision>> precision_plugins = {});
  /// With plug-in objects (Lightning's Trainer(strategy=<object>, accelerator=<object>,
  /// plugins=[...])): each is used instead of the option it stands for; conflicts are refused
  /// here, naming both (volt/trainer/plugins.h).
  Trainer(TrainerOptions options, TrainerPlugins plugins,
          std::vector<std::shared_ptr<callbacks::Callback>> callbacks = {},
          std::vector<std::shared_ptr<loggers::Logger>> loggers = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// Trains `module` on the DataModule's train loader, validating on its val loader.
  /// `ckpt_path`: a checkpoint file, "last" or "best" (of the ModelCheckpoint callback)
  /// to resume from; empty: start from the module as it is.
  void fit(Module& module, data::DataModule& datamodule, const std::string& ckpt_path = "");
  /// Same with loaders (val may be nullptr).
  void fit(Module& module, std::shared_ptr<data::DataLoader> train, std::shared_ptr<data::DataLoader> val = nullptr,
           const std::string& ckpt_path = "");

  /// One pass over the validation data; returns the epoch metrics logged.
  /// `ckpt_path`: weights to load first (a file, "last" or "best"); empty: the module as is.
  MetricMap validate(Module& module, data::DataModule& datamodule, const std::string& ckpt_path = "");
  MetricMap validate(Module& module, std::shared_ptr<data::DataLoader> loader, const std::string& ckpt_path = "");
  /// One pass over the test data; returns the epoch metrics logged.
  MetricMap test(Module& module, data::DataModule& datamodule, const std::string& ckpt_path = "");
  MetricMap test(Module& module, std::shared_ptr<data::DataLoader> loader, const std::string& ckpt_path = "");
  /// predict_step over the predict data; one tensor per batch, on the CPU.
  std::vector<at::Tensor> predict(Module& module, data::DataModule& datamodule, const std::string& ckpt_path = "");
  std::vector<at::Tensor> predict(Module& module, std::shared_ptr<data::DataLoader> loader,
                                  const std::string& ckpt_path = "");

  /// Writes a checkpoint of the module last run (all ranks call; rank 0 writes).
  void save_checkpoint(const std::string& path, bool weights_only = false);

  const TrainerOptions& options() const { return options_; }
  /// Raise the limits before another fit() to train on from where the last one ended
  /// (Lightning: trainer.fit_loop.max_steps = n). ConfigError for values below -1.
  void set_max_steps(int64_t max_steps);
  void set_max_epochs(int64_t max_epochs);
  const connectors::Plan& plan() const;
  const TrainerState& state() const { return state_; }
  int64_t current_epoch() const { return state_.current_epoch; }
  int64_t global_step() const { return state_.global_step; }
  bool should_stop() const { return state_.should_stop; }
  /// Every metric's latest value (epoch aggregates after epoch ends).
  const MetricMap& callback_metrics() const;
  const MetricMap& logged_metrics() const;
  const MetricMap& progress_bar_metrics() const;
  const std::vector<std::shared_ptr<callbacks::Callback>>& callbacks() const;
  const std::vector<std::shared_ptr<loggers::Logger>>& loggers() const;
  /// The first logger's folder, or default_root_dir.
  std::string log_dir() const;
  /// The first ModelCheckpoint's best checkpoint so far ("" when none).
  std::string best_model_path() const;
  strategies::Strategy& strategy() const;
  /// Uses `profiler` for the stages that follow, instead of the `profiler` option's (Lightning's
  /// Trainer(profiler=<object>)); nullptr turns profiling off. Call it between stages, not during one.
  void set_profiler(std::shared_ptr<profilers::Profiler> profiler);
  /// The profiler in use (nullptr: none).
  profilers::Profiler* profiler() const;

 private:
  /// The Trainer's parts (connectors, strategy), its TrainerView and the stages' code
  /// (src/trainer/detail/trainer_impl.h).
  class Impl;

  TrainerOptions options_;
  TrainerState state_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace volt
