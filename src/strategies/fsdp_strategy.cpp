#include "volt/strategies/fsdp_strategy.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/optim/lbfgs.h>
#include <torch/optim/optimizer.h>

#include "strategies/detail/ddp_impl.h"
#include "volt/checkpoint_io/async_checkpoint_io.h"
#include "volt/checkpoint_io/sharded_checkpoint.h"
#include "volt/core/error.h"

namespace volt::strategies {
namespace {

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(s);
  while (std::getline(in, item, ',')) out.push_back(item);
  if (!s.empty() && s.back() == ',') out.emplace_back();
  return out;
}

/// "torch::nn::LinearImpl" -> "Linear"; "(anonymous namespace)::Block" -> "Block".
std::string short_class_name(const std::string& name) {
  std::string s = name;
  const auto colon = s.rfind("::");
  if (colon != std::string::npos) s = s.substr(colon + 2);
  if (s.size() > 4 && s.compare(s.size() - 4, 4, "Impl") == 0) s.resize(s.size() - 4);
  return s;
}

std::string shape_text(at::IntArrayRef sizes) {
  std::ostringstream s;
  s << sizes;
  return s.str();
}

/// Gloo moves no bfloat16: the same bits as float16 (all-gathers and all-to-alls only move bits).
at::Tensor movable(const at::Tensor& t) {
  return t.scalar_type() == at::kBFloat16 ? t.view(at::kHalf) : t;
}

}  // namespace

ShardingStrategy parse_sharding_strategy(const std::string& name, const std::string& flag) {
  const std::string u = upper(name);
  if (u == "FULL_SHARD") return ShardingStrategy::kFullShard;
  if (u == "SHARD_GRAD_OP") return ShardingStrategy::kShardGradOp;
  if (u == "NO_SHARD") return ShardingStrategy::kNoShard;
  throw ConfigError(flag + "='" + name +
                    "' is not known. Use FULL_SHARD (parameters, gradients and optimizer state sharded), "
                    "SHARD_GRAD_OP (gradients and optimizer state sharded) or NO_SHARD (as ddp).");
}

const char* to_string(ShardingStrategy s) {
  switch (s) {
    case ShardingStrategy::kShardGradOp: return "SHARD_GRAD_OP";
    case ShardingStrategy::kNoShard: return "NO_SHARD";
    default: return "FULL_SHARD";
  }
}

void check_cpu_offload(const FSDPOptions& options) {
  if (!options.cpu_offload || options.sharding_strategy != ShardingStrategy::kNoShard) return;
  throw ConfigError("fsdp.cpu_offload=true keeps the parameter pieces in host memory, but "
                    "fsdp.sharding_strategy=NO_SHARD makes no pieces (it is ddp). Use FULL_SHARD or SHARD_GRAD_OP "
                    "with cpu_offload, or cpu_offload=false.");
}

void check_auto_wrap_policy(const std::string& policy, const std::string& flag) {
  if (policy.empty()) return;
  const std::string fix = " Use size:N (a submodule of at least N parameter elements is a unit, e.g. size:100000), "
                          "class:A,B (submodules of those classes, e.g. class:Linear), or leave it empty (the "
                          "whole module is one unit).";
  if (policy.rfind("size:", 0) == 0) {
    const std::string n = policy.substr(5);
    if (n.empty() || n.size() > 18 || n.find_first_not_of("0123456789") != std::string::npos || std::stoll(n) < 1) {
      throw ConfigError(flag + "='" + policy + "': '" + n + "' is not a whole number of at least 1." + fix);
    }
    return;
  }
  if (policy.rfind("class:", 0) == 0) {
    const auto classes = split_commas(policy.substr(6));
    if (classes.empty()) throw ConfigError(flag + "='" + policy + "' names no class." + fix);
    for (const auto& c : classes) {
      if (c.empty() || c.find_first_of(" \t") != std::string::npos) {
        throw ConfigError(flag + "='" + policy + "' has an empty or blank class name." + fix);
      }
    }
    return;
  }
  throw ConfigError(flag + "='" + policy + "' is not a wrap policy." + fix);
}
struct FSDPStrategy::StateParam {
  std::string name;
  at::Tensor param;  ///< the module's Parameter (the same object throughout)
  std::vector<int64_t> shape;
  int64_t numel = 0;
  int64_t shard = 0;  ///< ceil(numel / world size)
  size_t unit = 0;    ///< index of its unit
  /// The whole parameter, zero-padded to shard * world size elements: while gathered, and between
  /// steps under SHARD_GRAD_OP (the shard is then a view into it). For a unit the user wrapped
  /// (volt::Sharded) under FULL_SHARD it stays between gathers with its storage released (0 bytes):
  /// the autograd graph of a forward keeps views of it, and the re-gather before the backward refills
  /// that same storage.
  at::Tensor whole;
  /// cpu_offload: the host-memory piece the parameter held before its gather, given back (with the
  /// optimizer's updates in it) when the unit is cut to pieces again.
  at::Tensor piece;
  /// A shard-shaped gradient the gather put aside (LibTorch 1.13's zero_grad keeps zeroed
  /// gradients); added to the shard gradient of the next reduce-scatter.
  at::Tensor kept_grad;
};

struct FSDPStrategy::State {
  using Param = StateParam;
  struct Unit {
    std::string name;
    std::vector<size_t> members;
    std::vector<int64_t> offsets;  ///< of each member's shard in the unit's per-rank buffer
    int64_t total = 0;             ///< elements of one rank's buffer (the sum of the members' shards)
    at::ScalarType dtype = at::kFloat;
    bool whole = true;   ///< the members hold their whole parameters (else their pieces)
    int64_t group = -1;  ///< the wrapped module (index in `groups`) it belongs to, or -1
  };
  /// A module the user wrapped (volt::Sharded): its units are gathered by its own forward.
  struct Group {
    std::shared_ptr<torch::nn::Module> module;  ///< held, so that its hooks can be removed safely
    ShardedUnitBase* sharded = nullptr;
    std::vector<size_t> units;
  };
  std::vector<Param> params;
  std::vector<Unit> units;
  std::vector<Group> groups;
  std::unordered_map<const c10::TensorImpl*, size_t> by_impl;
  /// For each optimizer, the index in `params` of its p-th parameter (over its groups), or -1.
  std::vector<std::vector<int64_t>> optimizer_params;
  bool in_step = false;  ///< a step's gather ran and its re-shard has not yet
  bool failed = false;

  bool all_whole() const {
    return std::all_of(units.begin(), units.end(), [](const Unit& u) { return u.whole; });
  }

