#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "volt/core/types.h"

namespace volt::loggers {

/// Where metrics and hyperparameters go. Called on rank 0 only. Every hook but the first
/// five has a default, so a logger implements only what it can record.
class Logger {
 public:
  virtual ~Logger() = default;
  /// The experiment name, e.g. "lightning_logs".
  virtual std::string name() const = 0;
  /// The run's version within its experiment, e.g. "version_3" (decided on first use).
  virtual std::string version() = 0;
  /// The run's folder (save_dir/name/version).
  virtual std::string log_dir() = 0;
  virtual void log_hyperparams(const std::map<std::string, std::string>& params) = 0;
  virtual void log_metrics(const MetricMap& metrics, int64_t step) = 0;
  /// A text at `step`. Default: dropped (a logger that cannot show text).
  virtual void log_text(const std::string& /*tag*/, const std::string& /*text*/, int64_t /*step*/) {}
  /// The distribution of `values` (any shape) at `step`. Default: dropped.
  virtual void log_histogram(const std::string& /*tag*/, const at::Tensor& /*values*/, int64_t /*step*/) {}
  /// An image at `step`: float [C,H,W] (C = 1 or 3) with values in [0,1], or uint8 [C,H,W].
  /// Default: dropped.
  virtual void log_image(const std::string& /*tag*/, const at::Tensor& /*image*/, int64_t /*step*/) {}
  /// Writes buffered rows out.
  virtual void save() {}
  /// End of the run: "success", "failed" or "interrupted". Flushes everything.
  virtual void finalize(const std::string& /*status*/) { save(); }
  /// Called by the Trainer, before anything is logged, on every logger after the first
  /// with the first one's version() ("version_3"): a logger given no version of its own
  /// takes that one, so that several loggers of a run write into one version_N folder
  /// (Lightning's layout). Default: ignored.
  virtual void follow_version(const std::string& /*version*/) {}
};

}  // namespace volt::loggers
