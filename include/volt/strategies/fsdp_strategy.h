#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "volt/checkpoint_io/sharded_checkpoint.h"
#include "volt/core/sharded_unit.h"
#include "volt/strategies/ddp_strategy.h"
#include "volt/strategies/strategy_registry.h"

namespace volt::strategies {

/// Fully sharded data parallel on c10d (Lightning's FSDPStrategy; ZeRO stages 2 and 3), for the
/// LibTorch C++ API, which has none (docs/distributed.md "Sharded training: `fsdp`").
///
/// Every trainable parameter p of n elements is cut into W pieces of s = ceil(n / W) elements (the
/// last one zero-padded). Between steps the module's own Parameter holds this rank's piece as a 1-D
/// tensor of s elements (`set_data`: the Parameter object stays, so the optimizer's parameter list
/// and its state, built by configure_optimizers after setup, are shard-sized: every LibTorch optimizer
/// steps its shard unchanged). Before a step's forward the pieces are all-gathered (one collective
/// per unit of the wrap policy); after a synchronising backward the whole gradients are
/// reduce-scattered (averaged over the ranks, each keeping its piece) and the parameters go back to
/// their shards. Inside no_sync (gradient accumulation) nothing is reduced until the last micro-batch.
///
/// FULL_SHARD frees the whole parameters after the reduce-scatter; SHARD_GRAD_OP keeps them (the shard
/// is a view into them), so a rank holds whole parameters, 1/W of the gradients and 1/W of the optimizer
/// state. NO_SHARD is ddp (c10d's Reducer). LibTorch modules have no forward pre-hooks, so a unit the
/// wrap policy makes is gathered at the start of the step's forward; a module the user wrapped with
/// volt::Sharded (volt/core/sharded_unit.h) is a unit that, under FULL_SHARD, gathers its parameters
/// just before its own forward (the next wrapped unit's all-gather is started meanwhile, from the
/// order of the last step's forward), frees them after it, gathers them again from a hook on its
/// outputs just before their backward (prefetching the unit that ran before it) and frees them once
/// its gradients are in: a rank then holds the whole parameters of about two wrapped units at a time.
///
/// Checkpoints: state_dict_type "full" gathers every parameter and every shard-shaped optimizer state
/// tensor into the ordinary layout (rank 0 writes one file that a single process, a ddp run or
/// Python's torch.load reads); "sharded" has every rank write its pieces into a folder, in parallel
/// (checkpoint_io/sharded_checkpoint.h), which any strategy joins on load. Load cuts the ordinary
/// layout into this rank's shards, so either kind resumes on any number of ranks.
class FSDPStrategy : public DDPStrategy {
 public:
  FSDPStrategy(const StrategyParts& parts, FSDPOptions options);
  /// A strategy object for the Trainer's plug-ins (Lightning's FSDPStrategy(...)); `ddp` gives the process
  /// group's backend and timeouts (its communication hook does not apply). The accelerator connector connects
  /// devices, layout and the parts it lacks. Unlike strategy="fsdp", an object also runs on one process (its
  /// pieces are then whole: what the CUDA tests use to run cpu_offload on one GPU).
  explicit FSDPStrategy(FSDPOptions options, strategies::DDPOptions ddp = {});
  ~FSDPStrategy() override;

