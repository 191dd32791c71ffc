#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "volt/core/registry.h"

namespace volt::profilers {

/// Index of an interned action name (Profiler::action_id); stable for a profiler's life.
using ActionId = uint32_t;

/// Times named actions, as Lightning's profilers do: the Trainer starts and stops an
/// action around every callback and module hook, the training step, backward, the
/// optimizer step, data fetching, checkpoint saving and validation
/// (`[Callback]ModelCheckpoint{...}.on_train_epoch_end`, `run_training_batch`, ...; the
/// table in docs/observability.md). A user may time their own code with `profile(name)`.
///
/// Life cycle per stage (fit, validate, test, predict), on every rank: setup() before the
/// stage's first hook, start/stop pairs while it runs, describe() when it ends (rank 0
/// prints summary(); the report is written to `<log_dir>/<stage>-profile.txt`, with
/// `-<rank>` before `.txt` when several processes run), teardown() after describe().
/// Actions nest; an action must be stopped before it is started again.
///
/// Subclasses implement on_start/on_stop (ids, for the per-step path: no string is built
/// or hashed there) and summary(); the rest has working defaults.
class Profiler {
 public:
  virtual ~Profiler() = default;

  /// Interns `action` (once per name; the Trainer does it before a stage, not per step).
  ActionId action_id(const std::string& action);
  /// The name of an interned id.
  const std::string& action_name(ActionId id) const { return names_.at(id); }
  /// Every interned name, indexed by id.
  const std::vector<std::string>& action_names() const { return names_; }

  /// Starts/stops timing `action`. stop() of an action that is not running throws a volt::Error.
  void start(const std::string& action) { on_start(action_id(action)); }
  void stop(const std::string& action) { on_stop(action_id(action)); }
  void start(ActionId id) { on_start(id); }
  void stop(ActionId id) { on_stop(id); }

  /// RAII: start(action) now, stop(action) when the guard goes out of scope (Lightning's
  /// `with profiler.profile(action):`).
  class Guard {
   public:
    Guard(Profiler* p, ActionId id) : p_(p), id_(id) {
      if (p_) p_->on_start(id_);
    }
    ~Guard() {
      // Started in the constructor, so stopping cannot find it idle; never throws while unwinding.
      try {
        if (p_) p_->on_stop(id_);
      } catch (...) {
      }
    }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    Profiler* p_;
    ActionId id_;
  };
  [[nodiscard]] Guard profile(const std::string& action) { return Guard(this, action_id(action)); }
  [[nodiscard]] Guard profile(ActionId id) { return Guard(this, id); }

  /// Before a stage: `stage` ("fit", "validate", "test", "predict") names the report file,
  /// `log_dir` is where it goes (the first logger's folder, else default_root_dir), and
  /// `rank`/`world_size` say which process this is. Subclasses that override it call it.
  virtual void setup(const std::string& stage, const std::string& log_dir, int64_t rank, int64_t world_size);
  /// One step of the stage ended (a training batch during fit, a batch of the other stages).
  /// Schedules (the pytorch profiler's wait/warmup/active) count these.
  virtual void step() {}
  /// The report: a table of what was timed since setup().
  virtual std::string summary() const = 0;
  /// At the end of a stage: rank 0 prints summary() to stdout; every rank writes it to
  /// report_path(".txt") atomically (temp file, fsync, rename). Overrides may write more.
  virtual void describe();
  /// After describe(): ends what the stage left running. What was recorded stays readable
  /// until the next setup(), which starts the next stage empty.
  virtual void teardown() {}

  /// `<log_dir>/<stage>-profile<ext>`, or `<stage>-profile-<rank><ext>` with several processes.
  std::string report_path(const std::string& ext, const std::string& what = "profile") const;
  const std::string& stage() const { return stage_; }
  bool is_global_zero() const { return rank_ == 0; }

 protected:
  virtual void on_start(ActionId id) = 0;
  virtual void on_stop(ActionId id) = 0;
  /// Called when action_id() adds a name: per-id storage grows here.
  virtual void on_new_action(ActionId) {}

  using Clock = std::chrono::steady_clock;
  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
  }

 private:
  std::vector<std::string> names_;
  std::unordered_map<std::string, ActionId> ids_;
  std::string stage_ = "fit";
  std::string log_dir_ = ".";
  int64_t rank_ = 0;
  int64_t world_size_ = 1;
};

/// Builds a profiler for the `profiler` Trainer option.
using ProfilerRegistry = Registry<Profiler>;
/// "simple", "advanced", "pytorch" and whatever a program adds with register_profiler.
ProfilerRegistry& profiler_registry();
/// Adds (or replaces) a profiler name for the `profiler` option.
void register_profiler(const std::string& key, std::string description, ProfilerRegistry::Factory factory);
/// The profiler `name` names, or nullptr for "" (profiling off). Unknown: ConfigError listing the known names.
std::shared_ptr<Profiler> make_profiler(const std::string& name);

}  // namespace volt::profilers
