#pragma once
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "volt/accelerators/accelerator.h"
#include "volt/checkpoint_io/checkpoint_io.h"
#include "volt/core/checkpoint.h"
#include "volt/core/module.h"
#include "volt/core/step_context.h"
#include "volt/core/types.h"
#include "volt/environments/cluster_environment.h"
#include "volt/precision/precision.h"

namespace volt::strategies {

namespace launchers {
class Launcher;
}
struct StrategyParts;

/// How a reduction combines values across processes.
enum class ReduceOp { kMean, kSum, kMax, kMin };

/// Which launcher a strategy needs before it can run ("none": this process is the job).
enum class LauncherKind { kNone, kSubprocess, kSpawn };

/// The training routine: how processes and devices cooperate to run steps, and the owner
/// of the accelerator, precision plug-in, cluster environment and checkpoint IO below it.
/// Loops call it; it calls only what is below it (and the module's step methods).
class Strategy {
 public:
  Strategy(std::shared_ptr<accelerators::Accelerator> accelerator,
           std::shared_ptr<precision::Precision> precision,
           std::shared_ptr<environments::ClusterEnvironment> environment,
           std::shared_ptr<checkpoint_io::CheckpointIO> checkpoint_io);
  virtual ~Strategy() = default;

  /// Gives a strategy object the user built (Trainer plug-ins: strategy=<object>) what the
  /// accelerator connector resolved: each of accelerator, precision, environment and
  /// checkpoint IO that is still unset is taken from `parts` (a part the object was built
  /// with stays), and an override reads its devices and process layout from them (call the
  /// base first). The connector calls it once, at Trainer construction, before anything runs.
  virtual void connect(const StrategyParts& parts);
  /// The parts as held now: null where none was given and connect() has not run yet.
  const std::shared_ptr<accelerators::Accelerator>& accelerator_part() const { return accelerator_; }
  const std::shared_ptr<precision::Precision>& precision_part() const { return precision_; }
  const std::shared_ptr<environments::ClusterEnvironment>& environment_part() const { return environment_; }
  const std::shared_ptr<checkpoint_io::CheckpointIO>& checkpoint_io_part() const { return checkpoint_io_; }

  /// Registry key, e.g. "single_device".
  virtual std::string name() const = 0;
  /// The kind of launcher its spec names (StrategySpec::launcher).
  virtual LauncherKind launcher_kind() const { return LauncherKind::kNone; }
  /// What starts the job's other processes and runs each stage on them
  /// (launchers/launcher.h); nullptr when this process needs none: one process, or
  /// processes already started by torchrun, srun, mpirun or `volt launch`. The Trainer
  /// runs every stage through it. Owned by the strategy.
  virtual launchers::Launcher* launcher() const { return nullptr; }
  /// The device this process computes on.
  virtual c10::Device root_device() const = 0;

  /// Prepares this process (devices, process groups). Called once per stage, before setup.
  virtual void setup_environment();
  /// Refuses, with a ConfigError, a module this strategy cannot train (fsdp: a wrap policy that
  /// wraps none of its modules). The Trainer calls it as a stage starts, before any launch.
  virtual void check_module(const Module& /*module*/) const {}
  /// Builds (configure_model), converts and moves the module. Before configure_optimizers.
  virtual void setup(Module& module);
  /// The stage's optimizers, once configure_optimizers has built them (after setup; Lightning's
  /// Strategy.setup_optimizers): fsdp maps their parameters to its shards and refuses LBFGS.
  virtual void setup_optimizers(const std::vector<std::shared_ptr<torch::optim::Optimizer>>& /*optimizers*/) {}
  /// Moves a batch to root_device() and applies the precision's input conversion.
  virtual void batch_to_device(Batch& batch) const;

  /// Runs Module::training_step in the precision's forward region.
  virtual at::Tensor training_step(Module& module, Batch& batch, StepContext& ctx);
  virtual void validation_step(Module& module, Batch& batch, StepContext& ctx);
  virtual void test_step(Module& module, Batch& batch, StepContext& ctx);
  virtual at::Tensor predict_step(Module& module, Batch& batch, StepContext& ctx);

  /// Back-propagates `loss` through the precision plug-in (scaling) and, in
  /// distributed strategies, synchronises gradients.
  virtual void backward(const at::Tensor& loss);
  virtual void unscale_gradients(torch::optim::Optimizer& optimizer);
  virtual void clip_gradients(torch::optim::Optimizer& optimizer, double value,
                              precision::ClipAlgorithm algorithm);
  /// One optimizer step through the precision plug-in (unscale, `before_step` with the
  /// hooks and clipping, step, scale update); false when the step was skipped.
  virtual bool optimizer_step(torch::optim::Optimizer& optimizer, const std::function<void()>& before_step = {});

  /// Reads a one-element tensor on the host (logging). Lazy-tensor strategies end the
  /// recorded graph first (mark_step), so the read does not run part of it twice.
  virtual double scalar_to_host(const at::Tensor& value);

