#pragma once
#include <initializer_list>
#include <string>
#include <vector>

namespace volt {

/// The Trainer's `logger` flag (Lightning's `logger=`): true (the default: one CSV logger),
/// false (no logger), or the names of loggers to build from the logger registry
/// (volt::loggers::logger_registry(): "csv", "tensorboard", and any registered by the
/// user). Names are checked when the Trainer is constructed.
///
///     o.logger = false;                       // none
///     o.logger = true;                        // the CSV logger
///     o.logger = "tensorboard";               // one by name
///     o.logger = "csv,tensorboard";           // several, as on the command line
///     o.logger = {"csv", "tensorboard"};      // several
class LoggerOption {
 public:
  /// true: the default CSV logger.
  LoggerOption() = default;
  LoggerOption(bool on) : on_(on) {}  // NOLINT(google-explicit-constructor): `o.logger = false`
  /// One name, or several separated by commas ("csv,tensorboard"); blanks around names
  /// are dropped.
  LoggerOption(const char* names) : LoggerOption(std::string(names)) {}  // NOLINT
  LoggerOption(const std::string& names);                                // NOLINT
  LoggerOption(std::initializer_list<std::string> names) : names_(names) {}
  LoggerOption(std::vector<std::string> names) : names_(std::move(names)) {}  // NOLINT

  /// Whether any logger is attached (false only for `logger=false`).
  bool enabled() const { return on_; }
  explicit operator bool() const { return on_; }
  /// The names given; empty for true and false.
  const std::vector<std::string>& names() const { return names_; }
  /// "true", "false", or the names joined by commas ("csv,tensorboard").
  std::string to_string() const;

  bool operator==(const LoggerOption& other) const { return on_ == other.on_ && names_ == other.names_; }
  bool operator!=(const LoggerOption& other) const { return !(*this == other); }

 private:
  bool on_ = true;
  std::vector<std::string> names_;
};

}  // namespace volt
