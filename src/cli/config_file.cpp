// YAML: reading --config files and writing the merged configuration (--print-config).
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>

#include "cli/detail/cli_state.h"
#include "volt/cli/cli.h"
#include "volt/core/error.h"
#include "volt/core/input_file.h"
#include "volt/core/printable.h"

namespace volt::cli {
namespace detail {
namespace {

std::string describe(const YAML::Node& node) {
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  if (node.IsNull()) return "null";
  return "'" + node.Scalar() + "'";
}

std::string yaml_text(const YAML::Node& node, Kind kind, const std::string& where) {
  if (node.IsScalar()) return node.Scalar();
  if (node.IsNull()) {
    if (kind == Kind::kString) {
      throw ConfigError(where + " expects a string, got null; write \"\" for an empty string");
    }
    return "null";
  }
  if (node.IsSequence() && kind == Kind::kLogger) {
    std::string names;
    for (const auto& element : node) {
      if (!element.IsScalar()) {
        throw ConfigError(where + " expects a list of logger names like [csv, tensorboard], got an element that is " +
                          describe(element));
      }
      names += (names.empty() ? "" : ",") + element.Scalar();
    }
    if (names.empty()) throw ConfigError(where + " expects logger names, got an empty list; write false for no logger");
    return names;
  }
  if (node.IsSequence() && kind == Kind::kDevices) {
    std::string ids;
    for (const auto& element : node) {
      if (!element.IsScalar()) {
        throw ConfigError(where + " expects a list of device ids like [0, 1], got an element " + "that is " +
                          describe(element));
      }
      ids += (ids.empty() ? "" : ",") + element.Scalar();
    }
    return "[" + ids + "]";
  }
  throw ConfigError(where + " expects " + flag_type_expects(kind) + ", got " + describe(node));
}

// The 1-based line of a node in its file, for messages.
int line_of(const YAML::Node& node) {
  return node.Mark().line + 1;
}

// yaml-cpp keeps both entries of a repeated key and a lookup takes one of them silently: a
// repeated section or key is refused, naming both lines, so that an edit never goes unread.
void check_unique(std::map<std::string, int>& seen, const std::string& key, const YAML::Node& node,
                  const std::string& path, const char* what) {
  const auto [it, inserted] = seen.emplace(key, line_of(node));
  if (!inserted) {
    throw ConfigError("config file '" + printable(path) + "' has the " + what + " '" + printable(key) +
                      "' twice, on lines " + std::to_string(it->second) + " and " + std::to_string(line_of(node)) +
                      "; YAML would keep only one of them. Delete the one you do not mean.");
  }
}

// A config file is small; a bigger one is a mistake (a data file given as --config).
constexpr size_t kMaxConfigBytes = 16u << 20;

void emit(YAML::Emitter& out, Kind kind, const Value& value) {
  const std::string text = flag_value_text(value);
  if ((kind == Kind::kOptionalInt || kind == Kind::kOptionalUint) && text == "null") {
    out << YAML::Null;
    return;
  }
  // A YAML reader would take these plain scalars for numbers, booleans or null, not text.
  const bool ambiguous = text.empty() || to_bool(text) || is_null(text) || reads_as_number(text) ||
                         starts_with(lower(text), "0x") || starts_with(lower(text), "0o") ||
                         lower(text).find(".inf") <= 1 || lower(text) == ".nan";
  if (kind == Kind::kString && ambiguous) out << YAML::DoubleQuoted;
  out << text;
}

}  // namespace

void apply_config_file(const CliState& state, const std::string& path, std::vector<Value>& values) {
  // The type is checked before reading: a FIFO would block, /dev/zero never end.
  std::string text;
  if (const std::string problem = read_input_file(path, text, kMaxConfigBytes); !problem.empty()) {
    throw ConfigError("config file '" + printable(path) + "' (given with --config) cannot be opened: it " + problem +
                      "; give the path of a YAML file, relative to the current directory");
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp's own message for this is "bad file".
    throw ConfigError("config file '" + printable(path) + "' nests lists or mappings " + std::to_string(e.depth()) +
                      " levels deep (line " + std::to_string(e.mark.line + 1) +
                      "), beyond what the YAML reader takes; a config file is sections of keys");
  } catch (const YAML::Exception& e) {
    throw ConfigError("config file '" + printable(path) + "' is not valid YAML: " + printable(e.what()));
  }
  if (root.IsNull()) return;  // an empty file sets nothing
  if (!root.IsMap()) {
    throw ConfigError("config file '" + printable(path) + "' must be a mapping of sections such as " +
                      "'trainer: {max_epochs: 3}', got " + describe(root));
  }
  const std::vector<std::string> sections = state.sections();
  std::map<std::string, int> seen_sections;
  for (const auto& section : root) {
    const std::string name = section.first.Scalar();
    check_unique(seen_sections, name, section.first, path, "section");
    if (std::find(sections.begin(), sections.end(), name) == sections.end()) {
      const std::string near = nearest(name, sections);
      std::string known;
      for (const auto& s : sections) known += (known.empty() ? "" : ", ") + s;
      throw ConfigError(printable(path) + ": unknown section '" + printable(name) + "'" +
                        (near.empty() ? "" : "; did you mean '" + near + "'?") + " The sections are: " + known + ".");
    }
    if (section.second.IsNull()) continue;
    if (!section.second.IsMap()) {
      throw ConfigError(printable(path) + ": section '" + name + "' must be a mapping of keys such as '" + name +
                        ": {key: value}', got " + describe(section.second));
    }
    std::map<std::string, int> seen_keys;
    for (const auto& entry : section.second) {
      const std::string key = name + "." + entry.first.Scalar();
      check_unique(seen_keys, key, entry.first, path, "key");
      auto it = state.index.find(key);
      if (it == state.index.end()) {
        const std::string near = nearest(key, state.keys());
        throw ConfigError(printable(path) + ": unknown key " + printable(key) +
                          (near.empty() ? "; run with --help to list the options" : "; did you mean " + near + "?"));
      }
      const std::string where = printable(path) + ": " + key;
      const Kind kind = state.options[it->second].kind;
      values[it->second] = parse_value(kind, yaml_text(entry.second, kind, where), where, key);
    }
  }
}

}  // namespace detail

std::string Cli::to_yaml() const {
  YAML::Emitter out;
  out.SetNullFormat(YAML::LowerNull);
  out << YAML::BeginMap;
  for (const auto& section : state_->sections()) {
    out << YAML::Key << section << YAML::Value << YAML::BeginMap;
    for (const auto& option : state_->options) {
      if (detail::section_of(option.key) != section) continue;
      out << YAML::Key << option.key.substr(section.size() + 1) << YAML::Value;
      detail::emit(out, option.kind, option.value);
    }
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace volt::cli
