#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include <ATen/core/Tensor.h>

namespace volt::strategies {

/// Sums a CPU float32 tensor in place across all processes (e.g. a c10d Gloo allreduce
/// with ReduceOp::SUM, waited for). Supplied by the multi-process strategy that owns the
/// process group.
using HostAllreduceSum = std::function<void(at::Tensor& buffer)>;

/// The gradient averaging of the multi-process `xla` strategy on a runtime without its own
/// collective (the CPU stand-in): the gradients of `params` (on a lazy-tensor device,
/// already computed: call it after the step boundary) are copied into one float32 host
/// buffer, summed across the `world_size` processes by `allreduce_sum`, divided by
/// `world_size` and copied back into each gradient on its device, in its dtype (Gloo has no
/// bfloat16 reduction, hence float32). A parameter without a gradient contributes zeros
/// and receives the average, so every process sends the same layout.
/// Returns the number of gradient elements reduced.
int64_t average_gradients_on_host(const std::vector<at::Tensor>& params, int64_t world_size,
                                  const HostAllreduceSum& allreduce_sum);

}  // namespace volt::strategies
