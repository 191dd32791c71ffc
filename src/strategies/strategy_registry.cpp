#include "volt/strategies/strategy_registry.h"

#include <mutex>

#include "volt/core/error.h"
#include "volt/strategies/ddp_strategy.h"
#include "volt/strategies/dp_strategy.h"
#include "volt/strategies/fsdp_strategy.h"
#include "volt/strategies/single_device_strategy.h"
#include "volt/strategies/single_xla_strategy.h"
#include "volt/strategies/xla_strategy.h"

namespace volt::strategies {

void register_builtin_strategies(StrategyRegistry& r) {
  using L = LauncherKind;
  auto add = [&r](StrategySpec spec, StrategyFactory factory) {
    const std::string key = spec.name;
    std::string description = spec.description;
    r.add(key, std::move(description), std::move(spec), std::move(factory), /*allow_empty_factory=*/true);
  };
  const StrategyFactory single_device = [](const StrategyParts& p) -> std::shared_ptr<Strategy> {
    return std::make_shared<SingleDeviceStrategy>(p.root_device, p.accelerator, p.precision, p.environment,
                                                  p.checkpoint_io);
  };
  const StrategyFactory single_xla = [](const StrategyParts& p) -> std::shared_ptr<Strategy> {
    return std::make_shared<SingleXLAStrategy>(p.root_device,
                                               std::dynamic_pointer_cast<accelerators::TPUAccelerator>(p.accelerator),
                                               p.precision, p.environment, p.checkpoint_io);
  };
  add({"single_device", "one process on one device", L::kNone, {"cpu", "cuda"}, false, true, false}, single_device);
  add({"ddp",
       "one process per device, gradients averaged by c10d's Reducer; processes started by re-running the program",
       L::kSubprocess,
       {"cpu", "cuda"},
       false,
       false,
       false},
      make_ddp_strategy);
  add({"ddp_find_unused_parameters_true",
       "ddp that tolerates parameters without gradients",
       L::kSubprocess,
       {"cpu", "cuda"},
       false,
       false,
       true},
      make_ddp_strategy);
  add({"ddp_find_unused_parameters_false",
       "ddp (every parameter must get a gradient)",
       L::kSubprocess,
       {"cpu", "cuda"},
       false,
       false,
       false},
      make_ddp_strategy);
  add({"ddp_spawn",
       "ddp with workers spawned by the Trainer, which gets their results back",
       L::kSpawn,
       {"cpu", "cuda"},
       false,
       false,
       false},
      make_ddp_strategy);
  add({"ddp_spawn_find_unused_parameters_true",
       "ddp_spawn that tolerates parameters without gradients",
       L::kSpawn,
       {"cpu", "cuda"},
       false,
       false,
       true},
      make_ddp_strategy);
  add({"ddp_spawn_find_unused_parameters_false",
       "ddp_spawn (every parameter must get a gradient)",
       L::kSpawn,
       {"cpu", "cuda"},
       false,
       false,
       false},
      make_ddp_strategy);
  add({"fsdp",
       "one process per device, parameters, gradients and optimizer state sharded over the ranks (ZeRO-3; "
       "fsdp.sharding_strategy)",
       L::kSubprocess,
       {"cpu", "cuda"},
       false,
       false,
       false},
      make_fsdp_strategy);
  // DataParallel's scatter and gradient edges exist only in a CUDA LibTorch: elsewhere no
  // factory, and plans still show it.
#ifdef VOLT_WITH_CUDA
  const StrategyFactory dp = make_dp_strategy;
#else
  const StrategyFactory dp = nullptr;
#endif
  add({"dp", "one process splits each batch over the GPUs of one node", L::kNone, {"cuda"}, true, false, false}, dp);
  add({"xla", "one process per TPU device, spawned by the Trainer", L::kSpawn, {"tpu"}, false, false, false},
      make_xla_strategy);
  add({"single_xla", "one process on one TPU device", L::kNone, {"tpu"}, false, true, false}, single_xla);
}

StrategyRegistry& strategy_registry() {
  static StrategyRegistry registry("strategy", {"auto"});
  static std::once_flag built_in;
  std::call_once(built_in, [] { register_builtin_strategies(registry); });
  return registry;
}

void register_strategy(StrategySpec spec, StrategyFactory factory) {
  if (spec.accelerators.empty()) {
    throw ConfigError("register_strategy(\"" + spec.name +
                      "\"): the spec lists no accelerators; name the device "
                      "families it runs on (\"cpu\", \"cuda\", \"tpu\").");
  }
  spec.name = registry_key(spec.name);
  const std::string key = spec.name;
  std::string description = spec.description;
  strategy_registry().add(key, std::move(description), std::move(spec), std::move(factory));
}

std::vector<StrategySpec> strategy_specs() {
  std::vector<StrategySpec> out;
  for (auto& e : strategy_registry().entries()) out.push_back(std::move(e.info));
  return out;
}

StrategySpec strategy_spec(const std::string& name) {
  return strategy_registry().info(name);
}

const char* to_string(LauncherKind kind) {
  switch (kind) {
    case LauncherKind::kNone:
      return "none";
    case LauncherKind::kSubprocess:
      return "subprocess";
    case LauncherKind::kSpawn:
      return "spawn";
  }
  return "?";
}

StrategyFactory strategy_factory(const std::string& name) {
  const auto& registry = strategy_registry();
  if (!registry.contains(name)) return StrategyFactory();
  return registry.entry(name).factory;
}

void register_strategy_factory(const std::string& name, StrategyFactory factory) {
  strategy_registry().set_factory(name, std::move(factory));  // only known names; register_strategy adds
}

}  // namespace volt::strategies
