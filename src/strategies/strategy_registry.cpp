#include "volt/strategies/strategy_registry.h"

#include <map>
#include <mutex>

#include "volt/core/error.h"
#include "volt/core/registry.h"
#include "volt/strategies/ddp_strategy.h"
#include "volt/strategies/single_device_strategy.h"
#include "volt/strategies/single_xla_strategy.h"
#include "volt/strategies/xla_strategy.h"

namespace volt::strategies {

const std::vector<StrategySpec>& strategy_specs() {
  using L = LauncherKind;
  static const std::vector<StrategySpec> specs = {
      {"single_device", "one process on one device", L::kNone, {"cpu", "cuda"}, false, true, false},
      {"ddp", "one process per device, gradients averaged by c10d's Reducer; processes started by re-running "
              "the program", L::kSubprocess, {"cpu", "cuda"}, false, false, false},
      {"ddp_find_unused_parameters_true", "ddp that tolerates parameters without gradients", L::kSubprocess,
       {"cpu", "cuda"}, false, false, true},
      {"ddp_find_unused_parameters_false", "ddp (every parameter must get a gradient)", L::kSubprocess,
       {"cpu", "cuda"}, false, false, false},
      {"ddp_spawn", "ddp with workers spawned by the Trainer, which gets their results back", L::kSpawn,
       {"cpu", "cuda"}, false, false, false},
      {"ddp_spawn_find_unused_parameters_true", "ddp_spawn that tolerates parameters without gradients", L::kSpawn,
       {"cpu", "cuda"}, false, false, true},
      {"ddp_spawn_find_unused_parameters_false", "ddp_spawn (every parameter must get a gradient)", L::kSpawn,
       {"cpu", "cuda"}, false, false, false},
      {"dp", "one process splits each batch over the GPUs of one node", L::kNone, {"cuda"}, true, false, false},
      {"xla", "one process per TPU device, spawned by the Trainer", L::kSpawn, {"tpu"}, false, false, false},
      {"single_xla", "one process on one TPU device", L::kNone, {"tpu"}, false, true, false},
  };
  return specs;
}

const StrategySpec& strategy_spec(const std::string& name) {
  const std::string key = registry_key(name);
  for (const auto& s : strategy_specs()) {
    if (s.name == key) return s;
  }
  std::string known;
  for (const auto& s : strategy_specs()) known += (known.empty() ? "" : ", ") + s.name;
  throw ConfigError("strategy='" + name + "' is not known. Known strategies: auto, " + known + ".");
}

const char* to_string(LauncherKind kind) {
  switch (kind) {
    case LauncherKind::kNone: return "none";
    case LauncherKind::kSubprocess: return "subprocess";
    case LauncherKind::kSpawn: return "spawn";
  }
  return "?";
}

namespace {

std::mutex& factories_mutex() {
  static std::mutex m;
  return m;
}

std::map<std::string, StrategyFactory>& factories() {
  static std::map<std::string, StrategyFactory> f = [] {
    std::map<std::string, StrategyFactory> built_in;
    built_in["single_device"] = [](const StrategyParts& p) -> std::shared_ptr<Strategy> {
      return std::make_shared<SingleDeviceStrategy>(p.root_device, p.accelerator, p.precision, p.environment,
                                                    p.checkpoint_io);
    };
    for (const auto& spec : strategy_specs()) {
      if (spec.name.rfind("ddp", 0) == 0) built_in[spec.name] = make_ddp_strategy;
    }
    built_in["single_xla"] = [](const StrategyParts& p) -> std::shared_ptr<Strategy> {
      return std::make_shared<SingleXLAStrategy>(
          p.root_device, std::dynamic_pointer_cast<accelerators::TPUAccelerator>(p.accelerator), p.precision,
          p.environment, p.checkpoint_io);
    };
    built_in["xla"] = make_xla_strategy;
    return built_in;
  }();
  return f;
}

}  // namespace

StrategyFactory strategy_factory(const std::string& name) {
  std::lock_guard<std::mutex> lock(factories_mutex());
  auto it = factories().find(registry_key(name));
  return it == factories().end() ? StrategyFactory() : it->second;
}

void register_strategy_factory(const std::string& name, StrategyFactory factory) {
  const std::string& key = strategy_spec(name).name;  // only known names
  std::lock_guard<std::mutex> lock(factories_mutex());
  factories()[key] = std::move(factory);
}

}  // namespace volt::strategies
