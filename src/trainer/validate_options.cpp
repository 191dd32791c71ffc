#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <thread>

#include "volt/connectors/signal_connector.h"
#include "volt/core/error.h"
#include "volt/core/file_check.h"
#include "volt/core/printable.h"
#include "volt/core/registry.h"
#include "volt/loggers/logger_registry.h"
#include "volt/profilers/profiler.h"
#include "volt/trainer/trainer.h"

namespace volt {
namespace {

void check(bool ok, const std::string& message) {
  if (!ok) throw ConfigError(message);
}

void check_limit(const BatchLimit& limit, const std::string& flag) {
  if (limit.is_fraction) {
    check(limit.value >= 0.0 && limit.value <= 1.0,
          flag + "=" + limit.to_string() + " is a fraction outside [0, 1]. Use a fraction such as 0.25 (a quarter of "
                 "the batches), 1.0 (all), 0 (none), or an integer count of batches.");
  } else {
    check(limit.value >= 0, flag + "=" + limit.to_string() +
                                " is a negative count. Use 0 (none), a positive count, or a fraction such as 0.5.");
  }
}

std::string num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s = std::to_string(v);
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

// Seconds converted to milliseconds for c10d must stay far inside int64.
constexpr double kMaxTimeoutS = 7 * 24 * 3600.0;

void check_seconds(double v, const std::string& flag, const std::string& example) {
  check(std::isfinite(v) && v > 0.0 && v <= kMaxTimeoutS,
        flag + "=" + num(v) + " is not a number of seconds in (0, 604800] (one week). Use seconds, e.g. " + example +
            ".");
}

int64_t max_num_threads() {
  const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  return 4 * cores;
}

}  // namespace

void validate_trainer_options(const TrainerOptions& o) {
  const auto n = [](int64_t v) { return std::to_string(v); };
  check(o.max_epochs >= -1, "max_epochs=" + n(o.max_epochs) +
                                " is not valid. Use a positive number of epochs, or -1 for the default (1000, or "
                                "unlimited when max_steps is set).");
  check(o.min_epochs >= 0, "min_epochs=" + n(o.min_epochs) + " is negative. Use 0 or more.");
  check(o.max_epochs < 0 || o.min_epochs <= o.max_epochs,
        "min_epochs=" + n(o.min_epochs) + " is larger than max_epochs=" + n(o.max_epochs) + ". Lower min_epochs or raise max_epochs.");
  check(o.max_steps >= -1, "max_steps=" + n(o.max_steps) + " is not valid. Use a positive count, or -1 for no limit.");
  check(o.min_steps >= 0, "min_steps=" + n(o.min_steps) + " is negative. Use 0 or more.");
  check(o.max_steps < 0 || o.min_steps <= o.max_steps,
        "min_steps=" + n(o.min_steps) + " is larger than max_steps=" + n(o.max_steps) + ". Lower min_steps or raise max_steps.");
  if (o.slurm_auto_requeue) {
    connectors::SignalConnector::parse_signal(o.slurm_requeue_signal, "slurm_requeue_signal");
    check(o.slurm_requeue_command.find_first_not_of(" \t") != std::string::npos,
          "slurm_requeue_command is empty while slurm_auto_requeue=true. Give the command that requeues a job "
          "(default \"scontrol requeue\"), or set slurm_auto_requeue=false.");
  }
  check_limit(o.limit_train_batches, "limit_train_batches");
  check_limit(o.limit_val_batches, "limit_val_batches");
  check_limit(o.limit_test_batches, "limit_test_batches");
  check_limit(o.limit_predict_batches, "limit_predict_batches");
  if (o.val_check_interval.is_fraction) {
    check(std::isfinite(o.val_check_interval.value), "val_check_interval=" + o.val_check_interval.to_string() +
                                                      " is not a finite number. Use a fraction such as 0.5 or a count.");
  check(o.val_check_interval.value > 0.0 && o.val_check_interval.value <= 1.0,
          "val_check_interval=" + o.val_check_interval.to_string() +
              " is a fraction outside (0, 1]. Use e.g. 0.25 to validate four times an epoch, 1.0 for once, or an "
              "integer count of training batches.");
    check(o.check_val_every_n_epoch.has_value(),
          "check_val_every_n_epoch=null needs an integer val_check_interval (a count of training batches); got "
          "val_check_interval=" + o.val_check_interval.to_string() + ".");
  } else {
    check(o.val_check_interval.value >= 1, "val_check_interval=" + o.val_check_interval.to_string() +
                                               " is not a positive count of training batches. Use 1 or more, or a "
                                               "fraction such as 0.5.");
  }
  check(!o.check_val_every_n_epoch || *o.check_val_every_n_epoch >= 1,
        "check_val_every_n_epoch=" + (o.check_val_every_n_epoch ? n(*o.check_val_every_n_epoch) : "") +
            " is not valid. Use 1 or more, or null to validate only by val_check_interval.");
  check(o.num_sanity_val_steps >= -1, "num_sanity_val_steps=" + n(o.num_sanity_val_steps) +
                                          " is not valid. Use 0 (off), a count, or -1 (every validation batch).");
  check(o.accumulate_grad_batches >= 1, "accumulate_grad_batches=" + n(o.accumulate_grad_batches) +
                                            " is not valid. Use 1 (no accumulation) or more.");
  check(std::isfinite(o.gradient_clip_val) && o.gradient_clip_val >= 0.0,
        "gradient_clip_val=" + num(o.gradient_clip_val) +
            " is not a finite, non-negative number. Use 0 (no clipping) or a positive threshold such as 1.0.");
  check(o.gradient_clip_algorithm == "norm" || o.gradient_clip_algorithm == "value",
        "gradient_clip_algorithm='" + o.gradient_clip_algorithm + "' is not known. Use \"norm\" or \"value\".");
  check(o.fast_dev_run >= 0, "fast_dev_run=" + n(o.fast_dev_run) +
                                 " is negative. Use 0 (off), 1 (true) or a number of batches.");
  check(o.log_every_n_steps >= 1, "log_every_n_steps=" + n(o.log_every_n_steps) + " is not valid. Use 1 or more.");
  if (!o.profiler.empty() && !profilers::profiler_registry().contains(o.profiler)) {
    throw ConfigError("profiler='" + printable(o.profiler) + "' is not known. Known profiler names: " +
                      profilers::profiler_registry().known_keys() + "; or \"\" for no profiler.");
  }
  check(o.num_threads >= 0, "num_threads=" + n(o.num_threads) + " is negative. Use 0 (all cores) or a count.");
  check(o.num_threads <= max_num_threads(),
        "num_threads=" + n(o.num_threads) + " is more than 4 threads per core of this machine (" +
            n(max_num_threads() / 4) + " cores, so at most " + n(max_num_threads()) +
            "). Use 0 (all cores) or a count up to " + n(max_num_threads()) + ".");
  check_seconds(o.process_group_timeout_s, "process_group_timeout_s", "1800 (the default)");
  check_seconds(o.rendezvous_timeout_s, "rendezvous_timeout_s", "300 (the default)");
  constexpr double kMaxBucketMb = 65536.0;
  check(std::isfinite(o.ddp_bucket_cap_mb) && std::isfinite(o.ddp_first_bucket_cap_mb) && o.ddp_bucket_cap_mb > 0.0 &&
            o.ddp_first_bucket_cap_mb > 0.0 && o.ddp_bucket_cap_mb <= kMaxBucketMb &&
            o.ddp_first_bucket_cap_mb <= kMaxBucketMb,
        "ddp_bucket_cap_mb=" + num(o.ddp_bucket_cap_mb) + " and ddp_first_bucket_cap_mb=" +
            num(o.ddp_first_bucket_cap_mb) + " must both be positive and at most 65536 MB (defaults 25 and 1).");
  if (!o.logger.names().empty()) {
    std::set<std::string> seen;
    for (const auto& name : o.logger.names()) {
      check(!name.empty(), "logger='" + o.logger.to_string() + "' holds an empty name. Write names separated by "
                           "commas, e.g. logger=csv,tensorboard (known: " + loggers::logger_registry().known_keys() +
                           "), or true/false.");
      check(loggers::logger_registry().contains(name),
            "logger='" + name + "' is not known. Known logger names: " + loggers::logger_registry().known_keys() +
                " (or true for the CSV logger, false for none). Register your own with "
                "volt::loggers::register_logger.");
      check(seen.insert(registry_key(name)).second,
            "logger='" + o.logger.to_string() + "' names '" + name + "' twice; each logger is attached once.");
    }
  }
  check(!o.default_root_dir.empty(), "default_root_dir is empty. Use a folder path such as \".\" or \"runs\".");
  if (const std::string why = folder_problem(o.default_root_dir, "default_root_dir",
                                             "Give a folder (it is created if it does not exist).");
      !why.empty()) {
    throw ConfigError(why);
  }
}

}  // namespace volt
