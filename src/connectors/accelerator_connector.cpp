#include "volt/connectors/accelerator_connector.h"

#include <algorithm>
#include <sstream>

#include <nlohmann/json.hpp>


#include <cstdlib>
#include <typeinfo>

#include "connectors/detail/accelerator_connector_plugins.h"
#include "volt/accelerators/accelerator_registry.h"
#include "volt/accelerators/cpu_accelerator.h"
#include "volt/accelerators/cuda_accelerator.h"
#include "volt/accelerators/devices.h"
#include "volt/accelerators/tpu_accelerator.h"
#include "volt/checkpoint_io/async_checkpoint_io.h"
#include "volt/checkpoint_io/checkpoint_io_registry.h"
#include "volt/core/compat.h"
#include "volt/core/error.h"
#include "volt/core/registry.h"
#include "volt/core/trainer_flags.h"
#include "volt/environments/environment_registry.h"
#include "volt/precision/precision_registry.h"
#include "volt/strategies/comm_hooks.h"
#include "volt/strategies/strategy_registry.h"

namespace volt::connectors {
namespace {

using detail::check_plugin_conflicts;
using detail::class_name;

using accelerators::DevicesSpec;
using accelerators::HardwareProbe;

bool contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

/// Step 3: which accelerator. Explicit requests never fall back silently.
std::string choose_accelerator(const std::string& flag, const HardwareProbe& hw) {
  const std::string key = registry_key(flag);  // "CPU" is "cpu", as in Lightning
  const std::string name = key == "gpu" ? "cuda" : key;
  if (name == "auto") {
    // The available accelerator of the highest priority: tpu, then cuda, then cpu.
    std::string best = "cpu";
    int best_priority = -1;
    for (const auto& e : accelerators::accelerator_registry().entries()) {
      if (e.info.auto_priority > best_priority && (!e.info.available || e.info.available(hw))) {
        best = e.key;
        best_priority = e.info.auto_priority;
      }
    }
    return best;
  }
  if (name == "cpu") return name;
  if (name == "cuda") {
    if (hw.cuda_devices == 0) {
      const std::string why = accelerators::CUDAAccelerator::compiled_with_cuda() || hw.source.rfind("assumed", 0) == 0
                                  ? "no GPU is visible" + (hw.cuda_visible_devices.empty()
                                                               ? std::string()
                                                               : " (CUDA_VISIBLE_DEVICES=" + hw.cuda_visible_devices + ")")
                                  : "this Volt was built against a LibTorch without CUDA (" +
                                        std::string(compat::torch_version()) + ")";
      throw NotSupportedError("accelerator='" + flag + "' asks for a GPU, but " + why +
                              ". Use accelerator=\"cpu\" (or \"auto\"), or run where a GPU is visible.");
    }
    return name;
  }
  if (name == "tpu") {
    if (!hw.tpu.present) {
      throw NotSupportedError("accelerator='tpu' asks for a TPU, but none was found: no TPU_ACCELERATOR_TYPE, TPU_NAME, "
                              "COLAB_TPU_ADDR, TPU_WORKER_ID or PJRT_DEVICE=TPU variable, no /dev/accel* or /dev/vfio "
                              "device, no libtpu.so on LD_LIBRARY_PATH or TPU_LIBRARY_PATH, and no TPU runtime asked "
                              "for (VOLT_TPU_RUNTIME_LIBRARY and VOLT_TPU_EMULATION are unset). Use "
                              "accelerator=\"cpu\" or \"auto\", run on a TPU VM, Colab or Kaggle with "
                              "VOLT_TPU_RUNTIME_LIBRARY set, or set VOLT_TPU_EMULATION=lazy to emulate a TPU host on "
                              "the CPU (docs/tpu.md).");
    }
    return name;
  }
  // A registered accelerator (ConfigError listing the known names when it is not one).
  const auto entry = accelerators::accelerator_registry().entry(flag);
  if (entry.info.available && !entry.info.available(hw)) {
    throw NotSupportedError("accelerator='" + flag + "' (" + entry.description + ") is not available here (hardware " +
                            hw.source + "). Use accelerator=\"cpu\" (or \"auto\"), or run where it is.");
  }
  return entry.key;
}

/// The device family ("cpu", "cuda", "tpu") of an accelerator: its registry entry's, or, for
/// an object of an unregistered class, that of the devices it hands out.
std::string device_type_of(const std::string& name, const accelerators::Accelerator* object,
                           const std::vector<int64_t>& ids) {
  auto& registry = accelerators::accelerator_registry();
  if (registry.contains(name)) return registry.info(name).device_type;
  const auto devices = object->get_parallel_devices(ids);
  if (devices.empty() || devices.front().is_cpu()) return "cpu";
  if (devices.front().is_cuda()) return "cuda";
  return "tpu";
}

/// Step 5: which strategy, and whether it fits the accelerator and the layout. `object`: a
/// strategy object given instead of the flag (its registry spec, or one made from it).
strategies::StrategySpec choose_strategy(const std::string& flag, const strategies::Strategy* object,
                                         const std::string& accelerator, int64_t devices, int64_t num_nodes,
                                         std::vector<std::string>& warnings) {
  strategies::StrategySpec spec;
  std::string name = registry_key(flag);  // "DDP" is "ddp", as in Lightning
  if (object != nullptr) {
    name = registry_key(object->name());
    if (strategies::strategy_registry().contains(name)) {
      spec = strategies::strategy_spec(name);
    } else {
      // A class of the user's own under a name no registry entry describes: one process per
      // device on the accelerator given, started by whoever starts this program.
      spec.name = name;
      spec.description = "a strategy object (" + class_name(*object) + ")";
      spec.accelerators = {accelerator};
    }
  } else {
    if (name == "dp" && accelerator == "cpu") {
      // DP drives several GPUs from one process; on CPU the same job is ddp (Lightning Fabric).
      warnings.push_back(
          "strategy=\"dp\" needs CUDA devices; on CPU Volt runs strategy=\"ddp\" instead (one "
          "process per device, the same averaged gradients).");
      name = "ddp";
    }
    if (name == "auto") {
      const bool one = devices == 1 && num_nodes == 1;
      name = accelerator == "tpu" ? (one ? "single_xla" : "xla") : (one ? "single_device" : "ddp");
    }
    // An unknown name is reported as it was given.
    spec = strategies::strategy_spec(name == registry_key(flag) ? flag : name);
  }
  if (!contains(spec.accelerators, accelerator)) {
    throw ConfigError("strategy='" + name + "' runs on " + join(spec.accelerators) + ", but the accelerator is " +
                      accelerator + ". " +
                      (accelerator == "tpu" ? "Use strategy=\"xla\" (or \"single_xla\" for one device) on TPUs."
                                            : "Use strategy=\"ddp\" (or \"auto\")."));
  }
  if (spec.single_device && (devices != 1 || num_nodes != 1)) {
    throw ConfigError("strategy='" + name + "' runs one process on one device, but devices=" + std::to_string(devices) +
                      " and num_nodes=" + std::to_string(num_nodes) + " ask for " +
                      std::to_string(devices * num_nodes) + ". Use devices=1 and num_nodes=1, or strategy=\"" +
                      (accelerator == "tpu" ? "xla" : "ddp") + "\".");
  }
  if (spec.one_process_per_node && num_nodes != 1) {
    throw ConfigError("strategy='" + name + "' splits batches over the GPUs of one machine; num_nodes=" +
                      std::to_string(num_nodes) + " needs strategy=\"ddp\".");
  }
  return spec;
}

/// Step 6: what the precision means on this accelerator.
std::string fit_precision(const std::string& precision, const std::string& accelerator, const HardwareProbe& hw,
                          std::vector<std::string>& warnings) {
  if (accelerator == "cpu" && precision == "16-mixed") {
    warnings.push_back("precision=\"16-mixed\" on CPU: CPU autocast computes in bfloat16, so Volt uses "
                       "\"bf16-mixed\" (as Lightning does).");
    return "bf16-mixed";
  }
  if (accelerator == "tpu" && precision != "32-true" && precision != "bf16-true") {
    const std::string why = precision == "64-true" ? "TPUs have no float64 arithmetic"
                            : precision.rfind("16", 0) == 0
                                ? "TPUs compute in bfloat16, not float16"
                                : "autocast regions are not recorded into the lazy-tensor graphs of Volt's TPU path";
    throw ConfigError("precision='" + precision + "' on TPU: " + why +
                      ". Accepted on TPU: 32-true, bf16-true (bfloat16 weights and inputs).");
  }
  if (accelerator == "cpu" && precision == "16-true" && !compat::kCpuHalfMatmul) {
    throw ConfigError(std::string("precision='16-true' on CPU needs float16 matrix products, which LibTorch ") +
                      compat::torch_version() + " lacks on CPU (they arrived in 2.1). Use precision=\"bf16-true\" "
                      "or \"bf16-mixed\".");
  }
  if (accelerator == "cuda" && precision.rfind("bf16", 0) == 0 && !hw.cuda_bf16) {
    throw ConfigError("precision='" + precision + "' needs GPUs that compute in bfloat16 (compute capability 8.0, "
                      "Ampere, or newer), and at least one visible GPU is older. Use precision=\"16-mixed\".");
  }
  return precision;
}

/// The ddp family's settings; nccl only for CUDA in a LibTorch that has it.
strategies::DDPOptions ddp_options(const TrainerOptions& o, const std::string& accelerator,
                                   const strategies::StrategySpec& spec) {
  strategies::DDPOptions d;
  const std::string& b = o.process_group_backend;  // auto, gloo or nccl (the flag table's check)
#ifdef VOLT_WITH_NCCL
  const bool have_nccl = true;
#else
  const bool have_nccl = false;
#endif
  if (b == "nccl" && accelerator != "cuda") {
    throw ConfigError("process_group_backend='nccl' needs CUDA devices, but the accelerator is " + accelerator +
                      ". Use process_group_backend='gloo' (or 'auto') on " + accelerator + ".");
  }
  if (b == "nccl" && !have_nccl) {
    throw ConfigError("process_group_backend='nccl' was asked for, but this LibTorch has no NCCL. Use 'gloo'.");
  }
  d.backend = b == "auto" ? (accelerator == "cuda" && have_nccl ? "nccl" : "gloo") : b;
  d.timeout = std::chrono::milliseconds(static_cast<int64_t>(o.process_group_timeout_s * 1000.0));
  d.rendezvous_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.rendezvous_timeout_s * 1000.0));
  d.bucket_cap_mb = o.ddp_bucket_cap_mb;
  d.first_bucket_cap_mb = o.ddp_first_bucket_cap_mb;
  d.find_unused_parameters = spec.find_unused_parameters;
  d.gradient_as_bucket_view = o.ddp_gradient_as_bucket_view;
  d.comm_hook = o.ddp_comm_hook;
  d.powersgd.matrix_approximation_rank = o.ddp_powersgd_matrix_approximation_rank;
  d.powersgd.start_powerSGD_iter = o.ddp_powersgd_start_powerSGD_iter;
  d.powersgd.min_compression_rate = o.ddp_powersgd_min_compression_rate;
  d.powersgd.use_error_feedback = o.ddp_powersgd_use_error_feedback;
  d.powersgd.warm_start = o.ddp_powersgd_warm_start;
  d.powersgd.orthogonalization_epsilon = o.ddp_powersgd_orthogonalization_epsilon;
  strategies::check_comm_hook(d.comm_hook, d.powersgd, "ddp.comm_hook");
  return d;
}

}  // namespace