  /// A wrap policy that wraps none of the module's submodules is a ConfigError (before any launch).
  void check_module(const Module& module) const override;
  /// Moves the module, broadcasts rank 0's parameters and buffers, and shards the parameters.
  void setup(Module& module) override;
  /// Maps each optimizer's parameters to the shards; LBFGS (global line search) is refused.
  void setup_optimizers(const std::vector<std::shared_ptr<torch::optim::Optimizer>>& optimizers) override;
  at::Tensor training_step(Module& module, Batch& batch, StepContext& ctx) override;
  void validation_step(Module& module, Batch& batch, StepContext& ctx) override;
  void test_step(Module& module, Batch& batch, StepContext& ctx) override;
  at::Tensor predict_step(Module& module, Batch& batch, StepContext& ctx) override;
  /// Backward, then (unless inside no_sync) the reduce-scatter of the gradients and the re-shard.
  void backward(const at::Tensor& loss) override;
  /// By norm: the norm of the whole gradient, from every rank's shards (one allreduce).
  void clip_gradients(torch::optim::Optimizer& optimizer, double value, precision::ClipAlgorithm algorithm) override;
  /// The full checkpoint (a collective: every rank calls it); rank 0 writes.
  void save_checkpoint(const Checkpoint& checkpoint, const std::string& path) override;
  /// Each rank writes its own pieces into the folder `path` without a collective; the last to finish
  /// writes meta.json (a failing run: OnExceptionCheckpoint). Resumes like a sharded checkpoint.
  void save_checkpoint_without_collective(const Checkpoint& checkpoint, const std::string& path) override;
  /// The checkpoint with every sharded parameter and optimizer state cut to this rank's shard.
  Checkpoint load_checkpoint(const std::string& path) override;
  void on_exception() override;
  /// Gathers the parameters (the module is whole after a stage), then ddp's teardown.
  void teardown() override;

  const FSDPOptions& fsdp_options() const { return fsdp_; }
  /// What the wrapped units (volt::Sharded, FULL_SHARD) did since this strategy was made: groups made
  /// whole just before their forward and before their backward, freed after each, and the most parameter
  /// elements (padded) held whole at once by all units together inside a step.
  struct UnitCounts {
    int64_t gathered_before_forward = 0;
    int64_t freed_after_forward = 0;
    int64_t gathered_before_backward = 0;
    int64_t freed_after_backward = 0;
    int64_t peak_whole_elements = 0;
  };
  const UnitCounts& wrapped_unit_counts() const;
  /// How many units' reduce-scatters were started inside a backward, as soon as the unit's gradients
  /// were accumulated (the others start after it), since this strategy was made.
  int64_t reduce_scatters_started_in_backward() const;
  /// The units the wrap policy made from `module`: each a submodule's name ("" for the root's
  /// remaining parameters) and its parameters' names, in registration order.
  static std::vector<std::pair<std::string, std::vector<std::string>>> wrap_units(const Module& module,
                                                                                 const std::string& policy);

