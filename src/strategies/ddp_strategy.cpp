#include "volt/strategies/ddp_strategy.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <thread>
#include <type_traits>
#include <unordered_map>

#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/distributed/c10d/comm.hpp>

#include "strategies/detail/ddp_impl.h"
#include "volt/core/error.h"
#include "volt/strategies/comm_hooks.h"
#include "volt/strategies/launchers/spawn_launcher.h"
#include "volt/strategies/launchers/subprocess_launcher.h"

namespace volt::strategies {
namespace {

using detail::error_text;

c10d::ReduceOp to_c10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMax: return c10d::ReduceOp::MAX;
    case ReduceOp::kMin: return c10d::ReduceOp::MIN;
    default: return c10d::ReduceOp::SUM;
  }
}

/// c10d::Reducer's constructor by LibTorch version: up to 2.6 it takes the per-bucket size limits
/// third; later versions dropped them and take skip_all_reduce_unused_params and use_python_reducer
/// last (PyTorch's own DDP passes false for both), and 2.11 a list of bucket caps after those (empty:
/// every bucket by bucket_bytes_cap, as PyTorch's DDP passes without bucket_cap_mb_list). `R` is a
/// template parameter so that only the matching branch is compiled.
template <typename R = c10d::Reducer>
std::unique_ptr<R> make_reducer(std::vector<at::Tensor> params, std::vector<std::vector<size_t>> buckets,
                                std::vector<size_t> limits, c10::intrusive_ptr<c10d::ProcessGroup> pg,
                                std::vector<bool> sparse, int64_t cap, bool find_unused, bool as_bucket_view,
                                std::unordered_map<size_t, std::string> names, int64_t first) {
  using Params = std::vector<at::Tensor>;
  using Buckets = std::vector<std::vector<size_t>>;
  using Group = c10::intrusive_ptr<c10d::ProcessGroup>;
  using Names = std::unordered_map<size_t, std::string>;
  if constexpr (std::is_constructible_v<R, Params, Buckets, std::vector<size_t>, Group, std::vector<bool>, int64_t,
                                        bool, bool, Names, int64_t>) {
    return std::make_unique<R>(std::move(params), std::move(buckets), std::move(limits), std::move(pg),
                               std::move(sparse), cap, find_unused, as_bucket_view, std::move(names), first);
  } else if constexpr (std::is_constructible_v<R, Params, Buckets, Group, std::vector<bool>, int64_t, bool, bool,
                                               Names, int64_t, bool, bool>) {
    (void)limits;  // the bucket assignment alone; the Reducer derives the limits
    return std::make_unique<R>(std::move(params), std::move(buckets), std::move(pg), std::move(sparse), cap,
                               find_unused, as_bucket_view, std::move(names), first,
                               /*skip_all_reduce_unused_params=*/false, /*use_python_reducer=*/false);
  } else {
    (void)limits;
    return std::make_unique<R>(std::move(params), std::move(buckets), std::move(pg), std::move(sparse), cap,
                               find_unused, as_bucket_view, std::move(names), first,
                               /*skip_all_reduce_unused_params=*/false, /*use_python_reducer=*/false,
                               std::vector<int64_t>{});
  }
}

/// Gloo cannot reduce bfloat16: widen each gradient bucket to fp32, average, narrow back.
class Fp32AllreduceHook : public c10d::CommHookInterface {
 public:
  explicit Fp32AllreduceHook(c10::intrusive_ptr<c10d::ProcessGroup> pg) : state_(std::move(pg)) {}
  at::Tensor parseHookResult(const c10::IValue& result) override { return result.toTensor(); }
  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override {
    at::Tensor buffer = bucket.getBufferRef();
    at::Tensor wide = buffer.to(at::kFloat).div_(static_cast<double>(state_->getSize()));
    std::vector<at::Tensor> tensors{wide};
    auto future = state_->allreduce(tensors)->getFuture();
    return future->then(
        [buffer, wide](c10::ivalue::Future&) {
          buffer.copy_(wide);
          return c10::IValue(buffer);
        },
        c10::TensorType::get());
  }