  // All-gathers in flight (pipelined at a step's start; a wrapped module's prefetch).
  std::vector<std::vector<at::Tensor>> gather_out;
  std::vector<c10::intrusive_ptr<c10d::Work>> gather_works;
  int64_t prefetching = -1;            ///< the group whose all-gather is on its way, or -1
  std::vector<size_t> forward_order;   ///< groups in the order their forward ran, this step
  std::vector<size_t> last_forward_order;
  UnitCounts counts;
  int64_t whole_elements = 0;
  std::shared_ptr<char> alive = std::make_shared<char>(0);  ///< a backward hook outliving this state does nothing

  // The reduce-scatter of a unit starts as soon as all its members' gradients are accumulated in
  // the backward (a post hook on each parameter's gradient accumulator), overlapping the backward of
  // the units before it; after the backward the units left (members without a gradient) follow.
  std::vector<size_t> unit_of;  ///< params index -> its unit
  std::vector<size_t> ready;    ///< per unit: members accumulated in this backward
  std::vector<char> started;    ///< per unit: its reduce-scatter was started in this backward
  std::vector<size_t> in_flight;  ///< units whose all-to-all is on its way, oldest first
  std::vector<at::Tensor> received, summed;
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  bool armed = false;  ///< inside a synchronising backward of this strategy
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;  ///< held: their hooks stay
  std::vector<uintptr_t> hook_keys;
  int64_t started_in_backward = 0;
};

/// What a wrapped module's forward calls (volt/core/sharded_unit.h), passed on to the strategy.
class FSDPStrategy::WrappedUnitHooks final : public UnitHooks {
 public:
  explicit WrappedUnitHooks(FSDPStrategy& s) : s_(s) {}
  void before_forward(size_t group) override { s_.before_unit_forward(group); }
  void after_forward(size_t group, const std::vector<at::Tensor>& outputs) override {
    s_.after_unit_forward(group, outputs);
  }

 private:
  FSDPStrategy& s_;
};

namespace {
/// Calls FSDPStrategy's hook once the accumulator of parameter `index` has added this backward's
/// gradient (the post hooks of an AccumulateGrad node run after it).
class GradReadyHook final : public torch::autograd::FunctionPostHook {
 public:
  GradReadyHook(std::function<void(size_t)> ready, size_t index) : ready_(std::move(ready)), index_(index) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    ready_(index_);
    return outputs;
  }

 private:
  std::function<void(size_t)> ready_;
  size_t index_;
};

/// Frees the memory of `t`'s storage and keeps the storage object (and every view of it: the ones an
/// autograd graph saved) for refill_storage.
void release_storage(const at::Tensor& t) {
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  if (s->nbytes() == 0 || s->allocator() == nullptr) return;
  s->set_data_ptr_noswap(s->allocator()->allocate(0));
  s->set_nbytes(0);
}

/// Gives the storage of `t` (a contiguous tensor from its start) room for `t` again; the contents are
/// whatever the allocator returns, to be overwritten.
void refill_storage(const at::Tensor& t) {
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  const size_t bytes = static_cast<size_t>(t.storage_offset() + t.numel()) * t.element_size();
  if (s->nbytes() >= bytes) return;
  s->set_data_ptr_noswap(s->allocator()->allocate(bytes));
  s->set_nbytes(bytes);
}
}  // namespace

at::Tensor FSDPStrategy::own_piece(const at::Tensor& view) const {
  if (fsdp_.cpu_offload) return to_host(view);
  // SHARD_GRAD_OP keeps the whole buffer: the piece stays a view into it. FULL_SHARD frees it: a copy.
  return fsdp_.sharding_strategy == ShardingStrategy::kShardGradOp ? view : view.clone();
}

at::Tensor FSDPStrategy::to_host(const at::Tensor& t) const {
  // Its own host buffer, also when the compute device is the CPU (so that the offloaded piece is never a
  // view of a gathered buffer); page-locked next to a GPU, for its copies to and from the device.
  at::TensorOptions options = t.options().device(at::kCPU);
  if (t.is_cuda()) options = options.pinned_memory(true);
  at::Tensor host = at::empty(t.sizes(), options);
  host.copy_(t);
  return host;
}

namespace {
/// Lightning's FSDPStrategy takes no communication hook (the accelerator connector warns about the flag).
DDPOptions without_comm_hook(DDPOptions ddp) {
  ddp.comm_hook.clear();
  ddp.comm_hook_object.reset();
  return ddp;
}
}  // namespace

FSDPStrategy::FSDPStrategy(const StrategyParts& parts, FSDPOptions options)
    : DDPStrategy(parts, without_comm_hook(parts.ddp)),
      fsdp_(std::move(options)),
      state_(std::make_unique<State>()),
      unit_hooks_(std::make_unique<WrappedUnitHooks>(*this)) {
  check_auto_wrap_policy(fsdp_.auto_wrap_policy);
}

FSDPStrategy::FSDPStrategy(FSDPOptions options, DDPOptions ddp)
    : DDPStrategy(without_comm_hook(std::move(ddp)), strategy_spec("fsdp")),
      fsdp_(std::move(options)),
      state_(std::make_unique<State>()),
      unit_hooks_(std::make_unique<WrappedUnitHooks>(*this)) {
  check_auto_wrap_policy(fsdp_.auto_wrap_policy);
  check_cpu_offload(fsdp_);
}

FSDPStrategy::~FSDPStrategy() {
  // A gradient accumulator can outlive this strategy (a graph the user kept): its hook must not call back.
  if (state_) {
    remove_gradient_hooks();
    detach_wrapped_modules();
  }
}

