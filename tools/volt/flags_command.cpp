// `volt flags`: the Trainer's flags from the flag table (volt/core/trainer_flags.h). `--markdown` prints
// README.md's flag table; scripts/update_readme_flags.sh puts it between the README's markers.
#include "flags_command.h"

#include <algorithm>
#include <iostream>
#include <string>

#include "volt/core/printable.h"
#include "volt/core/trainer_flags.h"

namespace {

constexpr const char* kFlagsUsage =
    "usage: volt flags [--markdown | --names]\n"
    "Lists the Trainer's flags (TrainerOptions; --trainer.<flag> on a program's command line): name, type,\n"
    "default and help. --markdown: README.md's flag table (GitHub markdown); --names: one name a line.\n";

}  // namespace

int cmd_flags(int argc, char** argv) {
  std::string format = "text";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << kFlagsUsage;
      return 0;
    }
    if ((arg != "--markdown" && arg != "--names") || format != "text") {
      std::cerr << "volt flags: unexpected argument '" << volt::printable(arg) << "'. " << kFlagsUsage;
      return 2;
    }
    format = arg.substr(2);
  }
  if (format == "markdown") {
    std::cout << volt::trainer_flags_markdown();
    return 0;
  }
  size_t width = 0;
  for (const auto& flag : volt::trainer_flags()) width = std::max(width, std::string(flag.name).size());
  for (const auto& flag : volt::trainer_flags()) {
    if (format == "names") {
      std::cout << flag.name << "\n";
      continue;
    }
    const std::string name = flag.name;
    const std::string default_text = *flag.default_text == '\0' ? "\"\"" : flag.default_text;
    std::cout << name << std::string(width + 2 - name.size(), ' ') << volt::flag_type_metavar(flag.type)
              << " (default: " << default_text << ")  " << flag.help << "\n";
  }
  return 0;
}