 private:
  c10::intrusive_ptr<c10d::ProcessGroup> state_;
};

/// Gloo moves no bfloat16 either: broadcast its bits as fp16 of the same size.
std::vector<at::Tensor> gloo_transportable(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) out.push_back(t.scalar_type() == at::kBFloat16 ? t.view(at::kHalf) : t);
  return out;
}

}  // namespace

DDPStrategy::DDPStrategy(const StrategyParts& parts, DDPOptions options)
    : Strategy(parts.accelerator, parts.precision, parts.environment, parts.checkpoint_io),
      impl_(std::make_unique<Impl>()),
      name_(parts.spec.name),
      launcher_kind_(parts.spec.launcher),
      root_device_(parts.root_device),
      options_(std::move(options)) {
  connect(parts);
}

DDPStrategy::DDPStrategy(DDPOptions options, const std::string& name)
    : DDPStrategy(std::move(options), strategy_spec(name)) {
  if (name_.rfind("ddp", 0) != 0) {
    throw ConfigError("DDPStrategy(options, \"" + name + "\"): '" + name_ +
                      "' is not a ddp strategy. Use ddp, "
                      "ddp_spawn or one of their find_unused_parameters variants.");
  }
}

DDPStrategy::DDPStrategy(DDPOptions options, const StrategySpec& spec)
    : impl_(std::make_unique<Impl>()), root_device_(c10::kCPU), options_(std::move(options)) {
  name_ = spec.name;
  launcher_kind_ = spec.launcher;
  options_.find_unused_parameters = options_.find_unused_parameters || spec.find_unused_parameters;
  check_comm_hook(options_.comm_hook, options_.powersgd, "DDPOptions::comm_hook");
}

void DDPStrategy::connect(const StrategyParts& parts) {
  Strategy::connect(parts);
  root_device_ = parts.root_device;
  world_size_ = environment_->world_size();
  global_rank_ = environment_->global_rank();
  local_rank_ = environment_->local_rank();
  node_rank_ = environment_->node_rank();
  local_world_size_ = std::max<int64_t>(1, static_cast<int64_t>(parts.parallel_devices.size()));
  if (options_.backend != "gloo" && options_.backend != "nccl") {
    throw ConfigError("process_group_backend='" + options_.backend + "' is not known. Use gloo or nccl.");
  }
  if (options_.backend == "nccl") {
#ifndef VOLT_WITH_NCCL
    throw NotSupportedError("process_group_backend='nccl' needs a LibTorch built with CUDA and NCCL; this one has "
                            "neither. Use process_group_backend='gloo' (CPU or CUDA tensors).");
#endif
  }
  if (options_.comm_hook_object && !options_.comm_hook.empty()) {
    throw ConfigError("DDPOptions has both a comm_hook_object ('" + options_.comm_hook_object->name() +
                      "') and comm_hook='" + options_.comm_hook + "'. Give one of them.");
  }
  if (!impl_->comm_hook) {
    impl_->comm_hook = options_.comm_hook_object    ? options_.comm_hook_object
                       : options_.comm_hook.empty() ? nullptr
                                                    : make_comm_hook(options_.comm_hook, options_.powersgd);
  }
  if (launcher_kind_ == LauncherKind::kSubprocess && !environment_->creates_processes_externally()) {
    subprocess_ = std::make_unique<launchers::SubprocessLauncher>(environment_, local_world_size_);
  } else if (launcher_kind_ == LauncherKind::kSpawn) {
    // In the parent and in its workers alike: the workers run their stage call through it.
    spawn_ = std::make_unique<launchers::SpawnLauncher>(environment_, local_world_size_);
  }
}

DDPStrategy::~DDPStrategy() {
  try {
    impl_->reducer.reset();
    // The other local ranks finish (or, after a failure, are stopped) while this rank's
    // process group and store are still there for them.
    subprocess_.reset();
    impl_->pg.reset();
    impl_->store.reset();
    impl_->lease.reset();
  } catch (...) {
    // A destructor must not throw; the job's ranks are gone either way.
  }
}

