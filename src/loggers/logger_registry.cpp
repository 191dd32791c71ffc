#include "volt/loggers/logger_registry.h"

#include "volt/loggers/csv_logger.h"
#include "volt/loggers/tensorboard_logger.h"

namespace volt::loggers {

LoggerRegistry& logger_registry() {
  static LoggerRegistry registry = [] {
    LoggerRegistry r("logger");
    r.add("csv", "metrics.csv and hparams.yaml (CSVLogger)", [](const TrainerOptions& o) -> std::shared_ptr<Logger> {
      return std::make_shared<CSVLogger>(o.default_root_dir);
    });
    r.add("tensorboard", "TensorBoard event files: scalars, hparams, text, histograms, images (TensorBoardLogger)",
          [](const TrainerOptions& o) -> std::shared_ptr<Logger> {
            return std::make_shared<TensorBoardLogger>(o.default_root_dir);
          });
    return r;
  }();
  return registry;
}

void register_logger(const std::string& key, std::string description, LoggerRegistry::Factory factory) {
  if (key.empty()) throw ConfigError("register_logger got an empty name; give the name users write in logger=.");
  if (!factory) throw ConfigError("register_logger(\"" + key + "\") got an empty factory.");
  if (registry_key(key) == "true" || registry_key(key) == "false" || key.find(',') != std::string::npos) {
    throw ConfigError("register_logger(\"" + key +
                      "\"): a logger name cannot be true, false or hold a comma "
                      "(logger= reads those as a switch or as a list).");
  }
  logger_registry().add(key, std::move(description), std::move(factory));
}

}  // namespace volt::loggers