 private:
  struct UnitPlan {
    std::string name;
    std::vector<std::string> params;
    bool wrapped = false;  ///< a volt::Sharded module
  };
  static std::vector<UnitPlan> plan_units(const Module& module, const std::string& policy);
  class WrappedUnitHooks;
  bool sharded_mode() const { return fsdp_.sharding_strategy != ShardingStrategy::kNoShard; }
  /// A copy of `t` in host memory of its own (cpu_offload).
  at::Tensor to_host(const at::Tensor& t) const;
  /// What a parameter holds between steps, from `view` (its piece of the whole buffer): a host copy
  /// (cpu_offload), the view (SHARD_GRAD_OP, which keeps the buffer) or a copy (FULL_SHARD).
  at::Tensor own_piece(const at::Tensor& view) const;
  /// Whole parameters from the shards for every unit not whole (a wrapped one only with `wrapped_too`).
  void gather(const char* why, bool wrapped_too = false);
  /// Runs a c10d call; its failure becomes collective_failed naming `what` (and `why`), Volt's own errors pass.
  void guarded(const char* what, const char* why, const std::function<void()>& collective) const;
  /// Unit `u`'s all-gather: started (its pieces sent), finished (the whole parameters in place).
  void start_gather(size_t u, const char* why);
  void finish_gather(size_t u, const char* why);
  /// Unit `u`'s parameters back to their pieces (no-op when they are); `restore_grad`: the gradient the
  /// gather put aside goes back.
  void shard_unit(size_t u, bool restore_grad);
  /// A wrapped module (group `g`) whole: its prefetch finished, or gathered now. True if it was not.
  bool make_group_whole(size_t g, const char* why);
  void prefetch(size_t g);
  void finish_prefetch(const char* why);
  void before_unit_forward(size_t g);
  void after_unit_forward(size_t g, const std::vector<at::Tensor>& outputs);
  void before_unit_backward(size_t g);
  void detach_wrapped_modules();
  /// A step's end: the forward order kept for the next step's prefetch.
  void end_step();
  /// Gathers, runs `step`, and re-shards (unless the module was whole or a step was running).
  void evaluation_step(const char* why, const std::function<void()>& step);
  /// Averages the gradients across ranks into shards and puts the shards back in the parameters.
  void reduce_scatter_and_reshard();
  /// Starts unit `u`'s reduce-scatter (its whole gradients into a transfer buffer, then freed);
  /// with limit_all_gathers, finishes the oldest first when two are in flight.
  void start_reduce(size_t u);
  /// Waits for the oldest unit in flight and sums its pieces.
  void finish_reduce();
  /// The gradient accumulator of parameter `index` ran: the last of its unit starts the unit.
  void on_gradient_ready(size_t index);
  /// Per-backward bookkeeping, and a hook on each parameter's gradient accumulator.
  void prepare_overlap();
  void remove_gradient_hooks();
  /// The pieces back in the parameters without a reduction (after an evaluation step).
  void reshard();
  /// The dtype gradients of `param_dtype` are reduce-scattered in: bfloat16 for float32 parameters
  /// under precision bf16-mixed (Lightning's FSDP mixed precision), else their own.
  at::ScalarType reduce_dtype(at::ScalarType param_dtype) const;
  at::Tensor full_value(size_t index);
  /// state_dict_type "sharded": every rank writes its file into the folder `path`, rank 0 the metadata last.
  void save_sharded_checkpoint(const Checkpoint& checkpoint, const std::string& path);
  /// `checkpoint` with every sharded parameter and optimizer state cut to this rank's piece; fills
  /// `sharded` with what meta.json lists and returns the fsdp description that goes with it.
  nlohmann::json cut_to_pieces(Checkpoint& checkpoint, std::vector<checkpoint_io::ShardedTensorInfo>& sharded) const;
  /// Creates the folder of a sharded save (a file of that name is an error).
  void make_sharded_folder(const std::string& path) const;

  struct State;
  struct StateParam;
  /// `fn(entry, parameter)` for each piece-shaped optimizer state tensor in `tensors` (checkpoint
  /// names "optimizer_states.<i>.state.<p>.<key>" of a sharded parameter; not the 0-dim step counters).
  void for_each_optimizer_state(
      std::map<std::string, at::Tensor>& tensors,
      const std::function<void(std::map<std::string, at::Tensor>::iterator, const StateParam&)>& fn) const;
  FSDPOptions fsdp_;
  std::unique_ptr<State> state_;
  std::unique_ptr<WrappedUnitHooks> unit_hooks_;
};

/// What one rank holds of a model of `num_params` parameter elements: bytes of parameters, gradients and
/// optimizer state between a backward and its optimizer step (`volt plan --params`; bench/fsdp_memory
/// measures the same three). Padding is counted as fsdp pads: ceil(num_params / world_size) per rank.
struct RankMemory {
  int64_t parameters = 0;
  int64_t gradients = 0;
  int64_t optimizer_state = 0;
  /// Held besides, by the strategy (ddp's Reducer buckets), in bytes; not in total().
  int64_t communication_buffers = 0;
  int64_t total() const { return parameters + gradients + optimizer_state; }
};
/// `strategy`: a registry name (fsdp uses `sharding`; every other one keeps whole copies);
/// `bytes_per_element` of the parameters (4 for 32-true and the mixed precisions, 2 for bf16-/16-true,
/// 8 for 64-true); `state_tensors_per_param`: the optimizer's state tensors of a parameter's size
/// (Adam, AdamW 2; SGD with momentum, RMSprop, Adagrad 1; plain SGD 0).
RankMemory rank_memory(const std::string& strategy, ShardingStrategy sharding, int64_t world_size,
                       int64_t num_params, int64_t bytes_per_element, int64_t state_tensors_per_param,
                       bool gradient_as_bucket_view = false);

/// The factory behind "fsdp".
std::shared_ptr<Strategy> make_fsdp_strategy(const StrategyParts& parts);

}  // namespace volt::strategies