AcceleratorConnector::AcceleratorConnector(const TrainerOptions& options, PluginObjects plugins)
    : AcceleratorConnector(options, Environ::current(), HardwareProbe::detect(Environ::current()), std::move(plugins)) {
}

AcceleratorConnector::AcceleratorConnector(const TrainerOptions& options, const Environ& env, const HardwareProbe& hw,
                                           PluginObjects plugins)
    : plugins_(std::move(plugins)) {
  Plan& p = plan_;
  p.hardware = hw.source;
  // 0. Plug-in objects against each other and against the options.
  check_plugin_conflicts(options, plugins_);
  const strategies::Strategy* strategy_object = plugins_.strategy.get();
  std::shared_ptr<accelerators::Accelerator> accelerator_object =
      plugins_.accelerator ? plugins_.accelerator : (strategy_object ? strategy_object->accelerator_part() : nullptr);
  std::shared_ptr<precision::Precision> precision_object =
      !plugins_.precisions.empty() ? plugins_.precisions.front()
                                   : (strategy_object ? strategy_object->precision_part() : nullptr);
  std::shared_ptr<environments::ClusterEnvironment> environment_object =
      !plugins_.environments.empty() ? plugins_.environments.front()
                                     : (strategy_object ? strategy_object->environment_part() : nullptr);
  // 1. Spellings that are wrong whatever the hardware.
  const std::string precision =
      precision_object ? precision_object->name() : precision::normalize_precision(options.precision, &p.warnings);
  const DevicesSpec devices = DevicesSpec::parse(options.devices);
  // The flag table's checks of the flags read here (the Trainer ran them all; volt plan did not).
  for (const char* flag : {"num_nodes", "num_threads", "process_group_backend"}) check_trainer_flag(options, flag);
  p.checkpoint_io = !plugins_.checkpoint_ios.empty() || (strategy_object && strategy_object->checkpoint_io_part())
                        ? "object"
                        : checkpoint_io::checkpoint_io_registry().entry(options.checkpoint_io).key;
  // 2-3. The accelerator, built here once through its registry (or the object given), then
  // the devices it resolves.
  p.num_threads = options.num_threads > 0 ? options.num_threads : hw.cpu_cores;
  p.async_checkpoint = options.async_checkpoint;
  if (accelerator_object) {
    if (!accelerator_object->is_available()) {
      throw NotSupportedError("the accelerator object '" + accelerator_object->name() + "' (" +
                              class_name(*accelerator_object) + ") says its hardware is not available here.");
    }
    p.accelerator = accelerator_object->name();
    accelerator_ = accelerator_object;
  } else {
    p.accelerator = choose_accelerator(options.accelerator, hw);
    accelerator_ =
        accelerators::accelerator_registry().create(p.accelerator, accelerators::AcceleratorContext{hw, p.num_threads});
  }
  p.device_ids = accelerator_->parse_devices(devices);
  p.num_devices = static_cast<int64_t>(p.device_ids.size());
  p.num_nodes = options.num_nodes;
  const std::string type = device_type_of(p.accelerator, accelerator_.get(), p.device_ids);
  std::shared_ptr<accelerators::TpuRuntime> tpu_runtime;
  if (const auto* tpu = dynamic_cast<const accelerators::TPUAccelerator*>(accelerator_.get())) {
    p.tpu_platform = tpu->host().platform;
    tpu_runtime = tpu->runtime();
    p.tpu_runtime = tpu_runtime ? tpu_runtime->spec().to_string() : accelerators::TpuRuntimeSpec{}.to_string();
    if (tpu_runtime) {
      p.tpu_runtime_info = tpu_runtime->describe();
      for (int64_t id : p.device_ids) {
        if (id >= tpu_runtime->device_count()) {
          throw ConfigError("devices=" + options.devices + " asks for TPU device " + std::to_string(id) +
                            ", but the TPU runtime (" + tpu_runtime->describe() + ") has devices 0 to " +
                            std::to_string(tpu_runtime->device_count() - 1) + ".");
        }
      }
    } else {
      p.tpu_runtime_info =
          "none: training needs VOLT_TPU_RUNTIME_LIBRARY (a TPU runtime library) or "
          "VOLT_TPU_EMULATION=lazy (docs/tpu.md)";
    }
  }

  // 4. The strategy and its launcher.
  spec_ = choose_strategy(options.strategy, strategy_object, type, p.num_devices, p.num_nodes, p.warnings);
  const auto& spec = spec_;
  p.strategy = spec.name;
  p.find_unused_parameters = spec.find_unused_parameters;
  p.num_processes = spec.one_process_per_node ? 1 : p.num_devices;
  p.world_size = p.num_processes * p.num_nodes;

  const bool on_host_cores =
      type == "cpu" || (tpu_runtime && tpu_runtime->spec().kind == accelerators::TpuRuntimeSpec::Kind::kEmulation);
  if (options.num_threads == 0 && p.num_processes > 1 && on_host_cores) {
    // Processes of one node share its cores (so do emulated TPU devices); more threads
    // than cores slows every rank.
    p.num_threads = std::max<int64_t>(1, hw.cpu_cores / p.num_processes);
  }
  if (auto* cpu = dynamic_cast<accelerators::CPUAccelerator*>(accelerator_.get()); cpu && !accelerator_object) {
    cpu->set_num_threads(p.num_threads);
  }
  if (p.num_processes > hw.cpu_cores && type == "cpu") {
    p.warnings.push_back(std::to_string(p.num_processes) + " processes per node on " + std::to_string(hw.cpu_cores) +
                         " CPU core(s): the ranks will compete for cores and run slower than fewer would.");
  }
  p.ddp = ddp_options(options, type, spec);
  p.fsdp.sharding_strategy = strategies::parse_sharding_strategy(options.fsdp_sharding_strategy);
  strategies::check_auto_wrap_policy(options.fsdp_auto_wrap_policy);
  p.fsdp.auto_wrap_policy = options.fsdp_auto_wrap_policy;
  if (options.fsdp_state_dict_type != "full" && options.fsdp_state_dict_type != "sharded") {
    throw ConfigError("fsdp.state_dict_type='" + options.fsdp_state_dict_type +
                      "' is not known. Use full (one checkpoint file in the ordinary layout) or sharded (a folder "
                      "with one file per rank).");
  }
  p.fsdp.state_dict_type = options.fsdp_state_dict_type;
  p.fsdp.limit_all_gathers = options.fsdp_limit_all_gathers;
  p.fsdp.cpu_offload = options.fsdp_cpu_offload;
  if (spec.name == "fsdp") strategies::check_cpu_offload(p.fsdp);
  // A strategy object (FSDPStrategy(options)) may run on one process: its pieces are then whole.
  if (spec.name == "fsdp" && p.world_size < 2 && strategy_object == nullptr) {
    throw ConfigError("strategy='fsdp' shards the model over several processes, but devices=" +
                      std::to_string(p.num_devices) + " and num_nodes=" + std::to_string(p.num_nodes) +
                      " make one. Use devices=2 or more (or num_nodes), or strategy=\"single_device\" for one process.");
  }
  if (!options.ddp_comm_hook.empty() && p.strategy.rfind("ddp", 0) != 0) {
    // Lightning takes a hook only in DDPStrategy's constructor; a flag given to another strategy would be ignored.
    p.warnings.push_back("ddp.comm_hook='" + options.ddp_comm_hook + "' has no effect: the strategy is " + p.strategy +
                         ", and communication hooks apply to the ddp strategies only. Use strategy='ddp' (or "
                         "ddp_spawn) with several devices, or drop ddp.comm_hook.");
  }

  // 5. Precision on this accelerator (a plug-in object is taken as it is).
  p.precision = precision_object ? precision : fit_precision(precision, type, hw, p.warnings);

  // 6. The cluster environment, checked against the layout.
  environments::EnvironmentOptions env_options;
  env_options.choice = options.cluster_environment;
  env_options.slurm.auto_detect = options.slurm_auto_detect;
  env_options.slurm.auto_requeue = options.slurm_auto_requeue;
  env_options.slurm.requeue_signal = options.slurm_requeue_signal;
  env_options.slurm.requeue_command = options.slurm_requeue_command;
  const auto cluster = environment_object
                           ? environment_object
                           : environments::select_environment(env, env_options, type == "tpu" ? &hw.tpu : nullptr);
  p.cluster_env = cluster->name();
  p.processes_started_externally = cluster->creates_processes_externally();
  cluster->validate(p.num_processes, p.num_nodes);
  if (p.processes_started_externally) {
    if (cluster->world_size() != p.world_size) {
      throw ConfigError("the " + p.cluster_env + " environment started " + std::to_string(cluster->world_size()) +
                        " process(es), but devices=" + std::to_string(p.num_devices) + " and num_nodes=" +
                        std::to_string(p.num_nodes) + " make a world of " + std::to_string(p.world_size) +
                        ". Start one process per device on every node (e.g. torchrun --nproc-per-node=" +
                        std::to_string(p.num_processes) + " --nnodes=" + std::to_string(p.num_nodes) +
                        "), or change devices/num_nodes to match.");
    }
    // A worker the spawn launcher started has the launcher's variables plus VOLT_SPAWN_DIR.
    if (spec.launcher == strategies::LauncherKind::kSpawn && !env.has("VOLT_SPAWN_DIR")) {
      throw ConfigError("strategy='" + spec.name + "' spawns its own worker processes, but the " + p.cluster_env +
                        " environment already started " + std::to_string(cluster->world_size()) +
                        " processes. Use strategy=\"ddp\" under a launcher.");
    }
    p.launcher = "none";
    p.global_rank = cluster->global_rank();
    p.local_rank = cluster->local_rank();
    p.node_rank = cluster->node_rank();
  } else {
    p.launcher = strategies::to_string(spec.launcher);
    p.node_rank = cluster->node_rank();
    p.local_rank = p.cluster_env == "tpu" ? cluster->local_rank() : 0;
    p.global_rank = p.node_rank * p.num_processes + p.local_rank;
    if (p.node_rank >= p.num_nodes) {
      throw ConfigError("this machine has node rank " + std::to_string(p.node_rank) + " (NODE_RANK/GROUP_RANK), but "
                        "num_nodes=" + std::to_string(p.num_nodes) + ". Node ranks run from 0 to num_nodes - 1.");
    }
    if (p.num_nodes > 1 && p.cluster_env == "default") {
      p.warnings.push_back("num_nodes=" + std::to_string(p.num_nodes) + " without a cluster scheduler: start the "
                           "same command on every node with NODE_RANK=0.." + std::to_string(p.num_nodes - 1) +
                           " and MASTER_ADDR/MASTER_PORT of node 0 (now " + cluster->main_address() + ":" +
                           std::to_string(cluster->main_port()) + ").");
    }
  }
  p.main_address = cluster->main_address();
  p.main_port = cluster->main_port();
  p.launcher_store = cluster->joins_launcher_store();
  p.store_prefix = cluster->store_prefix();
  if (p.num_processes > hw.cpu_cores && type == "cpu" && !options.allow_cpu_oversubscription &&
      !p.processes_started_externally) {
    // Volt would start these processes itself; a launcher's processes already exist.
    throw ConfigError("devices=" + options.devices + " asks for " + std::to_string(p.num_processes) +
                      " processes per node on CPU, but this machine has " + std::to_string(hw.cpu_cores) +
                      " core(s). Use devices=" + std::to_string(hw.cpu_cores) +
                      " or fewer, or set allow_cpu_oversubscription=true (--trainer.allow_cpu_oversubscription "
                      "true) to run them anyway.");
  }

  // 7. Devices as names, and this process's own.
  for (const auto& d : accelerator_->get_parallel_devices(p.device_ids)) {
    p.parallel_devices.push_back(type == "cpu" ? "cpu" : d.str());
  }
  const size_t root = spec.one_process_per_node ? 0 : static_cast<size_t>(p.local_rank);
  if (root >= p.parallel_devices.size()) {
    throw ConfigError("local rank " + std::to_string(p.local_rank) + " has no device: devices=" + options.devices +
                      " gives " + std::to_string(p.parallel_devices.size()) + " per node.");
  }
  p.root_device = p.parallel_devices[root];
}

