#include "volt/strategies/xla_strategy.h"

#include <algorithm>

#include <ATen/ops/zeros_like.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include "strategies/detail/xla_device.h"
#include "volt/accelerators/tpu_accelerator.h"
#include "volt/core/device_placement.h"
#include "volt/core/error.h"
#include "volt/strategies/launchers/xla_launcher.h"
#include "volt/strategies/xla_gradient_sync.h"

namespace volt::strategies {

XLAStrategy::XLAStrategy(const StrategyParts& parts, DDPOptions options)
    : DDPStrategy(parts, std::move(options)),
      device_(parts.root_device),
      runtime_(detail::xla_runtime("xla", parts.accelerator, device_)) {
  if (ddp_options().backend != "gloo") {
    throw ConfigError("strategy='xla' runs its collectives on host copies with process_group_backend='gloo'; "
                      "'" + ddp_options().backend + "' was given. Use process_group_backend='gloo' or 'auto'.");
  }
  if (launcher_kind() == LauncherKind::kSpawn) {
    use_spawn_launcher(std::make_unique<launchers::XLALauncher>(
        environment_, std::max<int64_t>(1, static_cast<int64_t>(parts.parallel_devices.size()))));
  }
}

void XLAStrategy::mark_step() const {
  runtime_->mark_step(device_);
}

void XLAStrategy::setup(Module& module) {
  detail::setup_module_on_xla(module, device_, *precision_);
  if (world_size() == 1) return;
  // Every worker starts from the parent's weights already; configure_model may still draw
  // its own, so rank 0's are the ones all start from (as with ddp).
  std::vector<at::Tensor> state;
  for (const auto& p : module.parameters()) state.push_back(p);
  for (const auto& b : module.buffers()) state.push_back(b);
  broadcast(state, 0);
}

bool XLAStrategy::optimizer_step(torch::optim::Optimizer& optimizer, const std::function<void()>& before_step) {
  last_averaged_ = 0;
  if (world_size() > 1) {
    mark_step();  // the gradients of this step, computed before they are averaged
    std::vector<at::Tensor> params;
    for (const auto& group : optimizer.param_groups()) {
      for (const auto& p : group.params()) params.push_back(p);
    }
    if (runtime_->has_collective()) {
      // The runtime's own all-reduce, on the device tensors. A parameter without a
      // gradient sends zeros, so every process sends the same list.
      std::vector<at::Tensor> grads;
      grads.reserve(params.size());
      for (auto& p : params) {
        at::Tensor& g = p.mutable_grad();
        if (!g.defined()) g = at::zeros_like(p);
        grads.push_back(g);
        last_averaged_ += g.numel();
      }
      runtime_->all_reduce_mean(device_, grads, world_size());
    } else {
      last_averaged_ = average_gradients_on_host(params, world_size(), [this](at::Tensor& buffer) {
        buffer.copy_(DDPStrategy::all_reduce(buffer, ReduceOp::kSum));
      });
    }
  }
  const bool stepped = Strategy::optimizer_step(optimizer, before_step);
  mark_step();
  return stepped;
}

double XLAStrategy::scalar_to_host(const at::Tensor& value) {
  if (on_device(value)) mark_step();
  return value.item<double>();
}

at::Tensor XLAStrategy::predict_step(Module& module, Batch& batch, StepContext& ctx) {
  at::Tensor out = Strategy::predict_step(module, batch, ctx);
  if (!on_device(out)) return out;
  mark_step();
  return out.to(c10::kCPU);
}

void XLAStrategy::save_checkpoint(const Checkpoint& checkpoint, const std::string& path) {
  mark_step();
  DDPStrategy::save_checkpoint(detail::checkpoint_on_host(checkpoint), path);  // rank 0 writes, all wait
}

std::string XLAStrategy::save_optimizer_state(torch::optim::Optimizer& optimizer) {
  mark_step();
  return detail::optimizer_state_via_host(optimizer, device_,
                                          [&] { return DDPStrategy::save_optimizer_state(optimizer); });
}

void XLAStrategy::load_optimizer_state(torch::optim::Optimizer& optimizer, const std::string& bytes) {
  DDPStrategy::load_optimizer_state(optimizer, bytes);
  move_optimizer_state(optimizer, device_);
}

void XLAStrategy::broadcast(std::vector<at::Tensor>& tensors, int64_t src) {
  if (world_size() == 1 || tensors.empty()) return;
  const bool any_on_device = std::any_of(tensors.begin(), tensors.end(), [this](const at::Tensor& t) {
    return on_device(t);
  });
  if (!any_on_device) {
    DDPStrategy::broadcast(tensors, src);
    return;
  }
  mark_step();
  std::vector<at::Tensor> host;
  host.reserve(tensors.size());
  for (const auto& t : tensors) host.push_back(t.detach().to(c10::kCPU).contiguous());
  DDPStrategy::broadcast(host, src);
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (on_device(tensors[i])) {
      tensors[i].detach().copy_(host[i].to(device_));  // (not copy_ from the CPU: see load_state_dict_strict)
    } else if (!host[i].is_same(tensors[i])) {
      tensors[i].detach().copy_(host[i]);  // a CPU tensor that needed a contiguous copy
    }
  }
  mark_step();
}

std::vector<at::Tensor> XLAStrategy::all_gather(const at::Tensor& tensor) {
  if (!on_device(tensor)) return DDPStrategy::all_gather(tensor);
  mark_step();
  std::vector<at::Tensor> out = DDPStrategy::all_gather(tensor.detach().to(c10::kCPU));
  for (auto& t : out) t = t.to(device_);
  return out;
}

at::Tensor XLAStrategy::all_reduce(const at::Tensor& tensor, ReduceOp op) {
  if (!on_device(tensor)) return DDPStrategy::all_reduce(tensor, op);
  mark_step();
  return DDPStrategy::all_reduce(tensor.detach().to(c10::kCPU), op).to(device_);
}

std::shared_ptr<Strategy> make_xla_strategy(const StrategyParts& parts) {
  return std::make_shared<XLAStrategy>(parts, parts.ddp);
}

}  // namespace volt::strategies
