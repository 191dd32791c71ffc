#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "volt/core/types.h"

namespace volt::loggers {

/// Where metrics and hyperparameters go. Called on rank 0 only.
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
  /// Writes buffered rows out.
  virtual void save() {}
  /// End of the run: "success", "failed" or "interrupted". Flushes everything.
  virtual void finalize(const std::string& /*status*/) { save(); }
};

}  // namespace volt::loggers