std::vector<FSDPStrategy::UnitPlan> FSDPStrategy::plan_units(const Module& module, const std::string& policy) {
  std::vector<std::string> order;
  std::unordered_map<std::string, int64_t> numel;
  for (const auto& item : module.named_parameters(true)) {
    if (!item.value().requires_grad()) continue;
    order.push_back(item.key());
    numel[item.key()] = item.value().numel();
  }
  std::set<std::string> assigned;
  std::vector<UnitPlan> units;
  int64_t min_size = 0;
  std::vector<std::string> classes;
  if (policy.rfind("size:", 0) == 0) min_size = std::stoll(policy.substr(5));
  if (policy.rfind("class:", 0) == 0) classes = split_commas(policy.substr(6));
  // Post-order: the innermost submodule that qualifies takes its parameters first. A module the user
  // wrapped (volt::Sharded) is a unit whatever the policy.
  std::function<void(const torch::nn::Module&, const std::string&)> visit = [&](const torch::nn::Module& m,
                                                                                 const std::string& prefix) {
    for (const auto& child : m.named_children()) visit(*child.value(), prefix + child.key() + ".");
    if (prefix.empty()) return;
    const auto* sharded = dynamic_cast<const ShardedUnitBase*>(&m);
    if (policy.empty() && sharded == nullptr) return;
    std::vector<std::string> mine;
    int64_t size = 0;
    for (const auto& item : m.named_parameters(true)) {
      const std::string name = prefix + item.key();
      if (numel.count(name) == 0 || assigned.count(name) != 0) continue;
      mine.push_back(name);
      size += numel[name];
    }
    bool wrap = sharded != nullptr;
    if (min_size > 0) wrap = wrap || size >= min_size;
    for (const auto& c : classes) wrap = wrap || c == m.name() || c == short_class_name(m.name());
    if (!wrap || mine.empty()) return;
    for (const auto& n : mine) assigned.insert(n);
    units.push_back({prefix.substr(0, prefix.size() - 1), std::move(mine), sharded != nullptr});
  };
  visit(module, "");
  std::vector<std::string> rest;
  for (const auto& n : order) {
    if (assigned.count(n) == 0) rest.push_back(n);
  }
  if (!rest.empty()) units.push_back({"", std::move(rest), false});
  return units;
}

std::vector<std::pair<std::string, std::vector<std::string>>> FSDPStrategy::wrap_units(const Module& module,
                                                                                      const std::string& policy) {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (auto& u : plan_units(module, policy)) out.emplace_back(std::move(u.name), std::move(u.params));
  return out;
}

void FSDPStrategy::check_module(const Module& module) const {
  if (!sharded_mode()) return;
  // A parameter registered under two names (tied weights) would be cut into pieces twice.
  std::unordered_map<const c10::TensorImpl*, std::string> seen;
  for (const auto& item : module.named_parameters(true)) {
    if (!item.value().requires_grad()) continue;
    const auto [it, fresh] = seen.emplace(item.value().unsafeGetTensorImpl(), item.key());
    if (!fresh) {
      throw NotSupportedError("strategy='fsdp' shards every parameter once, but " + it->second + " and " +
                              item.key() + " of " + module.name() +
                              " are the same tensor (tied weights). Use fsdp.sharding_strategy=NO_SHARD or "
                              "strategy='ddp', or give the two their own parameters.");
    }
  }
  bool any = !seen.empty();
  if (!any || fsdp_.auto_wrap_policy.empty()) return;  // configure_model may build them; setup checks again
  const auto units = plan_units(module, fsdp_.auto_wrap_policy);
  const bool wraps = std::any_of(units.begin(), units.end(), [](const auto& u) { return !u.name.empty(); });
  if (wraps) return;
  std::set<std::string> names;
  int64_t largest = 0;
  for (const auto& item : module.named_modules("", /*include_self=*/false)) {
    names.insert(short_class_name(item.value()->name()));
    int64_t n = 0;
    for (const auto& p : item.value()->parameters(true)) n += p.requires_grad() ? p.numel() : 0;
    largest = std::max(largest, n);
  }
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  throw ConfigError("fsdp.auto_wrap_policy='" + fsdp_.auto_wrap_policy + "' wraps none of the submodules of " +
                    module.name() + " (its submodule classes: " + (list.empty() ? "none" : list) +
                    "; the largest holds " + std::to_string(largest) +
                    " trainable parameter elements). Use a smaller size:N, one of those classes, or an empty "
                    "policy (the whole module as one unit).");
}

void FSDPStrategy::detach_wrapped_modules() {
  for (auto& g : state_->groups) {
    if (g.sharded != nullptr) g.sharded->attach_unit_hooks(nullptr, 0);
  }
}

void FSDPStrategy::setup(Module& module) {
  if (!sharded_mode()) {
    DDPStrategy::setup(module);
    return;
  }
  if (!state_->all_whole()) gather("setup after a stage that failed", /*wrapped_too=*/true);
  detach_wrapped_modules();
  Strategy::setup(module);
  if (precision_->name() == "16-mixed") {
    throw NotSupportedError("strategy='fsdp' with precision='16-mixed': its gradient scaler decides from each "
                            "rank's own gradients, which are different shards under fsdp, so the ranks could "
                            "disagree on skipping a step. Use precision='bf16-mixed' or '32-true', or strategy='ddp'.");
  }
  check_module(module);
  broadcast_module_state(module);
  impl_->reducer.reset();
  impl_->sync = true;

  State fresh;
  const int64_t w = world_size();
  const int64_t r = global_rank();
  std::unordered_map<std::string, at::Tensor> by_name;
  for (const auto& item : module.named_parameters(true)) by_name[item.key()] = item.value();
  std::unordered_map<std::string, std::shared_ptr<torch::nn::Module>> modules;
  for (const auto& item : module.named_modules("", /*include_self=*/false)) modules[item.key()] = item.value();
  for (const auto& plan : plan_units(module, fsdp_.auto_wrap_policy)) {
    int64_t group = -1;
    if (plan.wrapped && fsdp_.sharding_strategy == ShardingStrategy::kFullShard) {
      State::Group g;
      g.module = modules.at(plan.name);
      g.sharded = dynamic_cast<ShardedUnitBase*>(g.module.get());
      group = static_cast<int64_t>(fresh.groups.size());
      fresh.groups.push_back(std::move(g));
    }
    // One unit per dtype: a unit's shards travel in one buffer.
    std::map<at::ScalarType, State::Unit> by_dtype;
    for (const auto& n : plan.params) {
      State::Param p;
      p.name = n;
      p.param = by_name.at(n);
      p.shape = p.param.sizes().vec();
      p.numel = p.param.numel();
      p.shard = (p.numel + w - 1) / w;
      auto& unit = by_dtype[p.param.scalar_type()];
      unit.name = plan.name;
      unit.dtype = p.param.scalar_type();
      unit.group = group;
      unit.offsets.push_back(unit.total);
      unit.total += p.shard;
      unit.members.push_back(fresh.params.size());
      fresh.by_impl[p.param.unsafeGetTensorImpl()] = fresh.params.size();
      fresh.params.push_back(std::move(p));
    }
    for (auto& [dtype, unit] : by_dtype) {
      for (size_t i : unit.members) fresh.params[i].unit = fresh.units.size();
      if (group >= 0) fresh.groups[static_cast<size_t>(group)].units.push_back(fresh.units.size());
      fresh.units.push_back(std::move(unit));
    }
  }
  torch::NoGradGuard no_grad;
  for (auto& p : fresh.params) {
    at::Tensor whole = at::zeros({p.shard * w}, p.param.options());
    whole.narrow(0, 0, p.numel).copy_(p.param.detach().reshape(-1));
    at::Tensor mine = whole.narrow(0, r * p.shard, p.shard);
    if (fsdp_.sharding_strategy == ShardingStrategy::kShardGradOp) p.whole = whole;
    p.param.mutable_grad() = at::Tensor();
    p.param.set_data(own_piece(mine));
  }
  for (auto& u : fresh.units) u.whole = false;
  fresh.counts = state_->counts;
  fresh.started_in_backward = state_->started_in_backward;
  *state_ = std::move(fresh);
  for (size_t g = 0; g < state_->groups.size(); ++g) {
    if (state_->groups[g].sharded != nullptr) state_->groups[g].sharded->attach_unit_hooks(unit_hooks_.get(), g);
  }
}

