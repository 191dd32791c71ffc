#pragma once
#include <optional>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

namespace torch::nn {
class Module;
}
namespace torch::optim {
class Optimizer;
}

namespace volt {

/// Re-creates every parameter and buffer of `module` and its submodules on `device`,
/// with the same values, dtypes and requires_grad. Made for lazy-tensor devices (TPU,
/// `lazy:0`), where torch::nn::Module::to(device) throws because a parameter cannot
/// change its tensor type in place: the registered tensors are replaced instead, and the
/// member handles of the standard layers (Linear, Bilinear, Conv*/ConvTranspose*,
/// BatchNorm*, InstanceNorm*, LayerNorm, GroupNorm, Embedding, PReLU) are pointed at the
/// new ones. Call it before any optimizer holds the parameters.
/// A module of another type that owns tensors not already on `device` is refused with
/// NotSupportedError (its own members would keep the old tensors): create those tensors
/// on the device in Module::configure_model instead. Tensors already on `device` are kept,
/// so calling it again is a no-op.
/// `floating_dtype`: also give every floating-point tensor this dtype, re-creating those
/// already on the device too. On lazy-tensor devices this is the way to change a
/// parameter's dtype: Module::to(dtype) there changes the tensor's metadata but not its
/// data (measured on LibTorch 1.13's TorchScript lazy backend).
void place_on_device(torch::nn::Module& module, const c10::Device& device,
                     std::optional<c10::ScalarType> floating_dtype = std::nullopt);

/// `layer` (a torch::nn module holder such as torch::nn::Linear) with its tensors
/// re-created on `device`: fc_ = register_module("fc", volt::on_device(torch::nn::Linear(784, 10), device()));
template <typename Holder>
Holder on_device(Holder layer, const c10::Device& device) {
  place_on_device(*layer, device);
  return layer;
}

/// Moves the state of torch::optim's Adam, AdamW, SGD, RMSprop and Adagrad to `device`
/// (e.g. to the CPU to write a checkpoint, and back). NotSupportedError for other
/// optimizers that hold state.
void move_optimizer_state(torch::optim::Optimizer& optimizer, const c10::Device& device);

}  // namespace volt
