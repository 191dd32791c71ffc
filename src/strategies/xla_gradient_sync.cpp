#include "volt/strategies/xla_gradient_sync.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/zeros.h>

#include "volt/core/error.h"

namespace volt::strategies {

int64_t average_gradients_on_host(const std::vector<at::Tensor>& params, int64_t world_size,
                                  const HostAllreduceSum& allreduce_sum) {
  if (world_size < 1) {
    throw ConfigError("average_gradients_on_host: world_size=" + std::to_string(world_size) + "; it must be >= 1.");
  }
  if (!allreduce_sum) throw ConfigError("average_gradients_on_host: no allreduce function was given.");
  std::vector<at::Tensor> host;
  host.reserve(params.size());
  for (const auto& p : params) {
    const at::Tensor& g = p.grad();
    host.push_back(g.defined() ? g.detach().to(c10::kCPU, at::kFloat).reshape({-1})
                               : at::zeros({p.numel()}, at::TensorOptions().dtype(at::kFloat)));
  }
  if (host.empty()) return 0;
  at::Tensor flat = at::cat(host);
  allreduce_sum(flat);
  if (world_size > 1) flat.div_(static_cast<double>(world_size));
  int64_t offset = 0;
  for (const auto& p : params) {
    const int64_t n = p.numel();
    at::Tensor slice = flat.narrow(0, offset, n).view(p.sizes());
    offset += n;
    at::Tensor& g = const_cast<at::Tensor&>(p).mutable_grad();
    if (g.defined()) {
      g.detach().copy_(slice.to(p.device()));  // copy_ converts the dtype
    } else {
      g = slice.to(p.device(), p.scalar_type());
    }
  }
  return flat.numel();
}

}  // namespace volt::strategies
