#include "volt/strategies/ddp_strategy.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <mutex>

#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>
#ifdef VOLT_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "volt/core/compat.h"
#if !VOLT_TORCH_VERSION_AT_LEAST(2, 3)
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#endif
#include "volt/core/error.h"
#include "volt/strategies/worker_group.h"
#include "strategies/detail/rendezvous_net.h"

namespace volt::strategies {
namespace {

using detail::is_loopback;
using detail::local_address_towards;
using detail::port_accepts;
using detail::resolve_error;

std::string first_line(const std::string& s) {
  const auto nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

std::string error_text(const std::exception& e) {
  std::string text = first_line(dynamic_cast<const c10::Error*>(&e) != nullptr
                                    ? dynamic_cast<const c10::Error*>(&e)->what_without_backtrace()
                                    : e.what());
  while (!text.empty() && (text.back() == '.' || text.back() == ' ')) text.pop_back();  // the caller goes on
  return text;
}

c10d::ReduceOp to_c10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMax: return c10d::ReduceOp::MAX;
    case ReduceOp::kMin: return c10d::ReduceOp::MIN;
    default: return c10d::ReduceOp::SUM;
  }
}

using Clock = std::chrono::steady_clock;

/// How often a waiting rank says whom it waits for.
constexpr std::chrono::seconds kWaitReportEvery{5};

long seconds_left(Clock::time_point deadline) {
  return static_cast<long>(std::max<int64_t>(
      0, std::chrono::duration_cast<std::chrono::seconds>(deadline - Clock::now()).count()));
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

struct DDPStrategy::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroup> pg;
  std::unique_ptr<c10d::Reducer> reducer;
  std::unique_ptr<WorkerGroup> workers;
  /// Rank 0's hold on MASTER_PORT while a file store serves the rendezvous (LibTorch < 2.3).
  std::unique_ptr<detail::LocalStoreLease> lease;
  /// Set by the monitor thread when a local rank died (the others are stopped by then).
  std::atomic<bool> rank_failed{false};
  mutable std::mutex report_mutex;
  std::string rank_report;
  bool sync = true;
  bool failed = false;
  std::string host = WorkerGroup::host_name();
};

DDPStrategy::DDPStrategy(const StrategyParts& parts, DDPOptions options)
    : Strategy(parts.accelerator, parts.precision, parts.environment, parts.checkpoint_io),
      impl_(std::make_unique<Impl>()),
      name_(parts.spec.name),
      launcher_(parts.spec.launcher),
      root_device_(parts.root_device),
      options_(std::move(options)) {
  connect(parts);
}

DDPStrategy::DDPStrategy(DDPOptions options, const std::string& name)
    : impl_(std::make_unique<Impl>()), root_device_(c10::kCPU), options_(std::move(options)) {
  const StrategySpec spec = strategy_spec(name);
  if (spec.name.rfind("ddp", 0) != 0) {
    throw ConfigError("DDPStrategy(options, \"" + name + "\"): '" + spec.name +
                      "' is not a ddp strategy. Use ddp, "
                      "ddp_spawn or one of their find_unused_parameters variants.");
  }
  name_ = spec.name;
  launcher_ = spec.launcher;
  options_.find_unused_parameters = options_.find_unused_parameters || spec.find_unused_parameters;
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
}

DDPStrategy::~DDPStrategy() {
  try {
    impl_->reducer.reset();
    if (impl_->workers) {
      if (impl_->failed) {
        impl_->workers->stop_all();
      } else if (auto failure = impl_->workers->wait()) {
        // The monitor usually reports first; this covers a failure after it stopped.
        std::cerr << "volt: " << failure->describe() << std::flush;
      }
      impl_->workers.reset();
    }
    impl_->pg.reset();
    impl_->store.reset();
    impl_->lease.reset();
  } catch (...) {
    // A destructor must not throw; the job's ranks are gone either way.
  }
}

std::string DDPStrategy::who() const {
  return "rank " + std::to_string(global_rank_) + " on host " + impl_->host;
}

void DDPStrategy::setup_environment() {
  Strategy::setup_environment();
  if (launcher_ == LauncherKind::kSubprocess && !environment_->creates_processes_externally() && !impl_->workers) {
    launch_local_ranks();
  }
  if (!impl_->pg) join_process_group();
}

void DDPStrategy::launch_local_ranks() {
  const std::vector<std::string> args = this_program_argv();
  impl_->workers = std::make_unique<WorkerGroup>();
  const auto& env = *environment_;
  for (int64_t local = 1; local < local_world_size_; ++local) {
    const WorkerSpec spec = torchrun_worker(args, node_rank_, local, local_world_size_, world_size_,
                                            env.main_address(), env.main_port(), "subprocess");
    impl_->workers->start(spec);
  }
  // Rank 0 trains in this process; a failed rank must not leave it waiting in a
  // collective until the timeout. The monitor reports it and stops the other ranks; their
  // sockets close, so rank 0's pending collective fails at once, and the next step or
  // collective raises the report (raise_if_a_rank_failed), which the Trainer reports and
  // the program's main turns into its exit code.
  Impl* impl = impl_.get();
  impl_->workers->monitor([impl](const WorkerExit& e) {
    {
      std::lock_guard<std::mutex> lock(impl->report_mutex);
      impl->rank_report = e.describe();
    }
    impl->rank_failed.store(true);
    std::cerr << "\nvolt: " << e.describe() << "volt: stopping the job (the other ranks were stopped).\n"
              << std::flush;
  });
}

void DDPStrategy::raise_if_a_rank_failed() const {
  if (!impl_->rank_failed.load(std::memory_order_relaxed)) return;
  std::string report;
  {
    std::lock_guard<std::mutex> lock(impl_->report_mutex);
    report = impl_->rank_report;
  }
  while (!report.empty() && report.back() == '\n') report.pop_back();
  throw DistributedError("a rank of this job failed, so the job was stopped: " + report);
}

void DDPStrategy::collective_failed(const std::string& what, const std::exception& e) const {
  if (impl_->workers) {
    // A peer's death shows here first as a closed connection; the monitor names it.
    for (int i = 0; i < 50 && !impl_->rank_failed.load(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    raise_if_a_rank_failed();
  }
  throw DistributedError(who() + ": " + what + " failed: " + error_text(e) +
                         " (a peer rank died or did not reach the same call within the process-group timeout)");
}

void DDPStrategy::join_process_group() {
  const auto& env = *environment_;
  const std::string addr = env.main_address();
  const int port = env.main_port();
  const std::string where = addr + ":" + std::to_string(port);
  if (port <= 0 || port > 65535) {
    throw ConfigError("MASTER_PORT=" + std::to_string(port) + " is not a TCP port. Use a free port in 1..65535.");
  }
  if (const std::string why = resolve_error(addr); !why.empty()) {
    throw DistributedError(who() + ": MASTER_ADDR=" + addr + " does not resolve to an address (" + why +
                           "). Give rank 0's node as an IP address, or a name this host can look up (DNS, "
                           "/etc/hosts).");
  }
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(port);
  // Under torchrun's static rendezvous its agent already serves the store on this port.
  opts.isServer = global_rank_ == 0 && !env.joins_launcher_store();
  opts.numWorkers = static_cast<std::size_t>(world_size_);
  opts.waitWorkers = false;  // the layout check below waits, with a better message
  opts.timeout = options_.rendezvous_timeout;
#if VOLT_TORCH_VERSION_AT_LEAST(2, 1)
  opts.useLibUV = false;  // Debian's LibTorch 2.x has no libuv
#endif
  const auto deadline = Clock::now() + options_.rendezvous_timeout;
#if VOLT_TORCH_VERSION_AT_LEAST(2, 3)
  const bool file_store = false;
#else
  // LibTorch < 2.3's TCPStore listens on every interface and cannot be given a socket. When
  // every rank is on this host (a loopback MASTER_ADDR), a file store in a private folder
  // serves the rendezvous instead and nothing listens beyond the loopback address; a job
  // across hosts still gets the TCPStore (docs/robustness.md).
  const bool file_store = !env.joins_launcher_store() && is_loopback(addr);
  std::string store_file;
  if (file_store && opts.isServer) {
    impl_->lease = std::make_unique<detail::LocalStoreLease>();
    store_file = impl_->lease->open_as_rank0(who(), addr, port);
  }
#endif
  if (opts.isServer) {
#if VOLT_TORCH_VERSION_AT_LEAST(2, 3)
    // The store listens on MASTER_ADDR's address only (a loopback address stays local);
    // TCPStore takes over a socket bound here.
    const detail::ListenAddress only = detail::specific_listen_address(addr, port);
    if (only.family != AF_UNSPEC) {
      const int fd = detail::listen_on(only);
      if (fd >= 0) {
        opts.masterListenFd = fd;
      } else if (errno == EADDRINUSE) {
        throw DistributedError(who() + " could not open the rendezvous at " + where + ": " + std::strerror(errno) +
                               ". The port is in use (another job, or a previous run still exiting): set "
                               "MASTER_PORT to a free port, or leave it unset for a single-node job.");
      }
      // Another errno (the address is not this host's, e.g. behind NAT): every interface.
    }
#endif
  } else {
    // Rank 0 may start later: wait for its store, saying so every few seconds.
    auto next_report = Clock::now() + kWaitReportEvery;
    while (!port_accepts(addr, port)) {
      if (Clock::now() >= deadline) {
        throw DistributedError(who() + " waited " + std::to_string(options_.rendezvous_timeout.count() / 1000) +
                               " s for rank 0's rendezvous at " + where + ", which never opened. Start rank 0 "
                               "(MASTER_ADDR must name its node), or raise rendezvous_timeout_s.");
      }
      if (Clock::now() >= next_report) {
        std::cerr << "volt: " << who() << " waits for rank 0 (the rendezvous at " << where << " is not open yet); "
                  << seconds_left(deadline) << " s left\n"
                  << std::flush;
        next_report += kWaitReportEvery;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
#if !VOLT_TORCH_VERSION_AT_LEAST(2, 3)
    if (file_store) store_file = detail::LocalStoreLease::store_path_for(who(), addr, port);
#endif
  }
  try {
#if !VOLT_TORCH_VERSION_AT_LEAST(2, 3)
    if (file_store) {
      auto files = c10::make_intrusive<c10d::FileStore>(store_file, static_cast<int>(world_size_));
      files->setTimeout(options_.rendezvous_timeout);
      impl_->store = files;
    } else {
      impl_->store = c10::make_intrusive<c10d::TCPStore>(addr, opts);
    }
#else
    (void)file_store;
    impl_->store = c10::make_intrusive<c10d::TCPStore>(addr, opts);
#endif
    if (env.joins_launcher_store()) {
      // The launcher's store outlives this job's process group: each group of this process
      // (a second Trainer, say) gets keys of its own, numbered alike on every rank.
      static std::atomic<int> groups{0};
      impl_->store = c10::make_intrusive<c10d::PrefixStore>(
          env.store_prefix() + "/volt_group_" + std::to_string(groups++), impl_->store);
    }
  } catch (const std::exception& e) {
    const std::string msg = error_text(e);
    if (opts.isServer) {
      throw DistributedError(who() + " could not open the rendezvous at " + where + ": " + msg +
                             ". The port may be in use (another job, or a previous run still exiting): set "
                             "MASTER_PORT to a free port, or leave it unset for a single-node job.");
    }
    throw DistributedError(who() + " could not reach the rendezvous at " + where + " within " +
                           std::to_string(options_.rendezvous_timeout.count() / 1000) + " s: " + msg +
                           ". Check that MASTER_ADDR/MASTER_PORT name rank 0's node, that it is running, and that "
                           "no firewall blocks the port.");
  }
  // Every rank announces its view of the job; a disagreement fails here, not as a hang.
  const std::string mine = std::to_string(world_size_) + " " + impl_->host + " " + std::to_string(::getpid());
  try {
    if (impl_->store->add("volt/rank/" + std::to_string(global_rank_) + "/count", 1) > 1) {
      throw DistributedError(who() + ": another process already joined " + where + " as rank " +
                             std::to_string(global_rank_) + ". Every process needs its own RANK.");
    }
    impl_->store->set("volt/rank/" + std::to_string(global_rank_), std::vector<uint8_t>(mine.begin(), mine.end()));
    // Wait for every rank's announcement; every few seconds, say who is missing.
    auto next_report = Clock::now() + kWaitReportEvery;
    std::vector<bool> checked(static_cast<size_t>(world_size_), false);
    for (;;) {
      std::vector<int64_t> missing;
      for (int64_t r = 0; r < world_size_; ++r) {
        if (checked[static_cast<size_t>(r)]) continue;
        const std::string key = "volt/rank/" + std::to_string(r);
        if (!impl_->store->check({key})) {
          missing.push_back(r);
          continue;
        }
        const std::vector<uint8_t> theirs = impl_->store->get(key);
        const std::string text(theirs.begin(), theirs.end());
        const int64_t their_size = std::stoll(text.substr(0, text.find(' ')));
        if (their_size != world_size_) {
          throw DistributedError(who() + " has WORLD_SIZE=" + std::to_string(world_size_) + " but rank " +
                                 std::to_string(r) + " (" + text.substr(text.find(' ') + 1) + ") has WORLD_SIZE=" +
                                 std::to_string(their_size) + ". Every rank must be started with the same world size.");
        }
        checked[static_cast<size_t>(r)] = true;
      }
      if (missing.empty()) break;
      raise_if_a_rank_failed();
      std::string names;
      for (size_t i = 0; i < missing.size() && i < 16; ++i) names += (i ? ", " : "") + std::to_string(missing[i]);
      if (missing.size() > 16) names += ", ... (" + std::to_string(missing.size()) + " in all)";
      const std::string whom = (missing.size() == 1 ? "rank " : "ranks ") + names + " of " + std::to_string(world_size_);
      if (Clock::now() >= deadline) {
        throw DistributedError(who() + " waited " + std::to_string(options_.rendezvous_timeout.count() / 1000) +
                               " s at " + where + " for " + whom + ", which never joined. Start every rank, or "
                               "check WORLD_SIZE.");
      }
      if (Clock::now() >= next_report) {
        std::cerr << "volt: " << who() << " waits at " << where << " for " << whom << " (not joined yet); "
                  << seconds_left(deadline) << " s left\n"
                  << std::flush;
        next_report += kWaitReportEvery;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  } catch (const DistributedError&) {
    throw;
  } catch (const std::exception& e) {
    throw DistributedError(who() + ": rendezvous at " + where + " failed: " + error_text(e));
  }

#ifdef VOLT_WITH_NCCL
  if (options_.backend == "nccl") {
    try {
      auto nccl_opts = c10d::ProcessGroupNCCL::Options::create();
      nccl_opts->timeout = options_.timeout;
      auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(impl_->store, static_cast<int>(global_rank_),
                                                              static_cast<int>(world_size_), nccl_opts);
      auto pg = c10::make_intrusive<c10d::ProcessGroup>(impl_->store, static_cast<int>(global_rank_),
                                                        static_cast<int>(world_size_));
      pg->setDefaultBackend(c10d::ProcessGroup::BackendType::NCCL);
      pg->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL, nccl);
      impl_->pg = pg;
    } catch (const std::exception& e) {
      throw DistributedError(who() + " could not create the NCCL process group (" + where + "): " + error_text(e));
    }
    return;
  }
#endif
  auto gloo_opts = c10d::ProcessGroupGloo::Options::create(options_.timeout);
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  try {
    if (ifname != nullptr && *ifname != '\0') {
      gloo_opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    } else if (is_loopback(addr)) {
      gloo_opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    } else {
      std::string local = local_address_towards(addr, port);
      if (local.empty()) local = impl_->host;
      gloo_opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(local));
    }
    gloo_opts->threads = 1;
    auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, static_cast<int>(global_rank_),
                                                            static_cast<int>(world_size_), gloo_opts);
#if VOLT_TORCH_VERSION_AT_LEAST(2, 0)
    auto pg = c10::make_intrusive<c10d::ProcessGroup>(impl_->store, static_cast<int>(global_rank_),
                                                      static_cast<int>(world_size_));
    pg->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
    pg->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, gloo);
    pg->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::GLOO, gloo);
    impl_->pg = pg;
#else
    impl_->pg = gloo;
#endif
  } catch (const std::exception& e) {
    throw DistributedError(who() + " could not connect the Gloo process group (" + where + ", world size " +
                           std::to_string(world_size_) + "): " + error_text(e) +
                           (ifname != nullptr ? "" : ". Set GLOO_SOCKET_IFNAME to the network interface the ranks "
                                                     "share if this host has several."));
  }
}

void DDPStrategy::setup(Module& module) {
  Strategy::setup(module);
  std::vector<at::Tensor> state;
  std::vector<at::Tensor> params;
  std::unordered_map<size_t, std::string> names;
  for (const auto& item : module.named_parameters()) {
    state.push_back(item.value());
    if (item.value().requires_grad()) {
      names[params.size()] = item.key();
      params.push_back(item.value());
    }
  }
  for (const auto& b : module.buffers()) state.push_back(b);
  if (world_size_ > 1 && !state.empty()) {
    try {
      torch::NoGradGuard no_grad;
      c10d::broadcast_coalesced(impl_->pg, gloo_transportable(state), 250u << 20, 0);
    } catch (const std::exception& e) {
      throw DistributedError(who() + ": broadcasting the initial parameters from rank 0 failed: " + error_text(e));
    }
  }
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
  impl_->reducer = std::make_unique<c10d::Reducer>(params, buckets, limits, impl_->pg, sparse,
                                                   static_cast<int64_t>(cap), options_.find_unused_parameters,
                                                   options_.gradient_as_bucket_view, names,
                                                   static_cast<int64_t>(first));
  const bool any_bf16 = std::any_of(params.begin(), params.end(),
                                    [](const at::Tensor& t) { return t.scalar_type() == at::kBFloat16; });
  if (any_bf16 && options_.backend == "gloo") {
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

double DDPStrategy::reduce(double value, ReduceOp op) {
  if (!impl_->pg || world_size_ == 1) return value;
  const at::Tensor t = all_reduce(at::full({1}, value, at::TensorOptions().dtype(at::kDouble)), op);
  return t.item<double>();
}

bool DDPStrategy::reduce_boolean_decision(bool decision, bool all) {
  if (!impl_->pg || world_size_ == 1) return decision;
  const double votes = reduce(decision ? 1.0 : 0.0, ReduceOp::kSum);
  return all ? votes >= static_cast<double>(world_size_) : votes > 0.0;
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
  Strategy::save_checkpoint(checkpoint, path);
  barrier("save_checkpoint");
}

void DDPStrategy::on_exception() {
  impl_->failed = true;
  if (impl_->workers) {
    // This rank's error is often the echo of another rank's death: name that one too.
    if (impl_->rank_failed.load()) {
      // The monitor has reported it already.
    } else if (auto f = impl_->workers->failure(std::chrono::seconds(1))) {
      std::cerr << "\nvolt: " << f->describe() << std::flush;
    }
    impl_->workers->stop_all();
  }
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
