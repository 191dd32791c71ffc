#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "volt/strategies/launchers/spawn_launcher.h"
#include "volt/strategies/launchers/subprocess_launcher.h"
#include "volt/strategies/strategy.h"
#include "volt/strategies/strategy_registry.h"

namespace volt::strategies {

/// Distributed data parallel on c10d (Lightning's DDPStrategy and DDPSpawnStrategy): one
/// process per device, a process group (Gloo for CPU tensors, NCCL for CUDA) joined through
/// a TCPStore at MASTER_ADDR:MASTER_PORT, parameters and buffers broadcast from rank 0, and
/// gradients averaged by c10d's Reducer (buckets, allreduce overlapped with backward).
///
/// Launch: under torchrun/srun/mpirun/`volt launch` every process is already a rank and
/// launcher() is nullptr. Else strategy "ddp" has a SubprocessLauncher (this process is
/// rank 0 of its node and re-runs the program for local ranks 1..N-1 when the first stage
/// starts: code before that runs in every rank), and "ddp_spawn" a SpawnLauncher (the
/// parent starts N workers for each stage and takes their results back).
class DDPStrategy : public Strategy {
 public:
  DDPStrategy(const StrategyParts& parts, DDPOptions options);
  /// A strategy object for the Trainer's plug-ins (Lightning's DDPStrategy(...)): `name` is
  /// a ddp-family registry key ("ddp", "ddp_spawn", ...), whose launcher it uses; the
  /// accelerator connector connects its devices, layout and the parts it lacks.
  explicit DDPStrategy(DDPOptions options, const std::string& name = "ddp");
  /// Takes the parts it lacks, then its root device and ranks from them.
  void connect(const StrategyParts& parts) override;
  ~DDPStrategy() override;

  std::string name() const override { return name_; }
  LauncherKind launcher_kind() const override { return launcher_kind_; }
  /// The subprocess launcher (ddp without an outside launcher), the spawn launcher
  /// (ddp_spawn, xla: in the parent and in its workers), or nullptr.
  launchers::Launcher* launcher() const override;
  c10::Device root_device() const override { return root_device_; }

  /// Joins the process group (once per process): rendezvous, layout check across ranks.
  void setup_environment() override;
  /// Moves the module, broadcasts its parameters and buffers from rank 0, builds the Reducer.
  void setup(Module& module) override;
  at::Tensor training_step(Module& module, Batch& batch, StepContext& ctx) override;
  void backward(const at::Tensor& loss) override;
  bool set_gradient_sync(bool enabled) override;

  int64_t world_size() const override { return world_size_; }
  int64_t global_rank() const override { return global_rank_; }
  int64_t local_rank() const override { return local_rank_; }
  void barrier(const std::string& name) override;
  double reduce(double value, ReduceOp op) override;
  bool reduce_boolean_decision(bool decision, bool all) override;
  std::unique_ptr<PendingReduce> start_reduce(double value, ReduceOp op) override;
  void broadcast(std::vector<at::Tensor>& tensors, int64_t src) override;
  std::string broadcast_object(const std::string& bytes, int64_t src) override;
  std::vector<at::Tensor> all_gather(const at::Tensor& tensor) override;
  at::Tensor all_reduce(const at::Tensor& tensor, ReduceOp op) override;

  /// Rank 0 writes; every rank waits until the file is there (a rank may read it next).
  /// With a communication hook, every rank's hook state (state_dict()) goes into the file too: tensors
  /// "ddp_comm_hook.rank<r>.<key>" (in volt_tensors, which Lightning ignores) and meta "ddp_comm_hook"
  /// (the hook's name and world size). A collective: every rank calls it.
  void save_checkpoint(const Checkpoint& checkpoint, const std::string& path) override;
  /// Reads the file; with a communication hook, gives this rank's saved hook state back to it (when the
  /// checkpoint holds the same hook on as many ranks; else a warning on rank 0 and a fresh state).
  Checkpoint load_checkpoint(const std::string& path) override;
  void on_exception() override;
  /// Keeps the process group (a later stage reuses it); releases the Reducer.
  void teardown() override;

  const DDPOptions& ddp_options() const { return options_; }

 protected:
  /// A strategy object of another registry key built on ddp (FSDPStrategy's "fsdp"): its launcher,
  /// without the ddp-family check of the public constructor.
  DDPStrategy(DDPOptions options, const StrategySpec& spec);
  /// Replaces the spawn launcher (XLAStrategy's is the XLA one).
  void use_spawn_launcher(std::unique_ptr<launchers::SpawnLauncher> launcher);
  /// Rank 0's parameters and buffers to every rank (the start of setup).
  void broadcast_module_state(Module& module);
  /// "rank 1 on host h"
  std::string who() const;
  /// Throws a DistributedError naming the failed rank when the subprocess launcher's monitor
  /// saw one die (this process is rank 0 and started the others).
  void raise_if_a_rank_failed() const;
  /// A collective or the gradient allreduce threw: the error to raise, naming the rank that
  /// died when that is why (waiting briefly for the monitor's report).
  [[noreturn]] void collective_failed(const std::string& what, const std::exception& e) const;

  /// The c10d state (strategies/detail/ddp_impl.h): process group, store, Reducer, no_sync flag.
  struct Impl;
  std::unique_ptr<Impl> impl_;

 private:
  /// Joins this job's process group: the one this process's previous Trainer left, when it
  /// is the same job's, else a new one (join_new_process_group).
  void join_process_group();
  void join_new_process_group();
  void add_comm_hook_state(Checkpoint& checkpoint);
  void restore_comm_hook_state(const Checkpoint& checkpoint, const std::string& path);
  static constexpr const char* kCommHookMetaKey = "ddp_comm_hook";
  static constexpr const char* kCommHookStatePrefix = "ddp_comm_hook.rank";

  std::unique_ptr<launchers::SubprocessLauncher> subprocess_;
  std::unique_ptr<launchers::SpawnLauncher> spawn_;
  std::string name_;
  LauncherKind launcher_kind_;
  c10::Device root_device_;
  DDPOptions options_;
  int64_t world_size_ = 1;
  int64_t global_rank_ = 0;
  int64_t local_rank_ = 0;
  int64_t node_rank_ = 0;
  int64_t local_world_size_ = 1;
};

/// The factory behind ddp, ddp_spawn and their find_unused_parameters variants.
std::shared_ptr<Strategy> make_ddp_strategy(const StrategyParts& parts);

}  // namespace volt::strategies
