#include "volt/connectors/accelerator_connector.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <thread>

#include <ATen/Context.h>

#include "volt/accelerators/cpu_accelerator.h"
#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/core/compat.h"
#include "volt/core/error.h"
#include "volt/core/registry.h"
#include "volt/environments/default_environment.h"
#include "volt/precision/precision.h"
#include "volt/strategies/single_device_strategy.h"

namespace volt::connectors {
namespace {

using AcceleratorRegistry = Registry<accelerators::Accelerator, int64_t>;
using PrecisionRegistry = Registry<precision::Precision>;
using StrategyRegistry = Registry<strategies::Strategy, const Plan&>;

const AcceleratorRegistry& accelerator_registry() {
  static const AcceleratorRegistry registry = [] {
    AcceleratorRegistry r("accelerator");
    r.add("cpu", "the CPU; devices counts processes, num_threads sets intra-op threads",
          [](int64_t threads) { return std::make_shared<accelerators::CPUAccelerator>(threads); });
    return r;
  }();
  return registry;
}

const PrecisionRegistry& precision_registry() {
  static const PrecisionRegistry registry = [] {
    PrecisionRegistry r("precision");
    r.add("32-true", "full float32 parameters and computation",
          [] { return std::make_shared<precision::Precision>(); });
    return r;
  }();
  return registry;
}

std::shared_ptr<environments::ClusterEnvironment> make_environment() {
  return std::make_shared<environments::DefaultEnvironment>();
}

const StrategyRegistry& strategy_registry() {
  static const StrategyRegistry registry = [] {
    StrategyRegistry r("strategy");
    r.add("single_device", "one process on one device", [](const Plan& plan) {
      auto accelerator = accelerator_registry().create(plan.accelerator, plan.num_threads);
      const auto devices = accelerator->get_parallel_devices(plan.device_ids);
      return std::make_shared<strategies::SingleDeviceStrategy>(
          devices.at(0), std::move(accelerator), precision_registry().create(plan.precision), make_environment(),
          std::make_shared<checkpoint_io::TorchCheckpointIO>());
    });
    return r;
  }();
  return registry;
}

bool is_all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t[]");
  const auto e = s.find_last_not_of(" \t[]");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

/// Lightning's devices grammar: n, "n", -1, "auto", "0,1", "2," (a list of one id).
struct DevicesRequest {
  bool is_auto = false;
  bool all = false;             // -1
  int64_t count = 0;            // n
  std::vector<int64_t> ids;     // explicit list
};

DevicesRequest parse_devices(const std::string& raw) {
  const std::string text = trim(raw);
  DevicesRequest req;
  if (text == "auto") {
    req.is_auto = true;
    return req;
  }
  if (text == "-1") {
    req.all = true;
    return req;
  }
  if (text.find(',') != std::string::npos) {
    std::stringstream ss(text);
    std::string part;
    while (std::getline(ss, part, ',')) {
      part = trim(part);
      if (part.empty()) continue;
      if (!is_all_digits(part)) {
        throw ConfigError("devices='" + raw + "' has '" + part +
                          "', which is not a device id. Use a count (devices=2), a list of ids "
                          "(devices=\"0,1\"), -1 or \"auto\".");
      }
      req.ids.push_back(std::stoll(part));
    }
    if (req.ids.empty()) {
      throw ConfigError("devices='" + raw + "' lists no device. Use a count (devices=1) or a list of ids.");
    }
    return req;
  }
  if (!is_all_digits(text)) {
    throw ConfigError("devices='" + raw +
                      "' is not understood. Use a count (devices=2), a list of ids (devices=\"0,1\"), "
                      "-1 (all) or \"auto\".");
  }
  req.count = std::stoll(text);
  if (req.count == 0) {
    throw ConfigError("devices=" + raw +
                      " asks for no device. Use devices=1 (or more), a list of ids, -1 for all, or \"auto\".");
  }
  return req;
}

}  // namespace

std::string AcceleratorConnector::normalize_precision(const std::string& precision) {
  if (precision == "32" || precision == "32-true") return "32-true";
  if (precision == "64" || precision == "64-true") return "64-true";
  if (precision == "16" || precision == "16-mixed") return "16-mixed";
  if (precision == "bf16" || precision == "bf16-mixed") return "bf16-mixed";
  return precision;
}

AcceleratorConnector::AcceleratorConnector(const TrainerOptions& options) {
  // Devices first: 0, "0" and empty lists are wrong whatever the hardware.
  const DevicesRequest devices = parse_devices(options.devices);

  if (options.num_nodes < 1) {
    throw ConfigError("num_nodes=" + std::to_string(options.num_nodes) + " must be at least 1.");
  }

  std::string accelerator = options.accelerator;
  if (accelerator == "auto") accelerator = "cpu";  // the only accelerator this build registers
  if (accelerator == "gpu") accelerator = "cuda";
  if (accelerator == "cuda" && !accelerator_registry().contains("cuda")) {
    throw NotSupportedError(std::string("accelerator='") + options.accelerator +
                            "' asks for a GPU, but this Volt build has no CUDA accelerator (LibTorch " +
                            compat::torch_version() + (at::hasCUDA() ? " has CUDA" : " was built without CUDA") +
                            "). Use accelerator=\"cpu\", or build Volt against a CUDA LibTorch.");
  }
  if (accelerator == "tpu" && !accelerator_registry().contains("tpu")) {
    throw NotSupportedError(
        "accelerator='tpu' asks for a TPU, but no TPU runtime is registered in this build. Use "
        "accelerator=\"cpu\".");
  }
  auto probe = accelerator_registry().create(accelerator, options.num_threads);  // unknown names throw here
  if (!probe->is_available()) {
    throw NotSupportedError("accelerator='" + accelerator + "' is not available on this machine.");
  }
  plan_.accelerator = accelerator;
  plan_.num_threads = options.num_threads > 0 ? options.num_threads
                                              : static_cast<int64_t>(std::max(1u, std::thread::hardware_concurrency()));

  if (accelerator == "cpu") {
    if (devices.all) {
      throw ConfigError("devices=-1 means every GPU; on CPU, devices counts processes. Use devices=1 (or a "
                        "process count) with accelerator=\"cpu\".");
    }
    if (!devices.ids.empty()) {
      throw ConfigError("devices='" + options.devices +
                        "' is a list of device ids; on CPU, devices counts processes. Use devices=" +
                        std::to_string(devices.ids.size()) + " with accelerator=\"cpu\".");
    }
    const int64_t n = devices.is_auto ? probe->auto_device_count() : devices.count;
    for (int64_t i = 0; i < n; ++i) plan_.device_ids.push_back(i);
  }
  plan_.num_nodes = options.num_nodes;

  std::string strategy = options.strategy;
  const int64_t processes = static_cast<int64_t>(plan_.device_ids.size()) * plan_.num_nodes;
  if (strategy == "auto") {
    strategy = processes > 1 ? "ddp" : "single_device";
  }
  if (!strategy_registry().contains(strategy)) {
    throw ConfigError("strategy='" + strategy + "' (from strategy='" + options.strategy + "', devices='" +
                      options.devices + "', num_nodes=" + std::to_string(options.num_nodes) +
                      ") is not registered in this build. Known strategies: " + strategy_registry().known_keys() +
                      ". Use devices=1 and num_nodes=1 with strategy=\"single_device\".");
  }
  if (strategy == "single_device" && processes != 1) {
    throw ConfigError("strategy='single_device' runs one process on one device, but devices='" + options.devices +
                      "' and num_nodes=" + std::to_string(options.num_nodes) + " ask for " +
                      std::to_string(processes) + ". Use devices=1 and num_nodes=1.");
  }
  plan_.strategy = strategy;

  plan_.precision = normalize_precision(options.precision);
  if (!precision_registry().contains(plan_.precision)) {
    throw ConfigError("precision='" + options.precision + "' is not available in this build. Known: " +
                      precision_registry().known_keys() + " (legacy spellings 32, 64, 16, \"bf16\" are accepted).");
  }
  plan_.environment = make_environment()->name();  // also validates the launcher's variables
}

std::shared_ptr<strategies::Strategy> AcceleratorConnector::create_strategy() const {
  return strategy_registry().create(plan_.strategy, plan_);
}

std::string Plan::describe() const {
  std::ostringstream out;
  out << "accelerator: " << accelerator << "\n";
  if (accelerator == "cpu") {
    out << "devices:     " << device_ids.size() << (device_ids.size() == 1 ? " process" : " processes")
        << " per node\n";
  } else {
    out << "devices:     ";
    for (size_t i = 0; i < device_ids.size(); ++i) out << (i ? "," : "") << accelerator << ":" << device_ids[i];
    out << "\n";
  }
  out << "num_nodes:   " << num_nodes << "\n";
  out << "strategy:    " << strategy << "\n";
  out << "precision:   " << precision << "\n";
  out << "environment: " << environment << "\n";
  out << "threads:     " << num_threads << " per process\n";
  return out.str();
}

std::string AcceleratorConnector::describe_registries() {
  std::ostringstream out;
  out << "accelerators:\n";
  for (const auto& [k, d] : accelerator_registry().list()) out << "  " << k << ": " << d << "\n";
  out << "strategies:\n";
  for (const auto& [k, d] : strategy_registry().list()) out << "  " << k << ": " << d << "\n";
  out << "precision:\n";
  for (const auto& [k, d] : precision_registry().list()) out << "  " << k << ": " << d << "\n";
  return out.str();
}

}  // namespace volt::connectors
