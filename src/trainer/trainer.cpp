#include "volt/trainer/trainer.h"

#include "trainer/detail/fit_start_search.h"
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
#include "volt/core/trainer_flags.h"
#include "volt/loggers/csv_logger.h"

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
  TrainerOptions changed = options_;
  changed.max_steps = max_steps;
  check_trainer_flag(changed, "max_steps");
  options_.max_steps = max_steps;
}

void Trainer::set_max_epochs(int64_t max_epochs) {
  TrainerOptions changed = options_;
  changed.max_epochs = max_epochs;
  check_trainer_flag(changed, "max_epochs");
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

}  // namespace

void Trainer::fit(Module& module, data::DataModule& datamodule, const std::string& ckpt_path) {
  guarded("fit", [&] {
    // A finder callback's search (callbacks::FitStartSearch) runs before the fit's first hook.
    detail::run_fit_start_searches(*this, module, &datamodule, nullptr, ckpt_path);
    connectors::DataConnector data(datamodule);
    impl_->fit_stage(module, data, ckpt_path);
  });
}

void Trainer::fit(Module& module, std::shared_ptr<data::DataLoader> train, std::shared_ptr<data::DataLoader> val,
                  const std::string& ckpt_path) {
  if (!train) throw ConfigError("fit was given a null train loader.");
  guarded("fit", [&] {
    detail::run_fit_start_searches(*this, module, nullptr, train, ckpt_path);
    connectors::DataConnector data(std::move(train), std::move(val), nullptr, nullptr);
    impl_->fit_stage(module, data, ckpt_path);
  });
}

MetricMap Trainer::validate(Module& module, data::DataModule& datamodule, const std::string& ckpt_path) {
  return guarded("validate", [&] {
    connectors::DataConnector data(datamodule);
    return impl_->evaluation_stage(module, data, ckpt_path, /*testing=*/false);
  });
}

MetricMap Trainer::validate(Module& module, std::shared_ptr<data::DataLoader> loader, const std::string& ckpt_path) {
  if (!loader) throw ConfigError("validate was given a null loader.");
  return guarded("validate", [&] {
    connectors::DataConnector data(nullptr, std::move(loader), nullptr, nullptr);
    return impl_->evaluation_stage(module, data, ckpt_path, /*testing=*/false);
  });
}

MetricMap Trainer::test(Module& module, data::DataModule& datamodule, const std::string& ckpt_path) {
  return guarded("test", [&] {
    connectors::DataConnector data(datamodule);
    return impl_->evaluation_stage(module, data, ckpt_path, /*testing=*/true);
  });
}

MetricMap Trainer::test(Module& module, std::shared_ptr<data::DataLoader> loader, const std::string& ckpt_path) {
  if (!loader) throw ConfigError("test was given a null loader.");
  return guarded("test", [&] {
    connectors::DataConnector data(nullptr, nullptr, std::move(loader), nullptr);
    return impl_->evaluation_stage(module, data, ckpt_path, /*testing=*/true);
  });
}

std::vector<at::Tensor> Trainer::predict(Module& module, data::DataModule& datamodule, const std::string& ckpt_path) {
  return guarded("predict", [&] {
    connectors::DataConnector data(datamodule);
    return impl_->predict_stage(module, data, ckpt_path);
  });
}

std::vector<at::Tensor> Trainer::predict(Module& module, std::shared_ptr<data::DataLoader> loader,
                                         const std::string& ckpt_path) {
  if (!loader) throw ConfigError("predict was given a null loader.");
  return guarded("predict", [&] {
    connectors::DataConnector data(nullptr, nullptr, nullptr, std::move(loader));
    return impl_->predict_stage(module, data, ckpt_path);
  });
}

}  // namespace volt