launchers::Launcher* DDPStrategy::launcher() const {
  if (subprocess_) return subprocess_.get();
  return spawn_.get();
}

void DDPStrategy::use_spawn_launcher(std::unique_ptr<launchers::SpawnLauncher> launcher) {
  spawn_ = std::move(launcher);
}

std::string DDPStrategy::who() const {
  return "rank " + std::to_string(global_rank_) + " on host " + impl_->host;
}

void DDPStrategy::setup_environment() {
  Strategy::setup_environment();
  if (!impl_->pg) join_process_group();
}

void DDPStrategy::raise_if_a_rank_failed() const {
  if (subprocess_) subprocess_->raise_if_a_rank_failed();
}

void DDPStrategy::collective_failed(const std::string& what, const std::exception& e) const {
  detail::forget_kept_group(impl_->pg);
  if (subprocess_ && subprocess_->started()) {
    // A peer's death shows here first as a closed connection; the monitor names it.
    subprocess_->wait_for_failure(std::chrono::seconds(1));
    raise_if_a_rank_failed();
  }
  throw DistributedError(who() + ": " + what + " failed: " + error_text(e) +
                         " (a peer rank died or did not reach the same call within the process-group timeout)");
}

void DDPStrategy::broadcast_module_state(Module& module) {
  std::vector<at::Tensor> state;
  for (const auto& p : module.parameters()) state.push_back(p);
  for (const auto& b : module.buffers()) state.push_back(b);
  if (world_size_ > 1 && !state.empty()) {
    try {
      torch::NoGradGuard no_grad;
      c10d::broadcast_coalesced(impl_->pg, gloo_transportable(state), 250u << 20, 0);
    } catch (const std::exception& e) {
      throw DistributedError(who() + ": broadcasting the initial parameters from rank 0 failed: " + error_text(e));
    }
  }
}

void DDPStrategy::setup(Module& module) {
  Strategy::setup(module);
  std::vector<at::Tensor> params;
  std::unordered_map<size_t, std::string> names;
  for (const auto& item : module.named_parameters()) {
    if (item.value().requires_grad()) {
      names[params.size()] = item.key();
      params.push_back(item.value());
    }
  }
  broadcast_module_state(module);
  impl_->reducer.reset();
  if (params.empty()) return;
  const auto cap = static_cast<size_t>(options_.bucket_cap_mb * 1024 * 1024);
  const auto first = static_cast<size_t>(options_.first_bucket_cap_mb * 1024 * 1024);
  const std::vector<bool> sparse(params.size(), false);
  auto assignment = c10d::compute_bucket_assignment_by_size(params, {first, cap}, sparse);
  auto buckets = std::get<0>(assignment);
  auto limits = std::get<1>(assignment);
  // Gradients arrive roughly in reverse order of registration (as PyTorch's DDP orders them).
  std::reverse(buckets.begin(), buckets.end());
  std::reverse(limits.begin(), limits.end());
  impl_->reducer = make_reducer(params, buckets, limits, impl_->pg, sparse, static_cast<int64_t>(cap),
                                options_.find_unused_parameters, options_.gradient_as_bucket_view, names,
                                static_cast<int64_t>(first));
  const bool any_bf16 = std::any_of(params.begin(), params.end(),
                                    [](const at::Tensor& t) { return t.scalar_type() == at::kBFloat16; });
  if (const auto& hook = impl_->comm_hook) {
    const std::string n = hook->name();
    if (any_bf16 && options_.backend == "gloo" && (n == "allreduce" || n == "powersgd")) {
      throw NotSupportedError("ddp comm_hook='" + n +
                              "' reduces in the parameters' dtype, and Gloo cannot reduce the bfloat16 parameters "
                              "of this module. Use comm_hook='bf16' or 'fp16', or leave comm_hook empty (bfloat16 "
                              "gradients are then averaged in float32).");
    }
    hook->setup(impl_->pg, params);
    impl_->reducer->register_comm_hook(to_c10d_comm_hook(hook));
  } else if (any_bf16 && options_.backend == "gloo") {
    impl_->reducer->register_comm_hook(std::make_unique<Fp32AllreduceHook>(impl_->pg));
  }
  impl_->sync = true;
}

