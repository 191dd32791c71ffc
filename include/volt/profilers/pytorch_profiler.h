#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "volt/profilers/profiler.h"

namespace volt::profilers {

/// When the pytorch profiler records, in steps (Lightning's default schedule: wait 1,
/// warmup 1, active 3): `wait` steps untouched, `warmup` steps with the recorder on and
/// its events dropped (first-call costs stay out), `active` steps recorded.
struct PyTorchProfilerOptions {
  int64_t wait = 1;
  int64_t warmup = 1;
  int64_t active = 3;
  /// Rows of the top-operators table.
  int64_t row_limit = 20;
};

/// LibTorch's operator-level profiler (`profiler="pytorch"`): every ATen operator, autograd
/// function and Volt action (a RECORD_USER_SCOPE range) that runs during the active steps
/// of the schedule, on every thread, written as a Chrome trace (`<log_dir>/<stage>-trace.json`,
/// opened by Perfetto and chrome://tracing) and summarised as the top operators by self
/// time. Events are collected through at::addGlobalCallback (RecordFunction observers),
/// the mechanism LibTorch's own profilers are built on, so the same code serves LibTorch
/// 1.13 and 2.x whether or not their build has Kineto. One pytorch profiler records at a time
/// per process.
class PyTorchProfiler : public Profiler {
 public:
  explicit PyTorchProfiler(PyTorchProfilerOptions options = {});
  ~PyTorchProfiler() override;

  void setup(const std::string& stage, const std::string& log_dir, int64_t rank, int64_t world_size) override;
  void step() override;
  std::string summary() const override;
  /// summary() on rank 0, then the Chrome trace and the table written (every rank, own file).
  void describe() override;
  void teardown() override;

  /// One recorded range: name, scope ("cpu_op", "autograd", "user_annotation"), thread,
  /// start and duration (ns since the recorder started), time outside its direct children.
  struct Event {
    std::string name;
    const char* category;
    uint64_t thread;
    int64_t start_ns;
    int64_t duration_ns;
    int64_t self_ns;
  };
  /// What the active steps recorded (valid after the schedule's active steps, or after describe()).
  std::vector<Event> events() const;
  /// The Chrome trace JSON of events().
  std::string chrome_trace() const;
  /// Steps counted since setup().
  int64_t steps() const { return steps_; }
  /// The RecordFunction observers' event store (internal).
  struct Recorder;

 protected:
  void on_start(ActionId id) override;
  void on_stop(ActionId id) override;

 private:
  void update_recording();
  void start_recorder(bool keep);
  void stop_recorder();
  PyTorchProfilerOptions options_;
  int64_t steps_ = 0;
  std::shared_ptr<Recorder> recorder_;
  /// The open user-scope ranges of Volt's actions (innermost last).
  struct Range;
  std::vector<std::unique_ptr<Range>> open_;
};

}  // namespace volt::profilers
