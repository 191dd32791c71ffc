#pragma once
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/pimpl.h>

namespace volt {

/// What a sharding strategy does around the forward of a module the user wrapped with volt::Sharded:
/// gathers the unit's parameters just before it and frees them after it (strategy="fsdp" sets these at
/// setup and removes them at teardown; without a strategy that shards, a wrapped module runs as itself).
class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  /// Before the unit's forward: its whole parameters are in place when this returns.
  virtual void before_forward(size_t unit) = 0;
  /// After it, with the tensors the forward returned (a tensor, or the tensors of a tuple, pair or
  /// vector of them; none for other types): the strategy may free the whole parameters and re-gather
  /// them from a hook that runs before the backward of these outputs.
  virtual void after_forward(size_t unit, const std::vector<at::Tensor>& outputs) = 0;
};

/// The part of a wrapped module that does not depend on its class: where the strategy's hooks are.
class ShardedUnitBase {
 public:
  virtual ~ShardedUnitBase() = default;
  /// Set by the strategy (setup), cleared with nullptr (teardown).
  void attach_unit_hooks(UnitHooks* hooks, size_t unit) {
    hooks_ = hooks;
    unit_ = unit;
  }
  bool has_unit_hooks() const { return hooks_ != nullptr; }

 protected:
  static void collect(const at::Tensor& t, std::vector<at::Tensor>& out) { out.push_back(t); }
  template <typename T>
  static void collect(const std::vector<T>& v, std::vector<at::Tensor>& out) {
    for (const auto& x : v) collect(x, out);
  }
  template <typename A, typename B>
  static void collect(const std::pair<A, B>& p, std::vector<at::Tensor>& out) {
    collect(p.first, out);
    collect(p.second, out);
  }
  template <typename... T>
  static void collect(const std::tuple<T...>& t, std::vector<at::Tensor>& out) {
    std::apply([&out](const auto&... x) { (collect(x, out), ...); }, t);
  }
  /// Any other result: no tensor is seen, and the strategy keeps the unit's parameters whole.
  template <typename T>
  static void collect(const T&, std::vector<at::Tensor>&) {}

  UnitHooks* hooks_ = nullptr;
  size_t unit_ = 0;
};

/// A module made a unit of fully sharded training (PyTorch's FSDP wrap(), Lightning's manual wrapping
/// in configure_model): under strategy="fsdp" with FULL_SHARD its parameters are all-gathered just
/// before its forward, freed after it, gathered again just before its backward and freed after that,
/// so a rank holds whole parameters of about one or two units at a time. `Impl` is the module class
/// (torch::nn::TransformerEncoderLayerImpl, or your own); its constructors, parameters and names stay
/// the same, so checkpoints are the same with or without the wrapper. Under any other strategy the
/// wrapper does nothing.
///   volt::Sharded<torch::nn::TransformerEncoderLayerImpl> block{nullptr};
///   block = register_module("block0", volt::Sharded<torch::nn::TransformerEncoderLayerImpl>(options));
///   x = block(x);
/// The unit's results must reach the loss through what its forward returns (a tensor, or tuples,
/// pairs and vectors of them); an intermediate tensor kept aside and used in the loss would be
/// computed backward before the re-gather (as with PyTorch's FSDP).
template <typename Impl>
class ShardedImpl : public Impl, public ShardedUnitBase {
 public:
  using Impl::Impl;

  template <typename... Args>
  decltype(auto) forward(Args&&... args) {
    if (hooks_ == nullptr) return Impl::forward(std::forward<Args>(args)...);
    hooks_->before_forward(unit_);
    decltype(auto) out = Impl::forward(std::forward<Args>(args)...);
    std::vector<at::Tensor> tensors;
    collect(out, tensors);
    hooks_->after_forward(unit_, tensors);
    return out;
  }
};

/// The holder of a ShardedImpl, used like torch::nn::Linear (ModuleHolder's own call operator cannot see a
/// template forward, so this one calls it).
template <typename Impl>
class Sharded : public torch::nn::ModuleHolder<ShardedImpl<Impl>> {
 public:
  using Base = torch::nn::ModuleHolder<ShardedImpl<Impl>>;
  using Base::Base;
  /// What register_module returns.
  Sharded(const Base& other) : Base(other) {}  // NOLINT(google-explicit-constructor)

  template <typename... Args>
  decltype(auto) operator()(Args&&... args) {
    return this->get()->forward(std::forward<Args>(args)...);
  }
};

}  // namespace volt