at::Tensor DDPStrategy::training_step(Module& module, Batch& batch, StepContext& ctx) {
  raise_if_a_rank_failed();
  if (impl_->reducer && impl_->sync && torch::GradMode::is_enabled()) {
    try {
      impl_->reducer->rebuild_buckets();
    } catch (const std::exception& e) {
      throw DistributedError(who() + ": rebuilding the gradient buckets failed: " + error_text(e));
    }
  }
  return Strategy::training_step(module, batch, ctx);
}

void DDPStrategy::backward(const at::Tensor& loss) {
  if (impl_->reducer && impl_->sync) {
    try {
      impl_->reducer->prepare_for_forward();
      impl_->reducer->prepare_for_backward(options_.find_unused_parameters ? std::vector<at::Tensor>{loss}
                                                                           : std::vector<at::Tensor>{});
    } catch (const std::exception& e) {
      throw DistributedError(who() + ": the gradient reducer refused this backward: " + error_text(e) +
                             (options_.find_unused_parameters
                                  ? ""
                                  : " If some parameters get no gradient in a step, use "
                                    "strategy=\"ddp_find_unused_parameters_true\"."));
    }
  }
  try {
    Strategy::backward(loss);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    if (!impl_->reducer || !impl_->sync) throw;
    collective_failed("backward with gradient allreduce", e);
  }
}

bool DDPStrategy::set_gradient_sync(bool enabled) {
  const bool previous = impl_->sync;
  impl_->sync = enabled;
  return previous;
}

namespace {

/// Runs one collective; a failure goes to `failed` (DDPStrategy::collective_failed).
template <typename Failed, typename F>
auto run_collective(const Failed& failed, const std::string& op, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    failed("collective '" + op + "'", e);
    throw;  // not reached: `failed` throws
  }
}

}  // namespace

void DDPStrategy::barrier(const std::string& name) {
  if (!impl_->pg) return;
  run_collective([this](const std::string& w, const std::exception& e) { collective_failed(w, e); }, "barrier " + name, [&] { impl_->pg->barrier()->wait(); });
}

at::Tensor DDPStrategy::all_reduce(const at::Tensor& tensor, ReduceOp op) {
  if (!impl_->pg || world_size_ == 1) return tensor;
  return run_collective([this](const std::string& w, const std::exception& e) { collective_failed(w, e); }, "all_reduce", [&] {
    // Gloo has no bf16/fp16 reductions: reduce in fp32 and convert back.
    const bool low = tensor.scalar_type() == at::kBFloat16 || tensor.scalar_type() == at::kHalf;
    at::Tensor t = low ? tensor.to(at::kFloat) : tensor.clone();
    std::vector<at::Tensor> ts{t};
    c10d::AllreduceOptions opts;
    opts.reduceOp = to_c10d(op);
    impl_->pg->allreduce(ts, opts)->wait();
    if (op == ReduceOp::kMean) t.div_(static_cast<double>(world_size_));
    return low ? t.to(tensor.scalar_type()) : t;
  });
}

double DDPStrategy::reduce(double value, ReduceOp op) { return start_reduce(value, op)->get(); }

bool DDPStrategy::reduce_boolean_decision(bool decision, bool all) {
  if (!impl_->pg || world_size_ == 1) return decision;
  const double votes = reduce(decision ? 1.0 : 0.0, ReduceOp::kSum);
  return all ? votes >= static_cast<double>(world_size_) : votes > 0.0;
}

