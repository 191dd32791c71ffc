#include "volt/connectors/logger_connector.h"

#include <algorithm>
#include <cmath>
#include <iostream>

#include "volt/core/error.h"

namespace volt::connectors {

LoggerConnector::LoggerConnector(std::vector<std::shared_ptr<loggers::Logger>> loggers, int64_t log_every_n_steps,
                                 strategies::Strategy& strategy)
    : loggers_(std::move(loggers)), log_every_n_steps_(std::max<int64_t>(1, log_every_n_steps)), strategy_(strategy) {}

std::map<std::string, LoggerConnector::Aggregate>& LoggerConnector::aggregates(RunningStage stage) {
  return stage == RunningStage::kTraining ? train_aggregates_ : eval_aggregates_;
}

void LoggerConnector::log(RunningStage stage, const std::string& name, const at::Tensor& value,
                          const LogOptions& options, int64_t default_batch_size) {
  if (!value.defined() || value.numel() != 1) {
    throw ConfigError("ctx.log(\"" + name + "\") needs a single number; got " +
                      (value.defined() ? "a tensor with " + std::to_string(value.numel()) + " elements"
                                       : std::string("an undefined tensor")) +
                      ". Reduce it first (e.g. loss.mean()) or log each element under its own name.");
  }
  const std::string& fx = options.reduce_fx;
  if (fx != "mean" && fx != "sum" && fx != "max" && fx != "min") {
    throw ConfigError("ctx.log(\"" + name + "\", ..., {.reduce_fx = \"" + fx +
                      "\"}) is not a known reduction. Use mean, sum, max or min.");
  }
  const bool training = stage == RunningStage::kTraining;
  const bool on_step = options.on_step.value_or(training);
  const bool on_epoch = options.on_epoch.value_or(!training);
  // One host sync per logged value; on CPU this is a plain read, on TPU a step boundary.
  double v = strategy_.scalar_to_host(value);

  if (on_step) {
    if (options.sync_dist) v = strategy_.reduce(v, strategies::ReduceOp::kMean);
    const std::string step_name = on_epoch ? name + "_step" : name;
    callback_metrics_[step_name] = v;
    if (on_epoch) callback_metrics_[name] = v;
    if (options.prog_bar) progress_bar_metrics_[step_name] = v;
    if (options.logger) {
      if (training) {
        step_metrics_[step_name] = v;
      } else if (stage != RunningStage::kSanityChecking) {
        eval_step_metrics_[step_name] = v;
      }
    }
  }
  if (on_epoch) {
    auto& agg = aggregates(stage)[name];
    const double w = static_cast<double>(options.batch_size.value_or(default_batch_size));
    if (agg.count == 0) {
      agg.max = v;
      agg.min = v;
      agg.reduce_fx = fx;
      agg.prog_bar = options.prog_bar;
      agg.logger = options.logger;
      agg.sync_dist = options.sync_dist;
      agg.also_on_step = on_step;
    } else {
      agg.max = std::max(agg.max, v);
      agg.min = std::min(agg.min, v);
    }
    agg.sum += fx == "mean" ? v * w : v;
    agg.weight += w;
    ++agg.count;
  }
}

void LoggerConnector::begin_epoch(RunningStage stage) {
  aggregates(stage).clear();
  if (stage == RunningStage::kTraining) {
    step_metrics_.clear();
  } else {
    eval_step_metrics_.clear();
  }
}

void LoggerConnector::end_train_batch(int64_t batches_that_stepped, int64_t epoch, bool should_stop) {
  if (step_metrics_.empty() || !volt::should_update_logs(batches_that_stepped, log_every_n_steps_, should_stop)) return;
  MetricMap row = step_metrics_;
  row["epoch"] = static_cast<double>(epoch);
  log_metrics(row, batches_that_stepped);
}

void LoggerConnector::end_eval_batch(RunningStage stage) {
  if (stage == RunningStage::kSanityChecking) return;
  int64_t& seen = stage == RunningStage::kTesting ? test_steps_seen_ : val_steps_seen_;
  // Every batch counts, whether or not it logged a step value.
  const int64_t step = seen++;
  if (!eval_step_metrics_.empty()) log_metrics(eval_step_metrics_, step);
}

void LoggerConnector::reset_eval_step_count(RunningStage stage) {
  (stage == RunningStage::kTesting ? test_steps_seen_ : val_steps_seen_) = 0;
}

MetricMap LoggerConnector::end_epoch(RunningStage stage, int64_t step, int64_t epoch) {
  auto& aggs = aggregates(stage);
  MetricMap out;
  MetricMap to_loggers;
  const int64_t world_size = strategy_.world_size();
  for (auto& [name, agg] : aggs) {
    if (world_size > 1 && !agg.sync_dist && stage != RunningStage::kSanityChecking &&
        warned_sync_dist_.insert(name).second && strategy_.is_global_zero()) {
      std::cerr << "[volt] warning: \"" << name << "\" is logged at epoch level under " << world_size
                << " processes without sync_dist=true, so every rank keeps its own value (the loggers get rank "
                   "0's). Log it with {.sync_dist = true} to reduce it across the processes.\n";
    }
    double sum = agg.sum;
    double weight = agg.weight;
    double value = 0.0;
    if (agg.reduce_fx == "max") {
      value = agg.sync_dist ? strategy_.reduce(agg.max, strategies::ReduceOp::kMax) : agg.max;
    } else if (agg.reduce_fx == "min") {
      value = agg.sync_dist ? strategy_.reduce(agg.min, strategies::ReduceOp::kMin) : agg.min;
    } else {
      if (agg.sync_dist) {
        sum = strategy_.reduce(sum, strategies::ReduceOp::kSum);
        weight = strategy_.reduce(weight, strategies::ReduceOp::kSum);
      }
      value = agg.reduce_fx == "sum" ? sum : (weight > 0 ? sum / weight : std::nan(""));
    }
    const std::string epoch_name = agg.also_on_step ? name + "_epoch" : name;
    out[name] = value;
    callback_metrics_[name] = value;
    callback_metrics_[epoch_name] = value;
    if (agg.prog_bar) {
      progress_bar_metrics_[epoch_name] = value;
      if (agg.also_on_step) progress_bar_metrics_.erase(name + "_step");
    }
    if (agg.logger) to_loggers[epoch_name] = value;
  }
  aggs.clear();
  // Sanity-check numbers come from an untrained model on a few batches: not worth a row.
  if (!to_loggers.empty() && stage != RunningStage::kSanityChecking) {
    to_loggers["epoch"] = static_cast<double>(epoch);
    log_metrics(to_loggers, step);
  }
  // A training epoch's rows reach the files now, not at the next flush (once per epoch).
  if (stage == RunningStage::kTraining && strategy_.is_global_zero()) {
    for (auto& logger : loggers_) logger->save();
  }
  return out;
}

void LoggerConnector::reset_metrics() {
  train_aggregates_.clear();
  eval_aggregates_.clear();
  step_metrics_.clear();
  eval_step_metrics_.clear();
  callback_metrics_.clear();
  progress_bar_metrics_.clear();
}

void LoggerConnector::log_metrics(const MetricMap& metrics, int64_t step) {
  for (const auto& [k, v] : metrics) logged_metrics_[k] = v;
  if (!strategy_.is_global_zero()) return;
  for (auto& logger : loggers_) logger->log_metrics(metrics, step);
}

void LoggerConnector::log_hyperparams(const std::map<std::string, std::string>& params) {
  if (!strategy_.is_global_zero()) return;
  for (auto& logger : loggers_) logger->log_hyperparams(params);
}

void LoggerConnector::finalize(const std::string& status) {
  if (!strategy_.is_global_zero()) return;
  for (auto& logger : loggers_) logger->finalize(status);
}

std::string LoggerConnector::version() {
  if (synced_) return synced_version_;
  return loggers_.empty() ? std::string() : loggers_.front()->version();
}

std::string LoggerConnector::log_dir(const std::string& fallback) {
  if (synced_) return synced_log_dir_.empty() ? fallback : synced_log_dir_;
  return loggers_.empty() ? fallback : loggers_.front()->log_dir();
}

void LoggerConnector::sync_across_ranks() {
  if (strategy_.world_size() <= 1 || synced_) return;
  // Rank 0 chooses the version (and creates its folder); the others use the same folder,
  // so checkpoint paths agree on every rank and no rank makes a folder of its own.
  std::string dir, version;
  if (strategy_.is_global_zero()) {
    dir = loggers_.empty() ? std::string() : loggers_.front()->log_dir();
    version = loggers_.empty() ? std::string() : loggers_.front()->version();
  }
  synced_log_dir_ = strategy_.broadcast_object(dir, 0);
  synced_version_ = strategy_.broadcast_object(version, 0);
  synced_ = true;
}

}  // namespace volt::connectors
