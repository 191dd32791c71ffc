#pragma once
// Option values of the command line: their types (the flag table's, volt/core/trainer_flags.h),
// reading them from text, and writing them back.
#include <charconv>
#include <optional>
#include <string>
#include <system_error>

#include "volt/core/trainer_flags.h"

namespace volt::cli::detail {

/// A Trainer flag's type or a program option's (bool, int, double, string).
using Kind = FlagType;
using Value = FlagValue;

/// The accessor that reads an option of this kind ("get_int"), for messages.
const char* getter_of(Kind kind);

std::string lower(std::string text);
bool starts_with(const std::string& text, const std::string& prefix);

/// "true"/"yes"/"on"/"1" and their opposites, any case; nullopt for other text.
std::optional<bool> to_bool(const std::string& text);
/// "null", "none", "~", any case.
bool is_null(const std::string& text);

/// Whether a YAML reader would take `text` for a number (the YAML writer quotes such strings).
/// Values themselves go through volt::numbers.
bool reads_as_number(const std::string& text);

/// Reads `text` as a value of `kind`. `where` names the source ("--model.lr", "run.yaml: model.lr"),
/// `key` the option ("model.lr"). Throws ConfigError saying what was expected and given.
Value parse_value(Kind kind, const std::string& text, const std::string& where, const std::string& key);

}  // namespace volt::cli::detail
