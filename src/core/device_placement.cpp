#include "volt/core/device_placement.h"

#include <functional>
#include <string>

#include <torch/nn/functional/instancenorm.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/instancenorm.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include "volt/core/error.h"

namespace volt {
namespace {

using TensorDict = torch::OrderedDict<std::string, at::Tensor>;
using DictMember = TensorDict torch::nn::Module::*;

// torch::nn::Module keeps its registered tensors in members it does not expose by
// reference (buffers_ is private). An explicit instantiation may name private members
// ([temp.explicit]), which is how these two pointers are obtained without patching LibTorch.
DictMember parameters_member();
DictMember buffers_member();
template <DictMember P, DictMember B>
struct ModuleDicts {
  friend DictMember parameters_member() { return P; }
  friend DictMember buffers_member() { return B; }
};
template struct ModuleDicts<&torch::nn::Module::parameters_, &torch::nn::Module::buffers_>;

at::Tensor entry(TensorDict& dict, const char* name) {
  const at::Tensor* t = dict.find(name);
  return t == nullptr ? at::Tensor() : *t;
}

template <typename Impl>
bool repoint_weight_bias(torch::nn::Module& m, TensorDict& params) {
  auto* layer = dynamic_cast<Impl*>(&m);
  if (layer == nullptr) return false;
  layer->weight = entry(params, "weight");
  layer->bias = entry(params, "bias");
  return true;
}

template <typename Impl>
bool repoint_norm(torch::nn::Module& m, TensorDict& params, TensorDict& buffers) {
  auto* layer = dynamic_cast<Impl*>(&m);
  if (layer == nullptr) return false;
  layer->weight = entry(params, "weight");
  layer->bias = entry(params, "bias");
  layer->running_mean = entry(buffers, "running_mean");
  layer->running_var = entry(buffers, "running_var");
  layer->num_batches_tracked = entry(buffers, "num_batches_tracked");
  return true;
}

/// Points a standard layer's member handles at its registered tensors; false for types
/// Volt does not know.
bool repoint_members(torch::nn::Module& m, TensorDict& params, TensorDict& buffers) {
  namespace nn = torch::nn;
  if (repoint_weight_bias<nn::LinearImpl>(m, params) || repoint_weight_bias<nn::BilinearImpl>(m, params) ||
      repoint_weight_bias<nn::Conv1dImpl>(m, params) || repoint_weight_bias<nn::Conv2dImpl>(m, params) ||
      repoint_weight_bias<nn::Conv3dImpl>(m, params) || repoint_weight_bias<nn::ConvTranspose1dImpl>(m, params) ||
      repoint_weight_bias<nn::ConvTranspose2dImpl>(m, params) ||
      repoint_weight_bias<nn::ConvTranspose3dImpl>(m, params) || repoint_weight_bias<nn::LayerNormImpl>(m, params) ||
      repoint_weight_bias<nn::GroupNormImpl>(m, params)) {
    return true;
  }
  if (repoint_norm<nn::BatchNorm1dImpl>(m, params, buffers) || repoint_norm<nn::BatchNorm2dImpl>(m, params, buffers) ||
      repoint_norm<nn::BatchNorm3dImpl>(m, params, buffers) ||
      repoint_norm<nn::InstanceNorm1dImpl>(m, params, buffers) ||
      repoint_norm<nn::InstanceNorm2dImpl>(m, params, buffers) ||
      repoint_norm<nn::InstanceNorm3dImpl>(m, params, buffers)) {
    return true;
  }
  if (auto* e = dynamic_cast<nn::EmbeddingImpl*>(&m)) {
    e->weight = entry(params, "weight");
    return true;
  }
  if (auto* p = dynamic_cast<nn::PReLUImpl*>(&m)) {
    p->weight = entry(params, "weight");
    return true;
  }
  return false;
}

bool needs_new(const at::Tensor& t, const c10::Device& device, std::optional<c10::ScalarType> dtype) {
  if (!t.defined()) return false;
  return t.device() != device || (dtype && t.is_floating_point() && t.scalar_type() != *dtype);
}

at::Tensor recreate(const at::Tensor& t, const c10::Device& device, std::optional<c10::ScalarType> dtype) {
  return t.detach().to(device, dtype && t.is_floating_point() ? *dtype : t.scalar_type());
}

void place_one(torch::nn::Module& m, const c10::Device& device, std::optional<c10::ScalarType> dtype) {
  TensorDict& params = m.*parameters_member();
  TensorDict& buffers = m.*buffers_member();
  std::string to_recreate;
  for (TensorDict* dict : {&params, &buffers}) {
    for (const auto& item : *dict) {
      if (needs_new(item.value(), device, dtype)) {
        to_recreate += (to_recreate.empty() ? "" : ", ") + item.key() + " (" + item.value().device().str() + ", " +
                       c10::toString(item.value().scalar_type()) + ")";
      }
    }
  }
  if (to_recreate.empty()) return;
  // Decide before changing anything, so a refused module is left as it was.
  TensorDict probe_params = params, probe_buffers = buffers;
  if (!repoint_members(m, probe_params, probe_buffers)) {
    throw NotSupportedError(
        "cannot re-create the tensors of " + m.name() + " on " + device.str() + ": " + to_recreate +
        " would have to change, and Volt only knows where the standard torch::nn layers keep theirs (Linear, "
        "Bilinear, Conv, ConvTranspose, BatchNorm, InstanceNorm, LayerNorm, GroupNorm, Embedding, PReLU). Create "
        "this module's tensors in configure_model on the module's device(), e.g. register_parameter(\"w\", "
        "torch::randn({4, 4}).to(device())).");
  }
  for (auto& item : params) {
    const at::Tensor old = item.value();
    if (!needs_new(old, device, dtype)) continue;
    at::Tensor fresh = recreate(old, device, dtype);
    fresh.set_requires_grad(old.requires_grad());
    item.value() = fresh;
  }
  for (auto& item : buffers) {
    if (needs_new(item.value(), device, dtype)) item.value() = recreate(item.value(), device, dtype);
  }
  repoint_members(m, params, buffers);
}

template <typename State>
bool move_if(torch::optim::OptimizerParamState& s, const std::function<void(State&)>& f) {
  auto* state = dynamic_cast<State*>(&s);
  if (state == nullptr) return false;
  f(*state);
  return true;
}

}  // namespace

void place_on_device(torch::nn::Module& module, const c10::Device& device,
                     std::optional<c10::ScalarType> floating_dtype) {
  place_one(module, device, floating_dtype);
  for (const auto& child : module.modules(/*include_self=*/false)) place_one(*child, device, floating_dtype);
}

void move_optimizer_state(torch::optim::Optimizer& optimizer, const c10::Device& device) {
  namespace optim = torch::optim;
  auto to = [&](const at::Tensor& t) { return t.defined() ? t.to(device) : t; };
  for (auto& [key, state] : optimizer.state()) {
    if (!state) continue;
    auto& s = *state;
    const bool known = move_if<optim::AdamParamState>(s,
                                                      [&](auto& a) {
                                                        a.exp_avg(to(a.exp_avg()));
                                                        a.exp_avg_sq(to(a.exp_avg_sq()));
                                                        a.max_exp_avg_sq(to(a.max_exp_avg_sq()));
                                                      }) ||
                       move_if<optim::AdamWParamState>(s,
                                                       [&](auto& a) {
                                                         a.exp_avg(to(a.exp_avg()));
                                                         a.exp_avg_sq(to(a.exp_avg_sq()));
                                                         a.max_exp_avg_sq(to(a.max_exp_avg_sq()));
                                                       }) ||
                       move_if<optim::SGDParamState>(s, [&](auto& a) { a.momentum_buffer(to(a.momentum_buffer())); }) ||
                       move_if<optim::RMSpropParamState>(s,
                                                         [&](auto& a) {
                                                           a.square_avg(to(a.square_avg()));
                                                           a.momentum_buffer(to(a.momentum_buffer()));
                                                           a.grad_avg(to(a.grad_avg()));
                                                         }) ||
                       move_if<optim::AdagradParamState>(s, [&](auto& a) { a.sum(to(a.sum())); });
    if (!known) {
      throw NotSupportedError("cannot move the state of this optimizer to " + device.str() +
                              ": Volt moves the state of Adam, AdamW, SGD, RMSprop and Adagrad. Use one of those on "
                              "a lazy-tensor device, or write checkpoints without optimizer state "
                              "(ModelCheckpoint save_weights_only).");
    }
  }
}

}  // namespace volt
