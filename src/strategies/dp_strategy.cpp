#include "volt/strategies/dp_strategy.h"

#ifdef VOLT_WITH_CUDA

#include <c10/cuda/CUDAGuard.h>
#include <torch/csrc/cuda/comm.h>
#include <torch/nn/parallel/data_parallel.h>

#include <ATen/ops/stack.h>

#include "volt/core/error.h"
#include "volt/strategies/strategy_registry.h"

namespace volt::strategies {

namespace {

/// The first line of a LibTorch error, without its C++ backtrace.
std::string first_line(const std::exception& e) {
  const auto* c10 = dynamic_cast<const c10::Error*>(&e);
  std::string text = c10 != nullptr ? c10->what_without_backtrace() : e.what();
  const auto end = text.find('\n');
  return end == std::string::npos ? text : text.substr(0, end);
}

/// A copy of `module` on `device` whose parameters are leaves of their own, or a ConfigError
/// naming the module.
std::shared_ptr<Module> copy_of(const Module& module, const c10::Device& device, size_t gpus) {
  std::shared_ptr<torch::nn::Module> copy;
  try {
    copy = module.clone(device);
  } catch (const std::exception& e) {
    throw ConfigError("strategy=\"dp\" with " + std::to_string(gpus) +
                      " GPUs copies the module to every GPU at each training step with "
                      "torch::nn::Module::clone(device), and " +
                      module.name() + " has none (" + first_line(e) +
                      "). Override clone() in the module (a new module of the same class with copies of its "
                      "submodules, parameters and buffers on the device, as torch::nn::Cloneable makes), "
                      "use devices=1, or use strategy=\"ddp\".");
  }
  auto volt_copy = std::dynamic_pointer_cast<Module>(copy);
  if (!volt_copy) {
    throw ConfigError("strategy=\"dp\": " + module.name() + "::clone(device) returned " +
                      (copy ? "a " + copy->name() + ", which is not a volt::Module" : std::string("nullptr")) +
                      "; it must return a copy of the module itself.");
  }
  return volt_copy;
}

}  // namespace

DataParallelStrategy::DataParallelStrategy(std::vector<c10::Device> devices,
                                           std::shared_ptr<accelerators::Accelerator> accelerator,
                                           std::shared_ptr<precision::Precision> precision,
                                           std::shared_ptr<environments::ClusterEnvironment> environment,
                                           std::shared_ptr<checkpoint_io::CheckpointIO> checkpoint_io)
    : Strategy(std::move(accelerator), std::move(precision), std::move(environment), std::move(checkpoint_io)),
      devices_(std::move(devices)) {
  if (devices_.empty()) throw ConfigError("strategy=\"dp\" needs at least one CUDA device; none was given.");
  for (const auto& d : devices_) {
    if (!d.is_cuda()) {
      throw ConfigError("strategy=\"dp\" drives CUDA devices from one process, but " + d.str() +
                        " was given. Use accelerator=\"cuda\", or strategy=\"ddp\" on CPU.");
    }
  }
}

void DataParallelStrategy::setup(Module& module) {
  Strategy::setup(module);
  if (devices_.size() > 1) (void)copy_of(module, devices_[1], devices_.size());
}

at::Tensor DataParallelStrategy::training_step(Module& module, Batch& batch, StepContext& ctx) {
  if (devices_.size() == 1) return Strategy::training_step(module, batch, ctx);

  // The shard sizes of torch.chunk (ceil(rows / gpus) each, fewer shards for a small batch), the
  // same for every tensor, so that shard i holds the same rows of each.
  int64_t rows = -1;
  for (size_t i = 0; i < batch.size(); ++i) {
    const at::Tensor& t = batch[i];
    if (!t.defined() || t.dim() == 0) continue;
    if (rows < 0) {
      rows = t.size(0);
    } else if (t.size(0) != rows) {
      throw ConfigError("strategy=\"dp\" splits every tensor of a batch along its first dimension, but batch[" +
                        std::to_string(i) + "] has " + std::to_string(t.size(0)) + " rows and an earlier one " +
                        std::to_string(rows) + ". Give the batch's tensors the same first dimension, or use "
                        "strategy=\"ddp\".");
    }
  }
  if (rows <= 1) return Strategy::training_step(module, batch, ctx);
  const auto gpus = static_cast<int64_t>(devices_.size());
  const int64_t per_shard = (rows + gpus - 1) / gpus;
  std::vector<int64_t> sizes;
  for (int64_t left = rows; left > 0; left -= per_shard) sizes.push_back(std::min(per_shard, left));
  const size_t shards = sizes.size();
  std::vector<c10::Device> used(devices_.begin(), devices_.begin() + static_cast<std::ptrdiff_t>(shards));
  std::vector<int64_t> ids;
  for (const auto& d : used) ids.push_back(d.index());

  std::vector<Batch> parts(shards, Batch(batch.size()));
  for (size_t j = 0; j < batch.size(); ++j) {
    const at::Tensor& t = batch[j];
    if (!t.defined()) continue;
    if (t.dim() == 0) {
      for (size_t i = 0; i < shards; ++i) parts[i][j] = t.to(used[i], /*non_blocking=*/true);
      continue;
    }
    std::vector<at::Tensor> pieces = torch::cuda::scatter(t, ids, sizes, /*dim=*/0);
    for (size_t i = 0; i < shards; ++i) parts[i][j] = std::move(pieces[i]);
  }

  // Copies for the other GPUs, their parameters' gradients summed into the module's own.
  std::vector<std::shared_ptr<Module>> copies;
  for (size_t i = 1; i < shards; ++i) {
    auto copy = copy_of(module, used[i], devices_.size());
    copy->train(module.is_training());
    copy->set_device(used[i]);
    copies.push_back(std::move(copy));
  }
  const std::shared_ptr<torch::nn::Module> root(std::shared_ptr<torch::nn::Module>(), &module);  // not owned
  const std::vector<c10::Device> copy_devices(used.begin() + 1, used.end());
  torch::nn::replicate_grad_edges(root, copies, copy_devices);

  // One host thread launches every shard's step; the GPUs run their kernels concurrently.
  std::vector<at::Tensor> losses;
  {
    auto scope = precision_->forward_context();
    for (size_t i = 0; i < shards; ++i) {
      const c10::cuda::CUDAGuard guard(used[i]);
      Module& m = i == 0 ? module : *copies[i - 1];
      losses.push_back(m.training_step(parts[i], ctx));
    }
  }
  size_t undefined = 0;
  for (const auto& l : losses) undefined += l.defined() ? 0 : 1;
  if (undefined == shards) return at::Tensor();
  if (undefined != 0) {
    throw ConfigError("strategy=\"dp\": training_step returned a loss for some shards of the batch and none for " +
                      std::to_string(undefined) + " of " + std::to_string(shards) +
                      "; return a loss for every batch (or none for all, to skip the step).");
  }
  for (auto& l : losses) {
    if (l.numel() != 1) {
      throw ConfigError("strategy=\"dp\" averages the losses of the GPUs, but training_step returned a tensor of " +
                        std::to_string(l.numel()) + " elements; return a one-element loss.");
    }
    l = l.to(devices_.front()).reshape({});
  }
  return at::stack(losses).mean();
}

std::shared_ptr<Strategy> make_dp_strategy(const StrategyParts& parts) {
  return std::make_shared<DataParallelStrategy>(parts.parallel_devices, parts.accelerator, parts.precision,
                                                parts.environment, parts.checkpoint_io);
}

}  // namespace volt::strategies

#endif  // VOLT_WITH_CUDA