void FSDPStrategy::setup_optimizers(const std::vector<std::shared_ptr<torch::optim::Optimizer>>& optimizers) {
  state_->optimizer_params.clear();
  for (const auto& opt : optimizers) {
    if (dynamic_cast<const torch::optim::LBFGS*>(opt.get()) != nullptr && sharded_mode()) {
      throw NotSupportedError("strategy='fsdp' cannot step LBFGS: its line search takes dot products over the "
                              "whole parameter vector, and each rank holds only a shard of it. Use another "
                              "optimizer (SGD, Adam, AdamW, RMSprop, Adagrad), fsdp.sharding_strategy=NO_SHARD, or "
                              "strategy='ddp'.");
    }
    std::vector<int64_t> indices;
    for (const auto& group : opt->param_groups()) {
      for (const auto& p : group.params()) {
        auto it = state_->by_impl.find(p.unsafeGetTensorImpl());
        indices.push_back(it == state_->by_impl.end() ? -1 : static_cast<int64_t>(it->second));
      }
    }
    state_->optimizer_params.push_back(std::move(indices));
  }
}

namespace {
const char* const kGatherWhat = "the fsdp all-gather of the parameters";
const char* const kReduceWhat = "the fsdp reduce-scatter of the gradients";
}  // namespace

void FSDPStrategy::guarded(const char* what, const char* why, const std::function<void()>& collective) const {
  try {
    collective();
  } catch (const Error&) {
    throw;  // Volt's own (a rank's failure already worded)
  } catch (const std::exception& e) {
    collective_failed(std::string(what) + (why != nullptr ? std::string(" (") + why + ")" : std::string()), e);
  }
}

void FSDPStrategy::start_gather(size_t u, const char* why) {
  auto& st = *state_;
  const auto& unit = st.units[u];
  const int64_t w = world_size();
  if (st.gather_out.size() != st.units.size()) {
    st.gather_out.resize(st.units.size());
    st.gather_works.resize(st.units.size());
  }
  torch::NoGradGuard no_grad;
  // On the compute device (the pieces may be in host memory: cpu_offload).
  const auto options = st.params[unit.members.front()].param.options().device(root_device());
  at::Tensor in = at::empty({unit.total}, options);
  for (size_t k = 0; k < unit.members.size(); ++k) {
    const auto& p = st.params[unit.members[k]];
    in.narrow(0, unit.offsets[k], p.shard).copy_(p.param.detach());
  }
  std::vector<at::Tensor> ins{movable(in)};
  std::vector<std::vector<at::Tensor>> outs(1);
  st.gather_out[u].clear();
  for (int64_t r = 0; r < w; ++r) st.gather_out[u].push_back(at::empty({unit.total}, options));
  for (const auto& t : st.gather_out[u]) outs[0].push_back(movable(t));
  guarded(kGatherWhat, why, [&] { st.gather_works[u] = impl_->pg->allgather(outs, ins); });
}

void FSDPStrategy::finish_gather(size_t u, const char* why) {
  auto& st = *state_;
  const auto work = std::move(st.gather_works[u]);  // no longer in flight, whatever wait() does
  guarded(kGatherWhat, why, [&] { work->wait(); });
  torch::NoGradGuard no_grad;
  const int64_t w = world_size();
  auto& unit = st.units[u];
  for (size_t k = 0; k < unit.members.size(); ++k) {
    auto& p = st.params[unit.members[k]];
    if (p.whole.defined()) {
      refill_storage(p.whole);
    } else {
      p.whole = at::empty({p.shard * w}, p.param.options().device(root_device()));
    }
    for (int64_t r = 0; r < w; ++r) {
      p.whole.narrow(0, r * p.shard, p.shard).copy_(st.gather_out[u][r].narrow(0, unit.offsets[k], p.shard));
    }
    if (p.param.grad().defined()) {
      p.kept_grad = p.param.grad().detach();
      p.param.mutable_grad() = at::Tensor();
    }
    if (fsdp_.cpu_offload) p.piece = p.param.detach();
    p.param.set_data(p.whole.narrow(0, 0, p.numel).view(p.shape));
    st.whole_elements += p.shard * w;
  }
  st.gather_out[u].clear();
  unit.whole = true;
  if (st.in_step) st.counts.peak_whole_elements = std::max(st.counts.peak_whole_elements, st.whole_elements);
}

void FSDPStrategy::shard_unit(size_t u, bool restore_grad) {
  auto& st = *state_;
  auto& unit = st.units[u];
  if (!unit.whole) return;
  torch::NoGradGuard no_grad;
  const int64_t w = world_size();
  const int64_t rank = global_rank();
  for (size_t i : unit.members) {
    auto& p = st.params[i];
    at::Tensor mine;
    if (p.piece.defined()) {
      mine = std::move(p.piece);  // cpu_offload: the host piece, unchanged since the gather
      p.piece = at::Tensor();
    } else {
      mine = own_piece(p.whole.narrow(0, rank * p.shard, p.shard));
    }
    if (fsdp_.sharding_strategy == ShardingStrategy::kFullShard) {
      // A wrapped unit's whole parameters may be saved by an autograd graph: the storage goes, the
      // tensor stays for the re-gather. Any other unit's go with their last reference.
      if (unit.group >= 0) {
        release_storage(p.whole);
      } else {
        p.whole = at::Tensor();
      }
    }
    p.param.set_data(mine);
    if (restore_grad) {
      p.param.mutable_grad() = p.kept_grad;  // the shard gradient the gather put aside (or none)
      p.kept_grad = at::Tensor();
    }
    st.whole_elements -= p.shard * w;
  }
  unit.whole = false;
}