std::shared_ptr<strategies::Strategy> AcceleratorConnector::create_strategy() const {
  const Plan& p = plan_;
  const auto* object = plugins_.strategy.get();
  if (object != nullptr && strategy_connected_) return plugins_.strategy;
  auto factory = object != nullptr ? strategies::StrategyFactory() : strategies::strategy_factory(p.strategy);
  if (object == nullptr && !factory) {
    throw NotSupportedError("strategy='" + p.strategy +
                            "' resolves (volt plan shows its layout), but this build of "
                            "Volt has no " +
                            p.strategy +
                            " training routine. Train with devices=1 and "
                            "strategy=\"" +
                            (spec_.accelerators == std::vector<std::string>{"tpu"} ? "single_xla" : "single_device") +
                            "\" (or \"auto\").");
  }
  const std::string type = device_type_of(p.accelerator, accelerator_.get(), p.device_ids);
  std::shared_ptr<precision::Precision> precision =
      !plugins_.precisions.empty() ? plugins_.precisions.front() : (object ? object->precision_part() : nullptr);
  if (!precision) {
    auto make_precision = precision::precision_factory(p.precision);
    if (!make_precision) {
      throw NotSupportedError("precision='" + p.precision +
                              "' is valid, but this build of Volt has no plug-in for "
                              "it. Use precision=\"32-true\".");
    }
    precision = make_precision(type);
    if (!precision) throw Error("the factory of precision='" + p.precision + "' returned a null pointer.");
  }
  if (const auto* tpu = dynamic_cast<const accelerators::TPUAccelerator*>(accelerator_.get()); tpu && !tpu->runtime()) {
    throw NotSupportedError("accelerator='tpu' (" + p.strategy + " on " + p.root_device +
                            ") needs a TPU device "
                            "runtime, and none was asked for (" +
                            accelerators::TpuRuntimeSpec::looked_for(Environ::current()) +
                            "). On a TPU host set "
                            "VOLT_TPU_RUNTIME_LIBRARY to the runtime library; elsewhere set VOLT_TPU_EMULATION=lazy "
                            "(and VOLT_TPU_EMULATION_HOST, default v3-8) to emulate one on the CPU (docs/tpu.md).");
  }
  // The environment a plugin object gave is the strategy's own, told the plan's layout;
  // one from the registry becomes the plan's values, so that the stack follows the plan.
  std::shared_ptr<environments::ClusterEnvironment> environment =
      !plugins_.environments.empty() ? plugins_.environments.front() : (object ? object->environment_part() : nullptr);
  if (environment) {
    if (!environment->creates_processes_externally()) {
      environment->set_world_size(p.world_size);
      environment->set_global_rank(p.global_rank);
    }
  } else {
    environment = std::make_shared<environments::StaticEnvironment>(
        p.cluster_env, p.processes_started_externally, p.main_address, p.main_port, p.world_size, p.global_rank,
        p.local_rank, p.node_rank, p.launcher_store, p.store_prefix);
  }
  std::shared_ptr<checkpoint_io::CheckpointIO> io = !plugins_.checkpoint_ios.empty()
                                                        ? plugins_.checkpoint_ios.front()
                                                        : (object ? object->checkpoint_io_part() : nullptr);
  if (!io) io = checkpoint_io::checkpoint_io_registry().create(p.checkpoint_io);
  if (p.async_checkpoint && !dynamic_cast<checkpoint_io::AsyncCheckpointIO*>(io.get())) {
    io = std::make_shared<checkpoint_io::AsyncCheckpointIO>(std::move(io));  // async_checkpoint wraps any CheckpointIO
  }
  const auto devices = accelerator_->get_parallel_devices(p.device_ids);
  const size_t root = spec_.one_process_per_node ? 0 : static_cast<size_t>(p.local_rank);
  strategies::StrategyParts parts{spec_, accelerator_, precision, environment, io, devices, devices.at(root), p.ddp,
                                  p.fsdp};
  if (object != nullptr) {
    plugins_.strategy->connect(parts);
    strategy_connected_ = true;
    return plugins_.strategy;
  }
  auto strategy = factory(parts);
  if (!strategy) throw Error("the factory of strategy='" + p.strategy + "' returned a null pointer.");
  return strategy;
}

}  // namespace volt::connectors
