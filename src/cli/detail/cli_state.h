#pragma once
// The Cli's options and values, shared by cli.cpp (parsing), config_file.cpp (YAML) and help.cpp.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cli/detail/values.h"
#include "volt/core/trainer_options.h"

namespace volt::cli::detail {

/// Levenshtein distance, for suggestions.
size_t edit_distance(const std::string& a, const std::string& b);
/// The closest candidate, or "" when none is close enough to be a plausible typo.
std::string nearest(const std::string& given, const std::vector<std::string>& candidates);
/// "model" of "model.lr".
std::string section_of(const std::string& key);

struct Option {
  std::string key;  // "section.name"
  Kind kind;
  std::string help;
  Value default_value;
  Value value;
  void (*bind)(TrainerOptions&, const Value&) = nullptr;  // a Trainer flag's setter; null for the program's options
};

struct CliState {
  std::string program;
  std::string description;
  std::vector<Option> options;  // trainer first, then the program's, in declaration order
  std::map<std::string, size_t> index;
  TrainerOptions trainer;

  void add(const std::string& key, Kind kind, Value default_value, const std::string& help,
           void (*bind)(TrainerOptions&, const Value&) = nullptr);
  /// The option `key`; throws ConfigError (with the nearest name) naming `accessor`.
  const Option& find(const std::string& key, const char* accessor) const;
  std::vector<std::string> keys() const;
  /// Section names in the order of their first option.
  std::vector<std::string> sections() const;
};

/// Reads one --config file into `values` (indexed like state.options).
void apply_config_file(const CliState& state, const std::string& path, std::vector<Value>& values);

}  // namespace volt::cli::detail
