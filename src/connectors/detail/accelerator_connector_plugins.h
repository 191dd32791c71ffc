// The accelerator connector's checks of the plug-in objects given to the Trainer (each
// against the others and against the options), and the class name it puts in messages.
#pragma once
#include <string>
#include <typeinfo>

#include "volt/connectors/accelerator_connector.h"
#include "volt/core/trainer_options.h"

namespace volt::connectors::detail {

/// "MyCheckpointIO": a class's demangled name, for messages.
std::string demangled_name(const std::type_info& type);
template <typename T>
std::string class_name(const T& object) {
  return demangled_name(typeid(object));
}

/// Refuses plug-in objects that conflict with each other or with the options, naming both.
void check_plugin_conflicts(const TrainerOptions& o, const PluginObjects& p);

}  // namespace volt::connectors::detail