void FSDPStrategy::gather(const char* why, bool wrapped_too) {
  if (!sharded_mode()) return;
  auto& st = *state_;
  finish_prefetch(why);
  std::vector<size_t> order;
  for (size_t u = 0; u < st.units.size(); ++u) {
    if (!st.units[u].whole && (wrapped_too || st.units[u].group < 0)) order.push_back(u);
  }
  // At most two units' transfer buffers at once with limit_all_gathers.
  const size_t limit = fsdp_.limit_all_gathers ? 2 : 0;
  std::vector<size_t> in_flight;
  for (size_t u : order) {
    start_gather(u, why);
    in_flight.push_back(u);
    if (limit > 0 && in_flight.size() >= limit) {
      finish_gather(in_flight.front(), why);
      in_flight.erase(in_flight.begin());
    }
  }
  for (size_t u : in_flight) finish_gather(u, why);
}

void FSDPStrategy::finish_prefetch(const char* why) {
  auto& st = *state_;
  if (st.prefetching < 0) return;
  const size_t g = static_cast<size_t>(st.prefetching);
  st.prefetching = -1;
  for (size_t u : st.groups[g].units) {
    if (!st.units[u].whole && st.gather_works[u]) finish_gather(u, why);
  }
}

void FSDPStrategy::prefetch(size_t g) {
  auto& st = *state_;
  if (st.prefetching >= 0) return;
  bool any = false;
  for (size_t u : st.groups[g].units) {
    if (st.units[u].whole) continue;
    start_gather(u, "prefetch of a wrapped unit");
    any = true;
  }
  if (any) st.prefetching = static_cast<int64_t>(g);
}

bool FSDPStrategy::make_group_whole(size_t g, const char* why) {
  auto& st = *state_;
  if (st.prefetching == static_cast<int64_t>(g)) {
    finish_prefetch(why);
    return true;
  }
  bool gathered = false;
  for (size_t u : st.groups[g].units) {
    if (st.units[u].whole) continue;
    start_gather(u, why);
    finish_gather(u, why);
    gathered = true;
  }
  return gathered;
}

void FSDPStrategy::before_unit_forward(size_t g) {
  auto& st = *state_;
  if (!st.in_step) {
    throw Error(who() + ": the forward of the wrapped unit '" + st.units[st.groups[g].units.front()].name +
                "' ran outside a training, validation, test or predict step; under strategy='fsdp' its "
                "parameters are pieces between steps (gathering them needs every rank). Run it inside a step.");
  }
  const bool training = at::GradMode::is_enabled();
  if (make_group_whole(g, "before the forward of a wrapped unit")) ++st.counts.gathered_before_forward;
  if (!training) return;
  st.forward_order.push_back(g);
  // The next unit of the last step's forward, while this one computes.
  const auto& last = st.last_forward_order;
  const size_t at = st.forward_order.size();
  if (at < last.size() && last[at - 1] == g) prefetch(last[at]);
}

void FSDPStrategy::after_unit_forward(size_t g, const std::vector<at::Tensor>& outputs) {
  auto& st = *state_;
  const auto& group = st.groups[g];
  if (!at::GradMode::is_enabled()) {  // evaluation: no graph keeps the parameters
    bool any = false;
    for (size_t u : group.units) {
      any = any || st.units[u].whole;
      shard_unit(u, /*restore_grad=*/true);
    }
    if (any) ++st.counts.freed_after_forward;
    return;
  }
  // Inside no_sync (accumulating whole gradients), or with a gradient from an earlier micro-batch, or
  // without an output the graph continues from, the unit stays whole until the step's reduce-scatter.
  if (!impl_->sync) return;
  std::vector<at::Tensor> tracked;
  for (const auto& t : outputs) {
    if (t.defined() && t.requires_grad() && t.grad_fn()) tracked.push_back(t);
  }
  if (tracked.empty()) return;
  for (size_t u : group.units) {
    for (size_t i : st.units[u].members) {
      if (st.params[i].param.grad().defined()) return;
    }
  }
  for (size_t u : group.units) shard_unit(u, /*restore_grad=*/false);
  ++st.counts.freed_after_forward;
  std::weak_ptr<char> alive = st.alive;
  for (auto& t : tracked) {
    t.register_hook([this, alive, g](const at::Tensor&) {
      if (alive.expired()) return;
      before_unit_backward(g);
    });
  }
}

void FSDPStrategy::before_unit_backward(size_t g) {
  auto& st = *state_;
  if (make_group_whole(g, "before the backward of a wrapped unit")) ++st.counts.gathered_before_backward;
  // The unit whose forward ran before this one is the next to need its parameters in this backward.
  const auto& order = st.forward_order;
  for (size_t k = order.size(); k-- > 1;) {
    if (order[k] == g) {
      prefetch(order[k - 1]);
      break;
    }
  }
}

const FSDPStrategy::UnitCounts& FSDPStrategy::wrapped_unit_counts() const {
  return state_->counts;
}

int64_t FSDPStrategy::reduce_scatters_started_in_backward() const {
  return state_->started_in_backward;
}

void FSDPStrategy::start_reduce(size_t u) {
  auto& st = *state_;
  st.started[u] = 1;
  const auto& unit = st.units[u];
  if (unit.total == 0) return;
  torch::NoGradGuard no_grad;
  const int64_t w = world_size();
  // Under bf16-mixed the gradients travel as bfloat16 (Lightning's reduce_dtype for that precision: half
  // the bytes); they are summed in float32.
  const auto options =
      st.params[unit.members.front()].param.options().dtype(reduce_dtype(unit.dtype)).device(root_device());
  at::Tensor in = at::zeros({w, unit.total}, options);
  for (size_t k = 0; k < unit.members.size(); ++k) {
    auto& p = st.params[unit.members[k]];
    const at::Tensor g = p.param.grad();
    if (!g.defined()) continue;  // no gradient this step: zeros, as ddp's Reducer
    const at::Tensor flat = g.detach().reshape(-1);
    for (int64_t r = 0; r < w; ++r) {
      const int64_t len = std::clamp<int64_t>(p.numel - r * p.shard, 0, p.shard);
      if (len > 0) in[r].narrow(0, unit.offsets[k], len).copy_(flat.narrow(0, r * p.shard, len));
    }
    p.param.mutable_grad() = at::Tensor();  // the whole gradient is in `in` now: freed before the next unit's
  }
  st.received[u] = at::empty_like(in);
  at::Tensor out = movable(st.received[u]).view({-1});
  at::Tensor flat_in = movable(in).view({-1});
  std::vector<int64_t> splits;
  // Gloo has no reduce_scatter (LibTorch 1.13 and 2.6): an all-to-all of each rank's W pieces, then a local sum.
  guarded(kReduceWhat, nullptr, [&] { st.works[u] = impl_->pg->alltoall_base(out, flat_in, splits, splits); });
  st.in_flight.push_back(u);
  // At most two units' transfer buffers at once (fsdp.limit_all_gathers).
  if (fsdp_.limit_all_gathers && st.in_flight.size() >= 2) finish_reduce();
}

