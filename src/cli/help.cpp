// The --help text.
#include <algorithm>
#include <sstream>
#include <utility>
#include <vector>

#include "cli/detail/cli_state.h"
#include "volt/cli/cli.h"

namespace volt::cli {

std::string Cli::usage() const {
  const detail::CliState& state = *state_;
  std::vector<std::pair<std::string, std::string>> general = {
      {"-h, --help", "print this help and stop"},
      {"--config FILE.yaml",
       "read options from a YAML file of sections (repeatable; later "
       "files win, command-line flags win over all files)"},
      {"--print-config", "print the merged configuration as YAML and stop"},
  };
  size_t width = 0;
  for (const auto& [left, help] : general) width = std::max(width, left.size());
  for (const auto& o : state.options) {
    width = std::max(width, o.key.size() + 3 + std::string(flag_type_metavar(o.kind)).size());
  }
  width = std::min<size_t>(width, 44);

  std::ostringstream text;
  auto line = [&](const std::string& left, const std::string& help) {
    text << "  " << left;
    if (left.size() > width) {
      text << "\n" << std::string(width + 2, ' ');
    } else {
      text << std::string(width - left.size(), ' ');
    }
    // Help wraps so that --help reads in a 100-column terminal.
    const size_t room = std::max<size_t>(30, 100 - (width + 4));
    size_t column = 0;
    std::istringstream words(help);
    for (std::string word; words >> word;) {
      if (column > 0 && column + 1 + word.size() > room) {
        text << "\n" << std::string(width + 2, ' ');
        column = 0;
      }
      text << (column == 0 ? "  " : " ") << word;
      column += (column == 0 ? 0 : 1) + word.size();
    }
    text << "\n";
  };
  text << "usage: " << state.program << " [--config FILE.yaml]... [--print-config] [--SECTION.KEY VALUE]...\n\n";
  if (!state.description.empty()) text << state.description << "\n\n";
  text << "options:\n";
  for (const auto& [left, help] : general) line(left, help);
  for (const auto& section : state.sections()) {
    text << "\n" << section << ":\n";
    for (const auto& o : state.options) {
      if (detail::section_of(o.key) != section) continue;
      const std::string default_text = flag_value_text(o.default_value);
      line("--" + o.key + " " + flag_type_metavar(o.kind),
           o.help + " (default: " + (default_text.empty() ? "\"\"" : default_text) + ")");
    }
  }
  return text.str();
}

}  // namespace volt::cli
