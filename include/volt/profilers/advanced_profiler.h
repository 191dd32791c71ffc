#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "volt/profilers/profiler.h"

namespace volt::profilers {

/// Per-call statistics of every action (`profiler="advanced"`): count, total, mean,
/// standard deviation, min, p50, p90, p99 and max of the call durations. Keeps every
/// duration (8 bytes a call) until the stage's report is written. (Lightning's
/// AdvancedProfiler runs cProfile per action; a C++ program has no such tracer, so this
/// gives the distribution of each action instead.)
class AdvancedProfiler : public Profiler {
 public:
  /// The distribution of one action's durations, in seconds.
  struct Stats {
    int64_t count = 0;
    double total_s = 0, mean_s = 0, stddev_s = 0, min_s = 0, p50_s = 0, p90_s = 0, p99_s = 0, max_s = 0;
  };

  void setup(const std::string& stage, const std::string& log_dir, int64_t rank, int64_t world_size) override;
  std::string summary() const override;
  void teardown() override;
  /// The statistics of `action` (count 0 when it never ran).
  Stats stats(const std::string& action) const;

 protected:
  void on_start(ActionId id) override;
  void on_stop(ActionId id) override;
  void on_new_action(ActionId id) override;

 private:
  Stats compute(ActionId id) const;
  struct Slot {
    int64_t started_ns = -1;
    std::vector<double> durations_s;
  };
  std::vector<Slot> slots_;
};

}  // namespace volt::profilers
