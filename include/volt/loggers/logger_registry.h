#pragma once
#include <memory>
#include <string>

#include "volt/core/registry.h"
#include "volt/core/trainer_options.h"
#include "volt/loggers/logger.h"

namespace volt::loggers {

/// Logger names for the Trainer's `logger` option: each builds a logger from the
/// Trainer's options (its default_root_dir is the save_dir).
using LoggerRegistry = Registry<Logger, const TrainerOptions&>;

/// The registry, with the built-ins on first use: "csv" (CSVLogger) and "tensorboard"
/// (TensorBoardLogger), both in default_root_dir/lightning_logs/version_N. Register
/// before constructing the Trainer that names the logger; not safe to change while
/// another thread constructs Trainers.
LoggerRegistry& logger_registry();

/// Adds (or replaces) a logger name:
///
///     volt::loggers::register_logger("jsonl", "one JSON line per row",
///         [](const volt::TrainerOptions& o) { return std::make_shared<JsonlLogger>(o.default_root_dir); });
///     o.logger = {"csv", "jsonl"};
void register_logger(const std::string& key, std::string description, LoggerRegistry::Factory factory);

}  // namespace volt::loggers
