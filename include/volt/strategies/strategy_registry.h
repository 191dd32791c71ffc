#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "volt/core/registry.h"
#include "volt/strategies/comm_hooks.h"
#include "volt/strategies/strategy.h"

namespace volt::strategies {

/// What a strategy name means, before any class is built: Lightning's names, several of
/// which share one class through stored arguments (ddp_find_unused_parameters_true is
/// ddp with find_unused_parameters on).
struct StrategySpec {
  std::string name;
  std::string description;
  LauncherKind launcher = LauncherKind::kNone;
  /// Accelerators it runs on ("cpu", "cuda", "tpu").
  std::vector<std::string> accelerators;
  /// One process drives every device of the node (dp), instead of one process per device.
  bool one_process_per_node = false;
  /// Exactly one device in the whole job (single_device, single_xla).
  bool single_device = false;
  bool find_unused_parameters = false;
};

/// Every strategy name registered, in registration order (Volt's own first).
std::vector<StrategySpec> strategy_specs();
/// The spec of `name`; ConfigError listing the known names when there is none.
StrategySpec strategy_spec(const std::string& name);
/// "none", "subprocess", "spawn".
const char* to_string(LauncherKind kind);

/// Settings of the ddp family (the Trainer's process_group_* and ddp_* options).
struct DDPOptions {
  /// "gloo" or "nccl" (already resolved from "auto").
  std::string backend = "gloo";
  /// How long a collective waits for the other ranks before it fails.
  std::chrono::milliseconds timeout = std::chrono::minutes(30);
  /// How long the rendezvous at MASTER_ADDR:MASTER_PORT may take.
  std::chrono::milliseconds rendezvous_timeout = std::chrono::minutes(5);
  double bucket_cap_mb = 25.0;
  double first_bucket_cap_mb = 1.0;
  bool find_unused_parameters = false;
  /// Gradients are views into the Reducer's buckets (saves a copy per step).
  bool gradient_as_bucket_view = false;
  /// The communication hook by name (Lightning's ddp_comm_hook; volt/strategies/comm_hooks.h):
  /// empty for c10d's own averaging allreduce, or allreduce, fp16, bf16, powersgd.
  std::string comm_hook;
  /// PowerSGD's settings (PyTorch's PowerSGDState), used when comm_hook is "powersgd".
  PowerSGDOptions powersgd;
  /// A hook of the user's, used instead of comm_hook (which must then be empty).
  std::shared_ptr<CommHook> comm_hook_object;
};

/// How fsdp shards (Lightning's FSDPStrategy sharding_strategy; docs/distributed.md, "Sharded training").
enum class ShardingStrategy {
  /// Parameters, gradients and optimizer state sharded; whole parameters only from the gather before a
  /// step's forward to the reduce-scatter after its backward, or, for a module wrapped in volt::Sharded,
  /// around its own forward and around its own backward (ZeRO-3).
  kFullShard,
  /// Gradients and optimizer state sharded, every rank keeping whole parameters (ZeRO-2).
  kShardGradOp,
  /// Nothing sharded: ddp's Reducer.
  kNoShard,
};

/// FULL_SHARD, SHARD_GRAD_OP or NO_SHARD in any case (Lightning's names, and "full_shard" etc.);
/// ConfigError naming `flag` and the choices for another.
ShardingStrategy parse_sharding_strategy(const std::string& name, const std::string& flag = "fsdp.sharding_strategy");
/// "FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD".
const char* to_string(ShardingStrategy s);

/// Settings of strategy "fsdp" (the Trainer's fsdp.* flags).
struct FSDPOptions {
  ShardingStrategy sharding_strategy = ShardingStrategy::kFullShard;
  /// Which submodules become units of their own (one all-gather and one reduce-scatter each):
  /// "" (the whole module is one unit), "size:N" (a submodule with at least N parameter elements
  /// not already in a smaller unit; Lightning's size_based_auto_wrap_policy), "class:A,B" (submodules
  /// of those classes, "Linear" or "torch::nn::LinearImpl"). Checked by check_auto_wrap_policy.
  std::string auto_wrap_policy;
  /// "full": rank 0 writes one checkpoint in the ordinary layout; "sharded": every rank writes its
  /// piece into a folder (checkpoint_io/sharded_checkpoint.h), in parallel. Both load on any number of ranks.
  std::string state_dict_type = "full";
  /// At most two units' all-gathers (and reduce-scatters) in flight at once, as Lightning's
  /// limit_all_gathers: the transfer buffers then hold two units, not the whole model; false: all at once.
  bool limit_all_gathers = true;
  /// Lightning's cpu_offload: between steps every parameter piece, its gradient and the optimizer
  /// state (which the optimizer makes next to its parameter) live in host memory, and the optimizer
  /// steps there; a unit's pieces go to the compute device for its all-gather, the reduce-scattered
  /// gradient pieces come back. FULL_SHARD and SHARD_GRAD_OP only.
  bool cpu_offload = false;
};

/// ConfigError for a policy that is not "", "size:N" (N >= 1) or "class:A[,B...]".
void check_auto_wrap_policy(const std::string& policy, const std::string& flag = "fsdp.auto_wrap_policy");
/// ConfigError for cpu_offload with NO_SHARD (which makes no pieces to keep in host memory).
void check_cpu_offload(const FSDPOptions& options);

/// What a strategy is built from, and what the accelerator connector gives a strategy object
/// the user built (Strategy::connect).
struct StrategyParts {
  const StrategySpec& spec;
  std::shared_ptr<accelerators::Accelerator> accelerator;
  std::shared_ptr<precision::Precision> precision;
  std::shared_ptr<environments::ClusterEnvironment> environment;
  std::shared_ptr<checkpoint_io::CheckpointIO> checkpoint_io;
  std::vector<c10::Device> parallel_devices;
  c10::Device root_device;
  DDPOptions ddp;
  FSDPOptions fsdp = {};
};

using StrategyFactory = std::function<std::shared_ptr<Strategy>(const StrategyParts&)>;

/// The Trainer's `strategy` option: each key's StrategySpec (its launcher, accelerators,
/// layout) and the class behind it. A key without a factory is known to plans ("dp" in a
/// build without CUDA) but cannot train. "auto" is reserved.
using StrategyRegistry = InfoRegistry<StrategySpec, Strategy, const StrategyParts&>;

/// The registry, with Volt's strategies on first use.
StrategyRegistry& strategy_registry();
/// Adds Volt's strategies to `registry` (what strategy_registry() calls once).
void register_builtin_strategies(StrategyRegistry& registry);

/// Adds (or replaces) a strategy name; `spec.name` is the key and `spec.description` its
/// line in `volt info`:
///
///     volt::strategies::register_strategy({.name = "my_ddp", .description = "ddp, logged",
///                                          .launcher = LauncherKind::kSubprocess, .accelerators = {"cpu"}},
///         [](const StrategyParts& p) { return std::make_shared<MyDDP>(p, p.ddp); });
void register_strategy(StrategySpec spec, StrategyFactory factory);

/// The class behind a name, or an empty function when this build cannot train with it.
StrategyFactory strategy_factory(const std::string& name);
/// Replaces the class behind a known name, keeping its spec (register_strategy adds names).
void register_strategy_factory(const std::string& name, StrategyFactory factory);

}  // namespace volt::strategies
