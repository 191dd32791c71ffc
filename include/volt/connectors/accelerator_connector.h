#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "volt/core/trainer_options.h"
#include "volt/strategies/strategy.h"

namespace volt::connectors {

/// The resolved hardware stack: what the flags and the environment turned into.
struct Plan {
  std::string accelerator;         ///< registry key of the accelerator, e.g. "cpu"
  std::vector<int64_t> device_ids;  ///< logical ids (CPU: 0..n-1, one per process)
  int64_t num_nodes = 1;
  std::string strategy;            ///< registry key, e.g. "single_device"
  std::string precision;           ///< normalised, e.g. "32-true"
  std::string environment;         ///< cluster environment, e.g. "default"
  int64_t num_threads = 1;         ///< intra-op threads per process (CPU)
  /// Human-readable, one fact per line (what `volt plan` and the Trainer print).
  std::string describe() const;
};

/// Turns the Trainer's hardware flags (accelerator, devices, strategy, precision,
/// num_nodes) and the environment into a Plan and builds its strategy stack. Every
/// flag is checked here, at Trainer construction, before any process starts.
class AcceleratorConnector {
 public:
  explicit AcceleratorConnector(const TrainerOptions& options);
  const Plan& plan() const { return plan_; }
  /// A fresh strategy with its accelerator, precision, environment and checkpoint IO.
  std::shared_ptr<strategies::Strategy> create_strategy() const;

  /// Lightning's legacy spellings: 32 -> "32-true", 16 -> "16-mixed", "bf16" -> "bf16-mixed".
  static std::string normalize_precision(const std::string& precision);
  /// The accelerator, strategy and precision names this build knows, with descriptions.
  static std::string describe_registries();

 private:
  Plan plan_;
};

}  // namespace volt::connectors
