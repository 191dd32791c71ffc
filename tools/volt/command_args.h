#pragma once
// The `volt` subcommands' shared reading of one argument: "--name=value" is the flag and
// its value (possibly empty, which must not take the next word); anything else is whole.
#include <string>

namespace volt::tools {

struct CommandArg {
  std::string name;   ///< "--name", or the argument as given
  std::string value;  ///< after '=', when has_value
  bool has_value = false;
};

inline CommandArg split_command_arg(const std::string& arg) {
  const auto eq = arg.find('=');
  if (arg.rfind("--", 0) == 0 && eq != std::string::npos) return {arg.substr(0, eq), arg.substr(eq + 1), true};
  return {arg, "", false};
}

}  // namespace volt::tools