void FSDPStrategy::finish_reduce() {
  auto& st = *state_;
  const size_t u = st.in_flight.front();
  st.in_flight.erase(st.in_flight.begin());
  const auto work = std::move(st.works[u]);
  guarded(kReduceWhat, nullptr, [&] { work->wait(); });
  torch::NoGradGuard no_grad;
  const auto travelled = st.received[u].scalar_type();
  const bool low = travelled == at::kBFloat16 || travelled == at::kHalf;
  st.summed[u] = (low ? st.received[u].to(at::kFloat) : st.received[u])
                     .sum(0)
                     .div_(static_cast<double>(world_size()))
                     .to(st.units[u].dtype);
  st.received[u] = at::Tensor();
}

void FSDPStrategy::on_gradient_ready(size_t index) {
  auto& st = *state_;
  if (!st.armed || index >= st.unit_of.size()) return;
  const size_t u = st.unit_of[index];
  if (st.started[u] || ++st.ready[u] < st.units[u].members.size()) return;
  start_reduce(u);
  ++st.started_in_backward;
  // A wrapped unit's backward is over once all its gradients are in: its whole parameters go now.
  if (st.units[u].group >= 0 && st.units[u].whole) {
    shard_unit(u, /*restore_grad=*/false);
    ++st.counts.freed_after_backward;
  }
}

void FSDPStrategy::prepare_overlap() {
  auto& st = *state_;
  const size_t n_units = st.units.size();
  if (st.unit_of.size() != st.params.size()) {
    st.unit_of.assign(st.params.size(), 0);
    for (size_t u = 0; u < n_units; ++u) {
      for (size_t i : st.units[u].members) st.unit_of[i] = u;
    }
  }
  st.ready.assign(n_units, 0);
  st.started.assign(n_units, 0);
  st.in_flight.clear();  // what a failed backward left is dropped
  st.received.assign(n_units, at::Tensor());
  st.summed.assign(n_units, at::Tensor());
  st.works.assign(n_units, {});
  // The accumulator in the graph is the one a hook must sit on; a new one (after a dtype or device change
  // of the parameter) gets the hook again. Held, so that it and its hook live across steps.
  st.accumulators.resize(st.params.size());
  st.hook_keys.resize(st.params.size(), 0);
  for (size_t i = 0; i < st.params.size(); ++i) {
    auto acc = torch::autograd::impl::grad_accumulator(st.params[i].param);
    if (!acc || acc == st.accumulators[i]) continue;
    if (st.accumulators[i]) st.accumulators[i]->del_post_hook(st.hook_keys[i]);
    st.hook_keys[i] =
        acc->add_post_hook(std::make_unique<GradReadyHook>([this](size_t index) { on_gradient_ready(index); }, i));
    st.accumulators[i] = std::move(acc);
  }
}

void FSDPStrategy::remove_gradient_hooks() {
  auto& st = *state_;
  for (size_t i = 0; i < st.accumulators.size(); ++i) {
    if (st.accumulators[i]) st.accumulators[i]->del_post_hook(st.hook_keys[i]);
  }
  st.accumulators.clear();
  st.hook_keys.clear();
  st.unit_of.clear();
  st.in_flight.clear();
  st.works.clear();
}

void FSDPStrategy::end_step() {
  auto& st = *state_;
  st.in_step = false;
  if (!st.forward_order.empty()) st.last_forward_order = st.forward_order;
  st.forward_order.clear();
}

void FSDPStrategy::reduce_scatter_and_reshard() {
  auto& st = *state_;
  const size_t n_units = st.units.size();
  if (st.started.size() != n_units) prepare_overlap();
  finish_prefetch("prefetch of a wrapped unit");
  // The units the backward did not start (a member without a gradient), last unit first.
  for (size_t u = n_units; u-- > 0;) {
    if (!st.started[u]) start_reduce(u);
  }
  while (!st.in_flight.empty()) finish_reduce();
  for (size_t u = 0; u < n_units; ++u) {
    shard_unit(u, /*restore_grad=*/false);
    torch::NoGradGuard no_grad;
    const auto& unit = st.units[u];
    for (size_t k = 0; k < unit.members.size(); ++k) {
      auto& p = st.params[unit.members[k]];
      at::Tensor grad = p.shard == 0 ? at::empty({0}, p.param.options())
                        : fsdp_.cpu_offload
                            ? to_host(st.summed[u].narrow(0, unit.offsets[k], p.shard))  // next to its piece
                            : st.summed[u].narrow(0, unit.offsets[k], p.shard).clone();
      if (p.kept_grad.defined()) grad.add_(p.kept_grad);
      p.kept_grad = at::Tensor();
      p.param.mutable_grad() = grad;
    }
    st.summed[u] = at::Tensor();
    st.started[u] = 0;
    st.ready[u] = 0;
  }
  end_step();
}

at::Tensor FSDPStrategy::training_step(Module& module, Batch& batch, StepContext& ctx) {
  if (!sharded_mode()) return DDPStrategy::training_step(module, batch, ctx);
  raise_if_a_rank_failed();
  state_->in_step = true;
  gather("training_step");
  return Strategy::training_step(module, batch, ctx);
}

at::ScalarType FSDPStrategy::reduce_dtype(at::ScalarType param_dtype) const {
  return param_dtype == at::kFloat && precision_->name() == "bf16-mixed" ? at::kBFloat16 : param_dtype;
}

void FSDPStrategy::reshard() {
  if (!sharded_mode()) return;
  finish_prefetch("prefetch of a wrapped unit");
  for (size_t u = 0; u < state_->units.size(); ++u) shard_unit(u, /*restore_grad=*/true);
  end_step();
}

// An evaluation step gathers for its forward and re-shards after it, so that between steps (where
// callbacks and checkpoints look) the parameters are always the pieces. A wrapped unit gathers for its
// own forward and re-shards after it.
void FSDPStrategy::evaluation_step(const char* why, const std::function<void()>& step) {
  if (!sharded_mode()) {
    step();
    return;
  }
  const bool keep = state_->in_step || state_->all_whole();
  const bool was_in_step = state_->in_step;
  state_->in_step = true;
  gather(why);
  step();
  if (keep) {
    state_->in_step = was_in_step;
  } else {
    reshard();
  }
}

void FSDPStrategy::validation_step(Module& module, Batch& batch, StepContext& ctx) {
  evaluation_step("validation_step", [&] { DDPStrategy::validation_step(module, batch, ctx); });
}

void FSDPStrategy::test_step(Module& module, Batch& batch, StepContext& ctx) {
  evaluation_step("test_step", [&] { DDPStrategy::test_step(module, batch, ctx); });
}

