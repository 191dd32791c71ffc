#pragma once
/// LibTorch optimizers' state in PyTorch's optimizer.state_dict() layout, the one Lightning keeps in a
/// checkpoint's "optimizer_states".
#include <string>

#include "volt/core/checkpoint.h"

namespace torch::optim {
class Optimizer;
}

namespace volt::checkpoint_io {

/// Writes optimizer `index` as PyTorch's state_dict(): `checkpoint.meta["optimizer_states"][index]` =
/// {"state": {"<p>": {non-tensor entries}}, "param_groups": [{PyTorch's option names, "params": [indices]}]}
/// and each state tensor as `checkpoint.tensors["optimizer_states.<index>.state.<p>.<name>"]` (p counts the
/// parameters over all groups, as PyTorch does). SGD (momentum_buffer), Adam and AdamW (step, exp_avg,
/// exp_avg_sq, max_exp_avg_sq with amsgrad), RMSprop (step, square_avg, momentum_buffer, grad_avg) and
/// Adagrad (step, sum); `step` is a float32 scalar tensor as PyTorch keeps it (an integer for RMSprop, as
/// PyTorch 1.13). LBFGS: one state under the first parameter (func_evals, n_iter, t, prev_loss in the
/// metadata; d, H_diag, prev_flat_grad, and the lists old_dirs, old_stps, ro, al as
/// "<name>.<k>" tensors, the lists' lengths in the metadata). Returns false and writes nothing for another
/// optimizer (a user's own).
bool dump_pytorch_optimizer_state(const torch::optim::Optimizer& optimizer, size_t index, Checkpoint& checkpoint);

/// Whether `checkpoint` holds optimizer `index` in that layout.
bool has_pytorch_optimizer_state(const Checkpoint& checkpoint, size_t index);

/// Restores optimizer `index` from that layout (a Volt or Lightning checkpoint): the groups' options and
/// every parameter's state, moved to its parameter's device. Checked first: the optimizer's kind is one
/// dump_pytorch_optimizer_state writes, the number of groups and of parameters per group, each state
/// tensor's shape and dtype against its parameter, and the numbers. Otherwise one CheckpointError naming
/// `path` lists the problems, and the optimizer is unchanged.
void load_pytorch_optimizer_state(torch::optim::Optimizer& optimizer, size_t index, const Checkpoint& checkpoint,
                                  const std::string& path);

}  // namespace volt::checkpoint_io
