// The plug-in objects' checks of the accelerator connector (see the header).
#include "connectors/detail/accelerator_connector_plugins.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "volt/core/error.h"
#include "volt/core/registry.h"

namespace volt::connectors::detail {

std::string demangled_name(const std::type_info& type) {
  const char* mangled = type.name();
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string out = status == 0 && demangled != nullptr ? demangled : mangled;
  std::free(demangled);
  return out;
}

namespace {

/// "a, b" of plug-in objects of one kind; ConfigError for a null one.
template <typename T, typename Name>
std::string object_names(const std::vector<std::shared_ptr<T>>& objects, const char* kind, Name name) {
  std::string out;
  for (const auto& o : objects) {
    if (!o) throw ConfigError(std::string("plugins holds a null ") + kind + "; pass constructed objects only.");
    out += (out.empty() ? "" : ", ") + name(*o);
  }
  return out;
}

}  // namespace

void check_plugin_conflicts(const TrainerOptions& o, const PluginObjects& p) {
  const auto env_name = [](const environments::ClusterEnvironment& e) {
    return "'" + e.name() + "' (" + class_name(e) + ")";
  };
  const auto precision_name = [](const precision::Precision& x) {
    return "'" + x.name() + "' (" + class_name(x) + ")";
  };
  const auto io_name = [](const checkpoint_io::CheckpointIO& x) { return class_name(x); };
  const std::string envs = object_names(p.environments, "ClusterEnvironment", env_name);
  const std::string precisions = object_names(p.precisions, "Precision", precision_name);
  const std::string ios = object_names(p.checkpoint_ios, "CheckpointIO", io_name);
  if (p.environments.size() > 1) {
    throw ConfigError("plugins holds " + std::to_string(p.environments.size()) + " ClusterEnvironments (" + envs +
                      "); a run has one. Pass a single environment.");
  }
  if (p.precisions.size() > 1) {
    throw ConfigError("plugins holds " + std::to_string(p.precisions.size()) + " precision plug-ins (" + precisions +
                      "); a run has one. Pass a single plug-in.");
  }
  if (p.checkpoint_ios.size() > 1) {
    throw ConfigError("plugins holds " + std::to_string(p.checkpoint_ios.size()) + " CheckpointIOs (" + ios +
                      "); a run has one. Pass a single CheckpointIO.");
  }
  if (!p.environments.empty() && registry_key(o.cluster_environment) != "auto") {
    throw ConfigError("cluster_environment='" + o.cluster_environment + "' and a ClusterEnvironment object " + envs +
                      " were both given. Use one: drop the option (cluster_environment=\"auto\") or the object.");
  }
  if (!p.precisions.empty() && o.precision != "32-true" && o.precision != "32") {
    throw ConfigError("precision='" + o.precision + "' and a precision plug-in (" + precisions +
                      ") were both given. Use one: drop the flag or the plug-in.");
  }
  if (!p.checkpoint_ios.empty() && registry_key(o.checkpoint_io) != "torch") {
    throw ConfigError("checkpoint_io='" + o.checkpoint_io + "' and a CheckpointIO object (" + ios +
                      ") were both given. Use one: drop the option (checkpoint_io=\"torch\") or the object.");
  }
  if (p.accelerator && registry_key(o.accelerator) != "auto") {
    throw ConfigError("accelerator='" + o.accelerator + "' and an accelerator object ('" + p.accelerator->name() +
                      "', " + class_name(*p.accelerator) +
                      ") were both given. Use one: drop the option "
                      "(accelerator=\"auto\") or the object.");
  }
  if (!p.strategy) return;
  const auto& s = *p.strategy;
  const std::string strategy = "the strategy object ('" + s.name() + "', " + class_name(s) + ")";
  if (registry_key(o.strategy) != "auto") {
    throw ConfigError("strategy='" + o.strategy + "' and " + strategy +
                      " were both given. Use one: drop the option "
                      "(strategy=\"auto\") or the object.");
  }
  if (p.accelerator && s.accelerator_part()) {
    throw ConfigError("an accelerator object ('" + p.accelerator->name() + "') and another in " + strategy + " ('" +
                      s.accelerator_part()->name() + "') were both given. Give the accelerator in one place.");
  }
  if (s.accelerator_part() && registry_key(o.accelerator) != "auto") {
    throw ConfigError("accelerator='" + o.accelerator + "' and the accelerator of " + strategy + " ('" +
                      s.accelerator_part()->name() + "') were both given. Use accelerator=\"auto\".");
  }
  if (!p.environments.empty() && s.environment_part()) {
    throw ConfigError("a ClusterEnvironment in plugins (" + envs + ") and another in " + strategy + " (" +
                      env_name(*s.environment_part()) + ") were both given. Give the environment in one place.");
  }
  if (s.environment_part() && registry_key(o.cluster_environment) != "auto") {
    throw ConfigError("cluster_environment='" + o.cluster_environment + "' and the environment of " + strategy + " (" +
                      env_name(*s.environment_part()) + ") were both given. Use cluster_environment=\"auto\".");
  }
  if (!p.precisions.empty() && s.precision_part()) {
    throw ConfigError("a precision plug-in in plugins (" + precisions + ") and another in " + strategy + " (" +
                      precision_name(*s.precision_part()) + ") were both given. Give the precision in one place.");
  }
  if (s.precision_part() && o.precision != "32-true" && o.precision != "32") {
    throw ConfigError("precision='" + o.precision + "' and the precision plug-in of " + strategy + " (" +
                      precision_name(*s.precision_part()) +
                      ") were both given. Use one: drop the flag or the plug-in.");
  }
  if (!p.checkpoint_ios.empty() && s.checkpoint_io_part()) {
    throw ConfigError("a CheckpointIO in plugins (" + ios + ") and another in " + strategy + " (" +
                      io_name(*s.checkpoint_io_part()) + ") were both given. Give the CheckpointIO in one place.");
  }
  if (s.checkpoint_io_part() && registry_key(o.checkpoint_io) != "torch") {
    throw ConfigError("checkpoint_io='" + o.checkpoint_io + "' and the CheckpointIO of " + strategy + " (" +
                      io_name(*s.checkpoint_io_part()) + ") were both given. Use one: drop the option or the object.");
  }
}

}  // namespace volt::connectors::detail