at::Tensor FSDPStrategy::predict_step(Module& module, Batch& batch, StepContext& ctx) {
  at::Tensor out;
  evaluation_step("predict_step", [&] { out = DDPStrategy::predict_step(module, batch, ctx); });
  return out;
}

void FSDPStrategy::backward(const at::Tensor& loss) {
  if (!sharded_mode()) {
    DDPStrategy::backward(loss);
    return;
  }
  if (!state_->in_step) {
    throw Error(who() + ": fsdp backward while the parameters are sharded: the loss was not computed by a "
                        "training_step this strategy ran (the parameters are gathered just before it).");
  }
  prepare_overlap();
  state_->armed = impl_->sync;
  try {
    Strategy::backward(loss);
  } catch (...) {
    state_->armed = false;
    throw;
  }
  state_->armed = false;
  if (impl_->sync) reduce_scatter_and_reshard();
}

void FSDPStrategy::clip_gradients(torch::optim::Optimizer& optimizer, double value,
                                  precision::ClipAlgorithm algorithm) {
  if (!sharded_mode() || algorithm != precision::ClipAlgorithm::kNorm || value <= 0.0) {
    DDPStrategy::clip_gradients(optimizer, value, algorithm);
    return;
  }
  std::vector<at::Tensor> grads;
  for (auto& group : optimizer.param_groups()) {
    for (auto& p : group.params()) {
      if (p.grad().defined()) grads.push_back(p.grad().detach());
    }
  }
  // Each element of the whole gradient is in exactly one rank's shard (the padding is zero).
  at::Tensor squares = at::zeros({1}, at::TensorOptions().dtype(at::kDouble).device(root_device()));
  for (const auto& g : grads) squares.add_(g.to(at::kDouble).pow(2).sum());
  const at::Tensor total = all_reduce(squares, ReduceOp::kSum).sqrt();
  const at::Tensor coef = total.add(1e-6).reciprocal().mul(value).clamp_max(1.0);
  for (auto& g : grads) g.mul_(coef.to(g.device(), g.scalar_type()));
}

void FSDPStrategy::for_each_optimizer_state(
    std::map<std::string, at::Tensor>& tensors,
    const std::function<void(std::map<std::string, at::Tensor>::iterator, const StateParam&)>& fn) const {
  for (size_t o = 0; o < state_->optimizer_params.size(); ++o) {
    const auto& indices = state_->optimizer_params[o];
    for (size_t k = 0; k < indices.size(); ++k) {
      if (indices[k] < 0) continue;
      const auto& p = state_->params[static_cast<size_t>(indices[k])];
      const std::string prefix = "optimizer_states." + std::to_string(o) + ".state." + std::to_string(k) + ".";
      for (auto it = tensors.lower_bound(prefix);
           it != tensors.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
        if (it->second.dim() > 0) fn(it, p);  // not the step counters
      }
    }
  }
}

at::Tensor FSDPStrategy::full_value(size_t index) {
  const auto& p = state_->params[index];
  if (state_->units[p.unit].whole) return p.param.detach().clone();
  const auto pieces = all_gather(p.param.detach().to(root_device()).contiguous());
  return at::cat(pieces).narrow(0, 0, p.numel).view(p.shape).clone();
}

void FSDPStrategy::save_checkpoint(const Checkpoint& checkpoint, const std::string& path) {
  if (!sharded_mode() || state_->params.empty()) {
    DDPStrategy::save_checkpoint(checkpoint, path);
    return;
  }
  if (fsdp_.state_dict_type == "sharded") {
    save_sharded_checkpoint(checkpoint, path);
    return;
  }
  Checkpoint full = checkpoint;
  for (size_t i = 0; i < state_->params.size(); ++i) {
    const auto it = full.tensors.find("state_dict." + state_->params[i].name);
    if (it != full.tensors.end()) it->second = full_value(i);
  }
  for_each_optimizer_state(full.tensors, [&](std::map<std::string, at::Tensor>::iterator it, const State::Param& p) {
    if (it->second.numel() != p.shard) {
      throw CheckpointError(who() + ": the optimizer state " + it->first + " of " + p.name + " has " +
                            std::to_string(it->second.numel()) + " elements, not this rank's shard of " +
                            std::to_string(p.shard) + "; it cannot be gathered into a full checkpoint.");
    }
    const auto pieces = all_gather(it->second.detach().reshape(-1).to(root_device()).contiguous());
    it->second = at::cat(pieces).narrow(0, 0, p.numel).view(p.shape).clone();
  });
  if (full.meta.is_object() && full.meta.contains("volt") && full.meta["volt"].is_object()) {
    full.meta["volt"]["fsdp"] = {{"sharding_strategy", to_string(fsdp_.sharding_strategy)},
                                 {"world_size", world_size()},
                                 {"state_dict_type", "full"}};
  }
  DDPStrategy::save_checkpoint(full, path);
}

nlohmann::json FSDPStrategy::cut_to_pieces(Checkpoint& checkpoint,
                                           std::vector<checkpoint_io::ShardedTensorInfo>& sharded) const {
  const int64_t rank = global_rank();
  for (const auto& p : state_->params) {
    const std::string key = "state_dict." + p.name;
    const auto it = checkpoint.tensors.find(key);
    if (it == checkpoint.tensors.end()) continue;
    // Between steps the parameter is this rank's piece; gathered (after a stage, or inside a step that
    // failed) the piece is cut from the whole again.
    const bool whole = state_->units[p.unit].whole;
    if (!whole) {
      it->second = p.param.detach().clone();
    } else if (p.whole.defined() && p.whole.numel() >= (rank + 1) * p.shard && p.whole.storage().nbytes() > 0) {
      it->second = p.whole.narrow(0, rank * p.shard, p.shard).clone();
    } else {
      throw CheckpointError(who() + ": " + p.name + " is neither this rank's piece nor gathered whole (" +
                            std::to_string(p.param.numel()) + " elements); no sharded checkpoint can be cut now.");
    }
    sharded.push_back({key, p.shape, p.numel, p.shard});
  }
  for_each_optimizer_state(checkpoint.tensors, [&](std::map<std::string, at::Tensor>::iterator it, const State::Param& p) {
    sharded.push_back({it->first, p.shape, p.numel, p.shard});
  });
  nlohmann::json info = {{"sharding_strategy", to_string(fsdp_.sharding_strategy)},
                         {"world_size", world_size()},
                         {"state_dict_type", "sharded"}};
  if (checkpoint.meta.is_object() && checkpoint.meta.contains("volt") && checkpoint.meta["volt"].is_object()) {
    checkpoint.meta["volt"]["fsdp"] = info;
  }
  return info;
}

