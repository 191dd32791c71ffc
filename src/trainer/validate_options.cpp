#include <set>
#include <string>

#include "volt/connectors/signal_connector.h"
#include "volt/core/error.h"
#include "volt/core/printable.h"
#include "volt/core/registry.h"
#include "volt/core/trainer_flags.h"
#include "volt/loggers/logger_registry.h"
#include "volt/profilers/profiler.h"
#include "volt/trainer/trainer.h"

namespace volt {

// Every flag's own check comes from the flag table (volt/core/trainer_flags.h); what follows
// needs a part above core: the requeue signal's parser and the names users register at run time.
void validate_trainer_options(const TrainerOptions& o) {
  check_trainer_flags(o);
  if (o.slurm_auto_requeue) {
    connectors::SignalConnector::parse_signal(o.slurm_requeue_signal, "slurm_requeue_signal");
  }
  if (!o.profiler.empty() && !profilers::profiler_registry().contains(o.profiler)) {
    throw ConfigError("profiler='" + printable(o.profiler) + "' is not known. Known profiler names: " +
                      profilers::profiler_registry().known_keys() + "; or \"\" for no profiler.");
  }
  std::set<std::string> seen;
  for (const auto& name : o.logger.names()) {
    if (name.empty()) {
      throw ConfigError("logger='" + o.logger.to_string() +
                        "' holds an empty name. Write names separated by "
                        "commas, e.g. logger=csv,tensorboard (known: " +
                        loggers::logger_registry().known_keys() + "), or true/false.");
    }
    if (!loggers::logger_registry().contains(name)) {
      throw ConfigError("logger='" + name +
                        "' is not known. Known logger names: " + loggers::logger_registry().known_keys() +
                        " (or true for the CSV logger, false for none). Register your own with "
                        "volt::loggers::register_logger.");
    }
    if (!seen.insert(registry_key(name)).second) {
      throw ConfigError("logger='" + o.logger.to_string() + "' names '" + name +
                        "' twice; each logger is attached once.");
    }
  }
}

}  // namespace volt
