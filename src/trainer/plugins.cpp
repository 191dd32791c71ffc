#include "volt/trainer/plugins.h"

#include <sstream>

#include "volt/accelerators/accelerator_registry.h"
#include "volt/checkpoint_io/checkpoint_io_registry.h"
#include "volt/core/error.h"
#include "volt/environments/environment_registry.h"
#include "volt/loggers/logger_registry.h"
#include "volt/precision/precision_registry.h"
#include "volt/profilers/profiler.h"
#include "volt/strategies/strategy_registry.h"

namespace volt {

connectors::PluginObjects TrainerPlugins::sorted() const {
  connectors::PluginObjects out;
  out.strategy = strategy;
  out.accelerator = accelerator;
  for (size_t i = 0; i < plugins.size(); ++i) {
    const Plugin& p = plugins[i];
    if (p.is_null()) {
      throw ConfigError("plugins[" + std::to_string(i) + "] is a null " + p.kind() +
                        " pointer; pass constructed objects only.");
    }
    if (p.environment()) out.environments.push_back(p.environment());
    if (p.precision()) out.precisions.push_back(p.precision());
    if (p.checkpoint_io()) out.checkpoint_ios.push_back(p.checkpoint_io());
  }
  return out;
}

namespace {

template <typename R>
void add_rows(std::vector<RegistryRow>& rows, const std::string& kind, const R& registry) {
  for (const auto& e : registry.entries()) {
    rows.push_back({kind, e.key, e.description + (e.factory ? "" : " [plan only]")});
  }
}

}  // namespace

std::vector<RegistryRow> registry_rows() {
  std::vector<RegistryRow> rows;
  add_rows(rows, "accelerator", accelerators::accelerator_registry());
  add_rows(rows, "strategy", strategies::strategy_registry());
  add_rows(rows, "precision", precision::precision_registry());
  auto& environments = environments::environment_registry();
  for (const auto& name : environments::environment_names()) {
    rows.push_back({"cluster_environment", name, environments.description(name)});
  }
  add_rows(rows, "checkpoint_io", checkpoint_io::checkpoint_io_registry());
  add_rows(rows, "logger", loggers::logger_registry());
  add_rows(rows, "profiler", profilers::profiler_registry());
  return rows;
}

std::string describe_registries() {
  std::ostringstream out;
  std::string kind;
  for (const auto& row : registry_rows()) {
    if (row.kind != kind) {
      kind = row.kind;
      out << kind << (kind == "cluster_environment" ? " (detection order)" : "") << ":\n";
    }
    out << "  " << row.key << ": " << row.description << "\n";
  }
  return out.str();
}

}  // namespace volt
