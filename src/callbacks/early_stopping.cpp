#include "volt/callbacks/early_stopping.h"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>

#include "volt/core/error.h"

namespace volt::callbacks {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::string py_str(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\\' || c == '\'') out += '\\';
    out += c;
  }
  return out + "'";
}

// glibc prints a NaN with the sign bit as "-nan"; messages should say "nan".
std::string num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string key_list(const MetricMap& metrics) {
  std::string out = "[";
  for (const auto& [key, value] : metrics) {
    if (out.size() > 1) out += ", ";
    out += key;
  }
  return out + "]";
}

nlohmann::json score_to_json(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

double score_from_json(const nlohmann::json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (s == "inf") return kInf;
    if (s == "-inf") return -kInf;
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  }
  throw CheckpointError("EarlyStopping state holds best_score " + j.dump() +
                        ", which is not a number, \"inf\", \"-inf\" or \"nan\". The "
                        "checkpoint was not written by this version of Volt or is damaged.");
}

}  // namespace

EarlyStopping::EarlyStopping(Options options) : options_(std::move(options)) {
  const Options& o = options_;
  if (o.monitor.empty()) {
    throw ConfigError(
        "EarlyStopping needs a metric to watch, but monitor is empty. Set "
        "options.monitor to a metric the module logs, e.g. \"val_loss\".");
  }
  const std::string who = "EarlyStopping(monitor=" + py_str(o.monitor) + ", ";
  if (o.mode != "min" && o.mode != "max") {
    throw ConfigError(who + "mode=" + py_str(o.mode) +
                      ") is not a valid mode. Use mode='min' when lower is better (a loss) "
                      "or mode='max' when higher is better (an accuracy).");
  }
  if (o.patience < 0) {
    throw ConfigError(who + "patience=" + std::to_string(o.patience) +
                      ") is invalid. Use the number of checks without improvement to "
                      "tolerate: 0 or more.");
  }
  if (!(o.min_delta >= 0) || std::isinf(o.min_delta)) {
    throw ConfigError(who + "min_delta=" + num(o.min_delta) +
                      ") is invalid. min_delta is a finite magnitude >= 0; mode decides "
                      "its direction.");
  }
  for (const auto& [name, value] : {std::pair{"stopping_threshold", o.stopping_threshold},
                                    std::pair{"divergence_threshold", o.divergence_threshold}}) {
    if (value && std::isnan(*value)) {
      throw ConfigError(who + name + "=nan) is invalid. Use a number, or leave it unset.");
    }
  }
  if (o.stopping_threshold && o.divergence_threshold &&
      !is_better(*o.stopping_threshold, *o.divergence_threshold)) {
    throw ConfigError(who + "mode=" + py_str(o.mode) +
                      ", stopping_threshold=" + num(*o.stopping_threshold) +
                      ", divergence_threshold=" + num(*o.divergence_threshold) +
                      ") can never run: the stopping threshold must be better than the "
                      "divergence threshold. Swap them or check mode.");
  }
  min_delta_signed_ = o.mode == "max" ? o.min_delta : -o.min_delta;
  best_score_ = o.mode == "min" ? kInf : -kInf;
}

std::string EarlyStopping::state_key() const {
  return "EarlyStopping{'monitor': " + py_str(options_.monitor) +
         ", 'mode': " + py_str(options_.mode) + "}";
}

nlohmann::json EarlyStopping::state_dict() const {
  return {{"wait_count", wait_count_},
          {"stopped_epoch", stopped_epoch_},
          {"best_score", score_to_json(best_score_)},
          {"patience", options_.patience}};
}

void EarlyStopping::load_state_dict(const nlohmann::json& state) {
  wait_count_ = state.value("wait_count", wait_count_);
  stopped_epoch_ = state.value("stopped_epoch", stopped_epoch_);
  if (state.contains("best_score")) best_score_ = score_from_json(state.at("best_score"));
  options_.patience = state.value("patience", options_.patience);
}

bool EarlyStopping::is_better(double a, double b) const {
  return options_.mode == "min" ? a < b : a > b;
}

bool EarlyStopping::skip_check(const TrainerView& view) const {
  const TrainerState& s = view.state();
  // kNone counts as fitting so that views which never set fn (test fakes) still check.
  const bool outside_fit =
      s.fn == TrainerFn::kValidating || s.fn == TrainerFn::kTesting || s.fn == TrainerFn::kPredicting;
  // Lightning: no checks under fast_dev_run.
  return outside_fit || s.sanity_checking || s.fast_dev_run;
}

bool EarlyStopping::check_at_train_epoch_end(const TrainerView& view) const {
  if (options_.check_on_train_epoch_end) return *options_.check_on_train_epoch_end;
  // Lightning's default: at train epoch end exactly when validation runs once, at the end of
  // every epoch (val_check_interval 1.0 or 1, check_val_every_n_epoch 1), with or without a
  // val loader. A strict check there fails when that epoch's validation never ran and the
  // metric was never logged (max_steps ending the first epoch early).
  const TrainerState& s = view.state();
  return s.val_check_interval.value == 1.0 && s.check_val_every_n_epoch == int64_t{1};
}

