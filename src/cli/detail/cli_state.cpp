#include "cli/detail/cli_state.h"

#include <algorithm>

#include "volt/core/error.h"

namespace volt::cli::detail {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string nearest(const std::string& given, const std::vector<std::string>& candidates) {
  // "--max_epochs" for "--trainer.max_epochs": the section was left out.
  for (const auto& c : candidates) {
    if (c.size() > given.size() && c.compare(c.size() - given.size(), given.size(), given) == 0 &&
        c[c.size() - given.size() - 1] == '.') {
      return c;
    }
  }
  std::string best;
  size_t best_distance = std::max<size_t>(2, given.size() / 3) + 1;
  for (const auto& c : candidates) {
    const size_t d = edit_distance(given, c);
    if (d < best_distance) best = c, best_distance = d;
  }
  return best;
}

std::string section_of(const std::string& key) {
  return key.substr(0, key.find('.'));
}

void CliState::add(const std::string& key, Kind kind, Value default_value, const std::string& help,
                   void (*bind)(TrainerOptions&, const Value&)) {
  index.emplace(key, options.size());
  options.push_back({key, kind, help, default_value, default_value, bind});
}

const Option& CliState::find(const std::string& key, const char* accessor) const {
  auto it = index.find(key);
  if (it != index.end()) return options[it->second];
  const std::string near = nearest(key, keys());
  throw ConfigError(std::string(accessor) + "(\"" + key + "\"): no such option" +
                    (near.empty() ? "" : "; did you mean \"" + near + "\"?") +
                    " Declare program options with add_option before reading them.");
}

std::vector<std::string> CliState::keys() const {
  std::vector<std::string> result;
  for (const auto& o : options) result.push_back(o.key);
  return result;
}

std::vector<std::string> CliState::sections() const {
  std::vector<std::string> result;
  for (const auto& o : options) {
    const std::string s = section_of(o.key);
    if (std::find(result.begin(), result.end(), s) == result.end()) result.push_back(s);
  }
  return result;
}

}  // namespace volt::cli::detail
