#include "volt/callbacks/timer.h"

#include <chrono>
#include <cmath>

#include "volt/core/duration.h"
#include "volt/core/error.h"

namespace volt::callbacks {
namespace {

constexpr RunningStage kStages[] = {RunningStage::kTraining, RunningStage::kSanityChecking, RunningStage::kValidating,
                                    RunningStage::kTesting, RunningStage::kPredicting};

std::optional<double> checked_duration(std::optional<double> s) {
  if (s && !(std::isfinite(*s) && *s >= 0.0)) {
    throw ConfigError("Timer(duration=" + std::to_string(*s) +
                      " s) is not a finite, non-negative number of seconds. Use e.g. 3600 for one hour, or no "
                      "duration to measure only.");
  }
  return s;
}

Timer::Interval parse_interval(const std::string& interval) {
  if (interval == "step") return Timer::Interval::kStep;
  if (interval == "epoch") return Timer::Interval::kEpoch;
  throw ConfigError("Timer(interval='" + interval + "') is not supported. Possible choices are: step, epoch.");
}

}  // namespace

Timer::Timer(std::optional<double> duration_s, Interval interval, bool verbose, Clock clock)
    : duration_(checked_duration(duration_s)), interval_(interval), verbose_(verbose), clock_(std::move(clock)) {}

Timer::Timer(const std::string& duration, const std::string& interval, bool verbose, Clock clock)
    : Timer(duration.empty() ? std::nullopt : std::optional<double>(parse_duration(duration, "Timer duration")),
            parse_interval(interval), verbose, std::move(clock)) {}

double Timer::now() const {
  if (clock_) return clock_();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::optional<double> Timer::start_time(RunningStage stage) const {
  return start_[static_cast<size_t>(stage)];
}

std::optional<double> Timer::end_time(RunningStage stage) const {
  return end_[static_cast<size_t>(stage)];
}

double Timer::time_elapsed(RunningStage stage) const {
  const auto start = start_time(stage);
  const auto end = end_time(stage);
  const double offset = stage == RunningStage::kTraining ? offset_ : 0.0;
  if (!start) return offset;
  if (!end) return now() - *start + offset;
  return *end - *start + offset;
}

std::optional<double> Timer::time_remaining(RunningStage stage) const {
  if (!duration_) return std::nullopt;
  return *duration_ - time_elapsed(stage);
}

nlohmann::json Timer::state_dict() const {
  nlohmann::json elapsed = nlohmann::json::object();
  for (RunningStage stage : kStages) elapsed[to_string(stage)] = time_elapsed(stage);
  return {{"time_elapsed", elapsed}};
}

void Timer::load_state_dict(const nlohmann::json& state) {
  offset_ = 0;
  if (!state.is_object() || !state.contains("time_elapsed")) return;
  const auto& elapsed = state.at("time_elapsed");
  if (!elapsed.is_object() || !elapsed.contains("train")) return;
  const auto& train = elapsed.at("train");
  if (!train.is_number() || !std::isfinite(train.get<double>()) || train.get<double>() < 0) {
    throw CheckpointError("the checkpoint's Timer state has time_elapsed.train=" + train.dump() +
                          ", not a non-negative number of seconds. Resume from a checkpoint Volt wrote, or remove "
                          "its \"Timer\" callback state.");
  }
  offset_ = train.get<double>();
}

void Timer::start(RunningStage stage) {
  mark(start_, stage);
  end_[static_cast<size_t>(stage)].reset();
}

void Timer::on_train_start(TrainerView& view) {
  start(RunningStage::kTraining);
  // Here rather than at on_fit_start, whose stop request the fit loop's start would clear.
  if (duration_) check_time_remaining(view);
}

void Timer::on_validation_start(TrainerView&) {
  start(RunningStage::kValidating);
}

void Timer::on_test_start(TrainerView&) {
  start(RunningStage::kTesting);
}

void Timer::on_train_batch_end(TrainerView& view, const at::Tensor&, const Batch&, int64_t) {
  if (interval_ != Interval::kStep || !duration_) return;
  check_time_remaining(view);
}

void Timer::on_train_epoch_end(TrainerView& view) {
  if (interval_ != Interval::kEpoch || !duration_) return;
  check_time_remaining(view);
}

void Timer::check_time_remaining(TrainerView& view) {
  const double elapsed = time_elapsed(RunningStage::kTraining);
  // Clocks differ per rank: any rank out of time stops them all after the same batch.
  if (!view.reduce_boolean_decision(elapsed >= *duration_, /*all=*/false)) return;
  if (view.state().should_stop) return;  // already stopping (asked once; min_epochs may hold it)
  view.request_stop(verbose_ ? "Time limit reached. Elapsed time is " + format_duration(elapsed) +
                                   ". Signaling Trainer to stop."
                             : std::string());
}

}  // namespace volt::callbacks