void EarlyStopping::on_fit_start(TrainerView&) {
  stop_requested_ = false;
}

void EarlyStopping::on_train_batch_end(TrainerView& view, const at::Tensor&, const Batch&,
                                       int64_t) {
  // Once stop is agreed all ranks know it, so skipping the collective here is symmetric.
  if (!options_.check_finite || stop_requested_ || skip_check(view)) return;
  const MetricMap& logs = view.callback_metrics();
  auto it = logs.find(options_.monitor);
  if (it == logs.end()) return;
  const bool bad = !std::isfinite(it->second);
  finish(view, bad, bad ? not_finite_reason(view, it->second) : std::string());
}

void EarlyStopping::on_train_epoch_end(TrainerView& view) {
  if (skip_check(view) || !check_at_train_epoch_end(view)) return;
  run_check(view);
}

void EarlyStopping::on_validation_end(TrainerView& view) {
  if (skip_check(view) || check_at_train_epoch_end(view)) return;
  run_check(view);
}

void EarlyStopping::run_check(TrainerView& view) {
  const MetricMap& logs = view.callback_metrics();
  auto it = logs.find(options_.monitor);
  if (it == logs.end()) {
    const std::string message =
        "EarlyStopping(monitor=" + py_str(options_.monitor) + ") could not find '" +
        options_.monitor + "' among the logged metrics: " + key_list(logs) +
        ". Log it with ctx.log(\"" + options_.monitor +
        "\", ...), fix monitor, or set strict=false to skip checks while it is missing.";
    if (options_.strict) throw ConfigError(message);
    if (!warned_missing_ && view.state().is_global_zero) {
      std::cerr << "[volt] warning: " << message << "\n";
    }
    warned_missing_ = true;
    return;
  }
  auto [should_stop, reason] = evaluate(view, it->second);
  finish(view, should_stop, std::move(reason));
}

std::string EarlyStopping::not_finite_reason(const TrainerView& view, double current) const {
  const bool has_best = std::isfinite(best_score_);
  return "Monitored metric " + options_.monitor + " = " + num(current) +
         " is not finite at epoch " + std::to_string(view.state().current_epoch) +
         ", global step " + std::to_string(view.state().global_step) + ". " +
         (has_best ? "Previous best score: " + num(best_score_) + "."
                   : std::string("There is no previous best score.")) +
         " Signaling Trainer to stop.";
}

std::pair<bool, std::string> EarlyStopping::evaluate(const TrainerView& view, double current) {
  const Options& o = options_;
  const char* order = o.mode == "min" ? "<" : ">";
  const char* reverse = o.mode == "min" ? ">" : "<";
  if (o.check_finite && !std::isfinite(current)) {
    return {true, not_finite_reason(view, current)};
  }
  if (o.stopping_threshold && is_better(current, *o.stopping_threshold)) {
    return {true, "Stopping threshold reached: " + o.monitor + " = " + num(current) + " " +
                      order + " " + num(*o.stopping_threshold) + ". Signaling Trainer to stop."};
  }
  if (o.divergence_threshold && is_better(*o.divergence_threshold, current)) {
    return {true, "Divergence threshold reached: " + o.monitor + " = " + num(current) + " " +
                      reverse + " " + num(*o.divergence_threshold) +
                      ". Signaling Trainer to stop."};
  }
  if (is_better(current - min_delta_signed_, best_score_)) {
    best_score_ = current;
    wait_count_ = 0;
    return {false, ""};
  }
  ++wait_count_;
  if (wait_count_ >= o.patience) {
    return {true, "Monitored metric " + o.monitor + " did not improve in the last " +
                      std::to_string(wait_count_) + " records. Best score: " +
                      num(best_score_) + ". Signaling Trainer to stop."};
  }
  return {false, ""};
}

void EarlyStopping::finish(TrainerView& view, bool should_stop, std::string reason) {
  should_stop = view.reduce_boolean_decision(should_stop, /*all=*/false);
  if (!should_stop) return;
  // Lightning moves stopped_epoch to every check that asks to stop, also while min_epochs or
  // min_steps hold the first request back; the request itself is made (and printed) once.
  stopped_epoch_ = view.state().current_epoch;
  if (stop_requested_) return;
  if (reason.empty()) {
    reason = "EarlyStopping(monitor=" + py_str(options_.monitor) +
             ") asked to stop on another process at epoch " +
             std::to_string(view.state().current_epoch) + ", global step " +
             std::to_string(view.state().global_step) + ". Signaling Trainer to stop.";
  }
  stop_requested_ = true;
  stopping_reason_ = reason;
  view.request_stop(reason);
}

}  // namespace volt::callbacks