void FSDPStrategy::make_sharded_folder(const std::string& path) const {
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) {
    throw CheckpointError(who() + ": cannot write the sharded checkpoint folder '" + path +
                          "': a file of that name exists (a full checkpoint?). Remove it or save elsewhere.");
  }
  std::filesystem::create_directories(path, ec);
  if (ec) throw CheckpointError(who() + ": cannot create the sharded checkpoint folder '" + path + "': " + ec.message());
}

void FSDPStrategy::save_sharded_checkpoint(const Checkpoint& checkpoint, const std::string& path) {
  Checkpoint mine = checkpoint;
  std::vector<checkpoint_io::ShardedTensorInfo> sharded;
  const nlohmann::json info = cut_to_pieces(mine, sharded);
  make_sharded_folder(path);
  // A save over an older sharded checkpoint: its meta.json goes first, so a crash in between leaves
  // an unfinished folder (refused on load), never old metadata over new pieces.
  barrier("sharded checkpoint: folder ready");
  std::error_code ec;
  if (is_global_zero()) std::filesystem::remove(std::filesystem::path(path) / checkpoint_io::kShardedMetaFile, ec);
  barrier("sharded checkpoint: old metadata removed");
  checkpoint_io_->save_checkpoint(mine, checkpoint_io::shard_file(path, global_rank()));
  // The metadata says the folder is complete: an asynchronous writer must have finished first.
  if (auto* async = dynamic_cast<checkpoint_io::AsyncCheckpointIO*>(checkpoint_io_.get())) async->wait();
  barrier("sharded checkpoint: every rank's file written");
  if (is_global_zero()) checkpoint_io::write_sharded_meta(path, world_size(), sharded, info);
  barrier("sharded checkpoint: metadata written");
}

void FSDPStrategy::save_checkpoint_without_collective(const Checkpoint& checkpoint, const std::string& path) {
  if (!sharded_mode() || state_->params.empty()) {
    DDPStrategy::save_checkpoint_without_collective(checkpoint, path);
    return;
  }
  // A full checkpoint needs every rank's pieces (a collective): a failing run writes the sharded kind.
  Checkpoint mine = checkpoint;
  std::vector<checkpoint_io::ShardedTensorInfo> sharded;
  const nlohmann::json info = cut_to_pieces(mine, sharded);
  make_sharded_folder(path);
  std::error_code ec;
  std::filesystem::remove(std::filesystem::path(path) / checkpoint_io::kShardedMetaFile, ec);  // an older save's
  checkpoint_io_->save_checkpoint(mine, checkpoint_io::shard_file(path, global_rank()));
  if (auto* async = dynamic_cast<checkpoint_io::AsyncCheckpointIO*>(checkpoint_io_.get())) async->wait();
  const int64_t step = mine.meta.is_object() ? mine.meta.value("global_step", int64_t{-1}) : -1;
  checkpoint_io::finish_sharded_save_without_collective(path, global_rank(), world_size(), step, sharded, info);
}

Checkpoint FSDPStrategy::load_checkpoint(const std::string& path) {
  Checkpoint c = DDPStrategy::load_checkpoint(path);
  if (!sharded_mode() || state_->all_whole() || state_->params.empty()) return c;
  const int64_t w = world_size();
  const int64_t rank = global_rank();
  auto shard_of = [&](const at::Tensor& t, const State::Param& p) {
    at::Tensor whole = at::zeros({p.shard * w}, t.options());
    whole.narrow(0, 0, p.numel).copy_(t.reshape(-1));
    return whole.narrow(0, rank * p.shard, p.shard).clone();
  };
  for (const auto& p : state_->params) {
    const auto it = c.tensors.find("state_dict." + p.name);
    if (it == c.tensors.end()) continue;  // the strict load names it
    if (it->second.sizes().vec() != p.shape) {
      throw CheckpointError("checkpoint '" + path + "' does not fit module: " + p.name + " (checkpoint " +
                            shape_text(it->second.sizes()) + ", module " + shape_text(p.shape) + ").");
    }
    it->second = shard_of(it->second, p);
  }
  for_each_optimizer_state(c.tensors, [&](std::map<std::string, at::Tensor>::iterator it, const State::Param& p) {
    if (it->second.numel() != p.numel) {
      throw CheckpointError("checkpoint '" + path + "': the optimizer state " + it->first + " has shape " +
                            shape_text(it->second.sizes()) + ", but parameter " + p.name + " has " +
                            shape_text(p.shape) + ". It was written for another model.");
    }
    it->second = shard_of(it->second, p);
  });
  return c;
}

void FSDPStrategy::on_exception() {
  state_->failed = true;
  DDPStrategy::on_exception();
}

void FSDPStrategy::teardown() {
  if (sharded_mode() && !state_->failed) gather("teardown", /*wrapped_too=*/true);
  for (auto& p : state_->params) {
    p.kept_grad = at::Tensor();
    p.piece = at::Tensor();  // the module is whole on the compute device after a stage
  }
  remove_gradient_hooks();
  // A stage is over: the wrapped modules run as themselves (their parameters are whole, or, after a failure,
  // pieces the next setup gathers).
  detach_wrapped_modules();
  state_->in_step = false;
  state_->failed = false;
  DDPStrategy::teardown();
}

RankMemory rank_memory(const std::string& strategy, ShardingStrategy sharding, int64_t world_size,
                       int64_t num_params, int64_t bytes_per_element, int64_t state_tensors_per_param,
                       bool gradient_as_bucket_view) {
  const int64_t whole = num_params * bytes_per_element;
  const int64_t piece = (num_params + world_size - 1) / std::max<int64_t>(world_size, 1) * bytes_per_element;
  RankMemory m;
  if (strategy == "fsdp" && sharding != ShardingStrategy::kNoShard && world_size > 1) {
    m.parameters = sharding == ShardingStrategy::kFullShard ? piece : piece * world_size;
    m.gradients = piece;
    m.optimizer_state = piece * state_tensors_per_param;
    return m;
  }
  m.parameters = whole;
  m.gradients = whole;
  m.optimizer_state = whole * state_tensors_per_param;
  const bool reducer = (strategy.rfind("ddp", 0) == 0 || strategy == "fsdp") && world_size > 1;
  if (reducer && !gradient_as_bucket_view) m.communication_buffers = whole;
  return m;
}

std::shared_ptr<Strategy> make_fsdp_strategy(const StrategyParts& parts) {
  return std::make_shared<FSDPStrategy>(parts, parts.fsdp);
}

}  // namespace volt::strategies