  // --- collectives (identity on one process) ---
  virtual int64_t world_size() const { return 1; }
  virtual int64_t global_rank() const { return 0; }
  virtual int64_t local_rank() const { return 0; }
  bool is_global_zero() const { return global_rank() == 0; }
  virtual void barrier(const std::string& /*name*/) {}
  virtual double reduce(double value, ReduceOp /*op*/) { return value; }
  virtual bool reduce_boolean_decision(bool decision, bool /*all*/) { return decision; }
  /// A reduction of one number started now on this rank and read later with get(), so that its
  /// latency overlaps the work in between (every rank must start the same reductions in the
  /// same order, as for any collective). Dropping it unread is allowed.
  class PendingReduce {
   public:
    virtual ~PendingReduce() = default;
    /// Waits for the reduction and returns its result.
    virtual double get() = 0;
  };
  virtual std::unique_ptr<PendingReduce> start_reduce(double value, ReduceOp op);
  /// Element-wise reduction of a tensor across ranks (a new tensor; the input on one process).
  virtual at::Tensor all_reduce(const at::Tensor& tensor, ReduceOp /*op*/) { return tensor; }
  /// Overwrites `tensors` on every rank with rank `src`'s.
  virtual void broadcast(std::vector<at::Tensor>& /*tensors*/, int64_t /*src*/) {}
  /// Rank `src`'s bytes on every rank (small serialised objects).
  virtual std::string broadcast_object(const std::string& bytes, int64_t /*src*/) { return bytes; }
  /// Every rank's tensor, in rank order (tensors of equal shape).
  virtual std::vector<at::Tensor> all_gather(const at::Tensor& tensor) { return {tensor}; }

  /// Turns gradient synchronisation in backward on or off (off: accumulate locally, as in
  /// all but the last micro-batch of gradient accumulation); returns the previous setting.
  /// Use no_sync() rather than calling this directly.
  virtual bool set_gradient_sync(bool /*enabled*/) { return true; }
  /// While the guard lives, backward passes do not synchronise gradients (PyTorch's no_sync).
  class [[nodiscard]] NoSyncGuard {
   public:
    explicit NoSyncGuard(Strategy& s) : strategy_(&s), previous_(s.set_gradient_sync(false)) {}
    NoSyncGuard(NoSyncGuard&& other) noexcept : strategy_(other.strategy_), previous_(other.previous_) {
      other.strategy_ = nullptr;
    }
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(NoSyncGuard&&) = delete;
    ~NoSyncGuard() {
      if (strategy_ != nullptr) strategy_->set_gradient_sync(previous_);
    }

   private:
    Strategy* strategy_;
    bool previous_;
  };
  NoSyncGuard no_sync() { return NoSyncGuard(*this); }

  // --- checkpoints ---
  /// Writes on rank 0 only; every rank calls it.
  virtual void save_checkpoint(const Checkpoint& checkpoint, const std::string& path);
  /// The save of a failing run (OnExceptionCheckpoint): no barrier or collective, since another
  /// rank may be gone. Every rank calls it; by default rank 0 writes; fsdp has each rank write its
  /// own pieces (checkpoint_io/sharded_checkpoint.h).
  virtual void save_checkpoint_without_collective(const Checkpoint& checkpoint, const std::string& path);
  virtual Checkpoint load_checkpoint(const std::string& path);
  virtual void remove_checkpoint(const std::string& path);
  /// The optimizer's state as checkpoint bytes (lazy-tensor strategies copy it to the
  /// CPU first).
  virtual std::string save_optimizer_state(torch::optim::Optimizer& optimizer);
  /// Restores state written by save_optimizer_state, on this strategy's device.
  virtual void load_optimizer_state(torch::optim::Optimizer& optimizer, const std::string& bytes);

  /// A stage failed on this rank: stop whatever would wait for it (other ranks this
  /// process started). Called before teardown.
  virtual void on_exception() {}
  /// Releases devices and plug-ins at the end of a stage.
  virtual void teardown();

  accelerators::Accelerator& accelerator() const { return *accelerator_; }
  precision::Precision& precision() const { return *precision_; }
  environments::ClusterEnvironment& cluster_environment() const { return *environment_; }
  checkpoint_io::CheckpointIO& checkpoint_io() const { return *checkpoint_io_; }

 protected:
  /// A strategy whose parts are connected later (connect): what a strategy object the user
  /// builds for the Trainer's plug-ins starts from. A derived constructor may set some of
  /// the parts below itself; connect() keeps those.
  Strategy() = default;

  std::shared_ptr<accelerators::Accelerator> accelerator_;
  std::shared_ptr<precision::Precision> precision_;
  std::shared_ptr<environments::ClusterEnvironment> environment_;
  std::shared_ptr<checkpoint_io::CheckpointIO> checkpoint_io_;
};

}  // namespace volt::strategies
