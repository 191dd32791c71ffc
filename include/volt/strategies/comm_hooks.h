#pragma once
/// DDP communication hooks (Lightning's `ddp_comm_hook`, PyTorch's
/// torch.distributed.algorithms.ddp_comm_hooks): what the Reducer does with each gradient bucket
/// instead of its own averaging allreduce. Built in: "allreduce", "fp16", "bf16", "powersgd"
/// (docs/distributed.md, "Communication hooks"); a user's own hook derives from CommHook and is
/// given to DDPStrategy through DDPOptions::comm_hook_object.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

namespace c10 {
namespace ivalue {
struct Future;
}  // namespace ivalue
}  // namespace c10

namespace c10d {
class GradBucket;
class ProcessGroup;
class CommHookInterface;
}  // namespace c10d

namespace volt::strategies {

/// PowerSGD's settings, with the names and defaults of PyTorch's PowerSGDState.
struct PowerSGDOptions {
  /// Rank r of the low-rank factors P (n x r) and Q (m x r) of each compressed n x m gradient.
  int64_t matrix_approximation_rank = 1;
  /// Optimizer steps of plain (uncompressed, averaging) allreduce before compression starts.
  int64_t start_powerSGD_iter = 1000;
  /// A matrix is compressed only when (n + m) * r * min_compression_rate < n * m; the others (and
  /// every 1-D tensor at the default of 2) are allreduced uncompressed in one batch.
  double min_compression_rate = 2.0;
  /// Adds each rank's compression error of the previous step to its gradient (error feedback).
  bool use_error_feedback = true;
  /// Starts each step's power iteration from the previous step's Q instead of a fresh random Q.
  bool warm_start = true;
  /// Added to every column norm in the Gram-Schmidt orthogonalization (guards all-zero columns).
  double orthogonalization_epsilon = 0.0;
  /// Seeds the random Q (the same on every rank).
  uint64_t random_seed = 0;
};

/// A communication hook: run on every rank for every gradient bucket once its gradients are
/// ready; returns a future whose value is the reduced bucket (a tensor the shape and dtype of
/// the bucket's buffer, usually the buffer itself), which the Reducer copies into the
/// parameters' gradients. The Reducer does NOT pre-divide the gradients when a hook is
/// registered: averaging is the hook's job. Hooks run on the backward thread; one object
/// serves every Reducer the strategy builds (one per stage), so state persists across fits.
class CommHook {
 public:
  virtual ~CommHook() = default;
  /// The name shown in messages ("powersgd", or the user's).
  virtual std::string name() const = 0;
  /// Called on every rank when the Reducer is built (each stage's setup): the process group the
  /// hook communicates over and the trainable parameters in registration order.
  virtual void setup(const c10::intrusive_ptr<c10d::ProcessGroup>& group, const std::vector<at::Tensor>& parameters);
  /// Reduces one bucket (see the class comment).
  virtual c10::intrusive_ptr<c10::ivalue::Future> run_hook(c10d::GradBucket& bucket) = 0;
  /// This rank's state to keep in checkpoints (tensors by name, e.g. PowerSGD's error
  /// feedback); the strategy gathers every rank's onto rank 0's checkpoint. Default: none.
  virtual std::map<std::string, at::Tensor> state_dict() const { return {}; }
  /// Restores what state_dict() returned on this rank when the checkpoint was written.
  virtual void load_state_dict(const std::map<std::string, at::Tensor>& /*state*/) {}

 protected:
  const c10::intrusive_ptr<c10d::ProcessGroup>& group() const { return group_; }
  int64_t world_size() const;

 private:
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
};

/// The built-in hook names, in the order messages list them: allreduce, fp16, bf16, powersgd.
const std::vector<std::string>& comm_hook_names();

/// Throws a ConfigError when `name` is not empty and not a built-in hook (listing them), or
/// when a PowerSGD setting is out of range (saying which and the range); `where` names the
/// option in the message ("ddp.comm_hook" or "DDPOptions::comm_hook").
void check_comm_hook(const std::string& name, const PowerSGDOptions& powersgd, const std::string& where);

/// A new built-in hook object ("allreduce", "fp16", "bf16", "powersgd"); ConfigError for
/// another name (check_comm_hook's message).
std::shared_ptr<CommHook> make_comm_hook(const std::string& name, const PowerSGDOptions& powersgd = {});

/// The c10d adapter the Reducer takes (register_comm_hook) around `hook`.
std::unique_ptr<c10d::CommHookInterface> to_c10d_comm_hook(std::shared_ptr<CommHook> hook);

}  // namespace volt::strategies