namespace {

/// One number's allreduce in flight; get() waits for it (a failure goes to `failed`).
class StartedReduce final : public Strategy::PendingReduce {
 public:
  using Failed = std::function<void(const std::string&, const std::exception&)>;
  StartedReduce(at::Tensor value, c10::intrusive_ptr<c10d::Work> work, double divide_by, Failed failed)
      : value_(std::move(value)), work_(std::move(work)), divide_by_(divide_by), failed_(std::move(failed)) {}
  double get() override {
    run_collective(failed_, "all_reduce", [&] { work_->wait(); });
    return value_.item<double>() / divide_by_;
  }

 private:
  at::Tensor value_;
  c10::intrusive_ptr<c10d::Work> work_;
  double divide_by_;
  Failed failed_;
};

}  // namespace

std::unique_ptr<Strategy::PendingReduce> DDPStrategy::start_reduce(double value, ReduceOp op) {
  if (!impl_->pg || world_size_ == 1) return Strategy::start_reduce(value, op);
  auto failed = [this](const std::string& w, const std::exception& e) { collective_failed(w, e); };
  return run_collective(failed, "all_reduce", [&] {
    std::vector<at::Tensor> ts{at::full({1}, value, at::TensorOptions().dtype(at::kDouble))};
    c10d::AllreduceOptions opts;
    opts.reduceOp = to_c10d(op);
    auto work = impl_->pg->allreduce(ts, opts);
    const double divide_by = op == ReduceOp::kMean ? static_cast<double>(world_size_) : 1.0;
    return std::make_unique<StartedReduce>(ts[0], std::move(work), divide_by, failed);
  });
}

void DDPStrategy::broadcast(std::vector<at::Tensor>& tensors, int64_t src) {
  if (!impl_->pg || world_size_ == 1 || tensors.empty()) return;
  run_collective([this](const std::string& w, const std::exception& e) { collective_failed(w, e); }, "broadcast", [&] {
    std::vector<at::Tensor> views = gloo_transportable(tensors);
    if (views.size() > 1) {
      // One c10d broadcast takes one tensor per device; a list of shapes goes coalesced.
      torch::NoGradGuard no_grad;
      c10d::broadcast_coalesced(impl_->pg, views, 250u << 20, static_cast<int>(src));
      return;
    }
    c10d::BroadcastOptions opts;
    opts.rootRank = src;
    impl_->pg->broadcast(views, opts)->wait();
  });
}

std::string DDPStrategy::broadcast_object(const std::string& bytes, int64_t src) {
  if (!impl_->pg || world_size_ == 1) return bytes;
  std::vector<at::Tensor> size{at::full({1}, static_cast<int64_t>(bytes.size()), at::kLong)};
  broadcast(size, src);
  const int64_t n = size[0].item<int64_t>();
  std::vector<at::Tensor> data{at::empty({std::max<int64_t>(n, 1)}, at::kByte)};
  if (global_rank_ == src && n > 0) std::memcpy(data[0].data_ptr(), bytes.data(), bytes.size());
  broadcast(data, src);
  return std::string(static_cast<const char*>(data[0].data_ptr()), static_cast<size_t>(n));
}

std::vector<at::Tensor> DDPStrategy::all_gather(const at::Tensor& tensor) {
  if (!impl_->pg || world_size_ == 1) return {tensor};
  return run_collective([this](const std::string& w, const std::exception& e) { collective_failed(w, e); }, "all_gather", [&] {
    std::vector<at::Tensor> in = gloo_transportable({tensor.contiguous()});
    std::vector<std::vector<at::Tensor>> out(1);
    for (int64_t r = 0; r < world_size_; ++r) out[0].push_back(at::empty_like(in[0]));
    for (auto& t : out[0]) t = gloo_transportable({t})[0];
    impl_->pg->allgather(out, in)->wait();
    if (tensor.scalar_type() == at::kBFloat16) {
      for (auto& t : out[0]) t = t.view(at::kBFloat16);
    }
    return out[0];
  });
}

