#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "volt/profilers/profiler.h"

namespace volt::profilers {

/// Lightning's SimpleProfiler: for every action, how often it ran, its mean and total
/// duration, and its share of the stage's wall time, in a table sorted by total time
/// (`profiler="simple"`). Per call it costs two clock reads and a few additions.
class SimpleProfiler : public Profiler {
 public:
  /// What was recorded for one action.
  struct Stats {
    int64_t count = 0;
    double total_s = 0.0;
    double mean_s() const { return count ? total_s / static_cast<double>(count) : 0.0; }
  };

  void setup(const std::string& stage, const std::string& log_dir, int64_t rank, int64_t world_size) override;
  std::string summary() const override;
  void teardown() override;

  /// The statistics of `action` (zero counts when it never ran).
  Stats stats(const std::string& action) const;
  /// Seconds since setup() (the "Total" row).
  double elapsed_s() const;

 protected:
  void on_start(ActionId id) override;
  void on_stop(ActionId id) override;
  void on_new_action(ActionId id) override;

 private:
  struct Slot {
    int64_t started_ns = -1;  ///< -1: not running
    int64_t count = 0;
    int64_t total_ns = 0;
  };
  std::vector<Slot> slots_;
  int64_t setup_ns_ = now_ns();
};

}  // namespace volt::profilers
