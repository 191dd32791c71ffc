// The command line: the Cli's options (the trainer section from the flag table), parsing and the getters.
// YAML files are read and written in config_file.cpp, the --help text is built in help.cpp.
#include "volt/cli/cli.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <utility>
#include <vector>

#include "cli/detail/cli_state.h"
#include "volt/core/error.h"
#include "volt/core/printable.h"
#include "volt/core/trainer_flags.h"

namespace volt::cli {
namespace {

using detail::CliState;
using detail::Kind;
using detail::nearest;
using detail::Option;
using detail::section_of;
using detail::starts_with;
using detail::Value;

template <typename T>
const T& get_as(const CliState& state, const std::string& key, const char* accessor) {
  const Option& option = state.find(key, accessor);
  if (const T* value = std::get_if<T>(&option.value)) return *value;
  throw ConfigError(std::string(accessor) + "(\"" + key + "\"): the option holds " + flag_type_expects(option.kind) +
                    "; read it with " + detail::getter_of(option.kind));
}

}  // namespace

// --- Cli ---

Cli::Cli(std::string program, std::string description, const TrainerOptions& trainer_defaults)
    : state_(std::make_unique<CliState>()) {
  state_->program = std::move(program);
  state_->description = std::move(description);
  state_->trainer = trainer_defaults;
  // The trainer section is the flag table: every Trainer flag, its type and help.
  for (const auto& flag : trainer_flags()) {
    state_->add(flag_cli_key(flag), flag.type, flag.get(trainer_defaults), flag.help, flag.set);
  }
}

Cli::~Cli() = default;
Cli::Cli(Cli&&) noexcept = default;
Cli& Cli::operator=(Cli&&) noexcept = default;

namespace {

void check_new_key(const CliState& state, const std::string& key) {
  const auto dot = key.find('.');
  const bool well_formed =
      dot != std::string::npos && dot > 0 && dot + 1 < key.size() && key.find('.', dot + 1) == std::string::npos &&
      std::all_of(key.begin(), key.end(),
                  [](unsigned char c) { return std::isalnum(c) != 0 || c == '_' || c == '-' || c == '.'; });
  if (!well_formed) {
    throw ConfigError("add_option(\"" + key + "\"): a key is 'section.name' with letters, " +
                      "digits, '_' or '-', e.g. \"model.lr\"");
  }
  if (section_of(key) == "trainer" || section_of(key) == "tuner") {
    throw ConfigError("add_option(\"" + key + "\"): the " + section_of(key) + " section is built in and holds " +
                      "the Trainer's flags; put program options in another section, e.g. \"model." +
                      key.substr(dot + 1) + "\"");
  }
  if (state.index.count(key) != 0) {
    throw ConfigError("add_option(\"" + key + "\"): the option is declared twice");
  }
}

}  // namespace

Cli& Cli::add_option(const std::string& key, bool default_value, const std::string& help) {
  check_new_key(*state_, key);
  state_->add(key, Kind::kBool, default_value, help);
  return *this;
}

Cli& Cli::add_option(const std::string& key, int64_t default_value, const std::string& help) {
  check_new_key(*state_, key);
  state_->add(key, Kind::kInt, default_value, help);
  return *this;
}

Cli& Cli::add_option(const std::string& key, double default_value, const std::string& help) {
  check_new_key(*state_, key);
  state_->add(key, Kind::kDouble, default_value, help);
  return *this;
}

Cli& Cli::add_option(const std::string& key, const std::string& default_value, const std::string& help) {
  check_new_key(*state_, key);
  state_->add(key, Kind::kString, default_value, help);
  return *this;
}

Cli& Cli::add_option(const std::string& key, const char* default_value, const std::string& help) {
  return add_option(key, std::string(default_value), help);
}

bool Cli::parse(int argc, const char* const* argv, std::ostream& out) {
  CliState& state = *state_;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      out << usage();
      return false;
    }
  }

  std::vector<std::string> config_files;
  std::vector<std::pair<size_t, Value>> flags;  // applied after every file: flags win
  bool print_config = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.empty() || arg[0] != '-') {
      throw ConfigError("unexpected argument '" + printable(arg) + "': options are written " +
                        "--section.key VALUE (run with --help to list them)");
    }
    std::string name = arg.substr(starts_with(arg, "--") ? 2 : 1);
    std::optional<std::string> inline_value;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name.resize(eq);
    }
    const bool next_is_value = i + 1 < argc && !starts_with(argv[i + 1], "--");

    if (starts_with(arg, "--") && name == "print-config") {
      if (inline_value) throw ConfigError("--print-config takes no value, got '" + printable(arg) + "'");
      print_config = true;
    } else if (starts_with(arg, "--") && name == "config") {
      if (!inline_value && !next_is_value) {
        throw ConfigError("missing value for --config: write --config FILE.yaml");
      }
      config_files.push_back(inline_value ? *inline_value : argv[++i]);
    } else if (auto it = state.index.find(name); starts_with(arg, "--") && it != state.index.end()) {
      const Option& option = state.options[it->second];
      const std::string flag = "--" + name;
      std::string text;
      if (inline_value) {
        text = *inline_value;
      } else if (option.kind == Kind::kBool || option.kind == Kind::kLogger) {
        // A bare boolean flag means true; a following word that is not an option is its value.
        text = i + 1 < argc && argv[i + 1][0] != '-' ? argv[++i] : "true";
      } else if (next_is_value) {
        text = argv[++i];
      } else {
        throw ConfigError("missing value for " + flag + ", which expects " + flag_type_expects(option.kind) +
                          ": write " + flag + " VALUE or " + flag + "=VALUE");
      }
      flags.emplace_back(it->second, detail::parse_value(option.kind, text, flag, name));
    } else {
      std::vector<std::string> candidates = state.keys();
      candidates.insert(candidates.end(), {"config", "print-config", "help"});
      const std::string near = nearest(name, candidates);
      throw ConfigError("unknown option " + printable(arg.substr(0, arg.find('='))) +
                        (near.empty() ? "; run with --help to list the options" : "; did you mean --" + near + "?"));
    }
  }

  // Built aside and committed at the end, so a failed parse leaves the previous values.
  std::vector<Value> values;
  for (const auto& option : state.options) values.push_back(option.default_value);
  for (const auto& path : config_files) detail::apply_config_file(state, path, values);
  for (auto& [index, value] : flags) values[index] = std::move(value);
  TrainerOptions trainer;
  for (size_t i = 0; i < values.size(); ++i) {
    state.options[i].value = std::move(values[i]);
    if (state.options[i].bind) state.options[i].bind(trainer, state.options[i].value);
  }
  state.trainer = std::move(trainer);

  if (print_config) {
    out << to_yaml();
    return false;
  }
  return true;
}

bool Cli::get_bool(const std::string& key) const {
  return get_as<bool>(*state_, key, "get_bool");
}

int64_t Cli::get_int(const std::string& key) const {
  return get_as<int64_t>(*state_, key, "get_int");
}

double Cli::get_double(const std::string& key) const {
  return get_as<double>(*state_, key, "get_double");
}

std::string Cli::get_string(const std::string& key) const {
  return get_as<std::string>(*state_, key, "get_string");
}

const TrainerOptions& Cli::trainer_options() const {
  return state_->trainer;
}

}  // namespace volt::cli