void DDPStrategy::save_checkpoint(const Checkpoint& checkpoint, const std::string& path) {
  const auto& volt_meta = checkpoint.meta.is_object() && checkpoint.meta.contains("volt") ? checkpoint.meta.at("volt")
                                                                                          : nlohmann::json();
  const bool weights_only = volt_meta.is_object() && volt_meta.value("weights_only", false);
  if (impl_->comm_hook && impl_->pg && !weights_only) {
    Checkpoint with_hook = checkpoint;
    add_comm_hook_state(with_hook);
    Strategy::save_checkpoint(with_hook, path);
  } else {
    Strategy::save_checkpoint(checkpoint, path);
  }
  barrier("save_checkpoint");
}

Checkpoint DDPStrategy::load_checkpoint(const std::string& path) {
  Checkpoint checkpoint = Strategy::load_checkpoint(path);
  if (impl_->comm_hook) restore_comm_hook_state(checkpoint, path);
  return checkpoint;
}

void DDPStrategy::add_comm_hook_state(Checkpoint& checkpoint) {
  CommHook& hook = *impl_->comm_hook;
  const std::map<std::string, at::Tensor> state = hook.state_dict();
  // Every rank's state (error feedback is per rank) goes into rank 0's file.
  const at::Tensor counts = at::full({1}, static_cast<int64_t>(state.size()), at::kLong);
  const auto all_counts = all_gather(counts);
  for (const auto& c : all_counts) {
    if (c.item<int64_t>() != static_cast<int64_t>(state.size())) {
      throw DistributedError(who() + ": the communication hook '" + hook.name() +
                             "' holds a different number of state tensors on each rank (" +
                             std::to_string(state.size()) + " here, " + std::to_string(c.item<int64_t>()) +
                             " on another); its state cannot be checkpointed.");
    }
  }
  for (const auto& [key, tensor] : state) {
    const auto gathered = all_gather(tensor.contiguous());
    for (size_t r = 0; r < gathered.size(); ++r) {
      checkpoint.tensors[kCommHookStatePrefix + std::to_string(r) + "." + key] = gathered[r];
    }
  }
  checkpoint.meta[kCommHookMetaKey] = {{"name", hook.name()}, {"world_size", world_size_}};
}

void DDPStrategy::restore_comm_hook_state(const Checkpoint& checkpoint, const std::string& path) {
  CommHook& hook = *impl_->comm_hook;
  if (!checkpoint.meta.is_object() || !checkpoint.meta.contains(kCommHookMetaKey)) return;
  const auto& saved = checkpoint.meta.at(kCommHookMetaKey);
  const std::string name = saved.is_object() ? saved.value("name", std::string()) : std::string();
  const int64_t saved_world = saved.is_object() ? saved.value("world_size", int64_t{-1}) : -1;
  if (name != hook.name() || saved_world != world_size_) {
    if (is_global_zero()) {
      std::cerr << "[volt] warning: checkpoint '" << path << "' holds the state of communication hook '" << name
                << "' on " << saved_world << " ranks; this run has '" << hook.name() << "' on " << world_size_
                << " ranks, so the hook starts from a fresh state.\n";
    }
    return;
  }
  const std::string prefix = kCommHookStatePrefix + std::to_string(global_rank_) + ".";
  std::map<std::string, at::Tensor> state;
  for (const auto& [key, tensor] : checkpoint.tensors) {
    if (key.compare(0, prefix.size(), prefix) == 0) state[key.substr(prefix.size())] = tensor;
  }
  hook.load_state_dict(state);
}

void DDPStrategy::on_exception() {
  if (subprocess_) subprocess_->on_stage_failure();
}

void DDPStrategy::teardown() {
  impl_->reducer.reset();
  impl_->sync = true;
  Strategy::teardown();
  raise_if_a_rank_failed();  // a rank that died after the last collective still fails the stage
}

std::shared_ptr<Strategy> make_ddp_strategy(const StrategyParts& parts) {
  DDPOptions o = parts.ddp;
  o.find_unused_parameters = o.find_unused_parameters || parts.spec.find_unused_parameters;
  return std::make_shared<DDPStrategy>(parts, o);
}

}  // namespace volt::strategies
