#include "volt/core/environ.h"

#include "volt/core/error.h"
#include "volt/core/numbers.h"
#include "volt/core/printable.h"

extern char** environ;

namespace volt {

Environ Environ::current() {
  std::map<std::string, std::string> vars;
  for (char** e = ::environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry(*e);
    const auto eq = entry.find('=');
    if (eq == std::string::npos) continue;
    vars.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return Environ(std::move(vars));
}

std::optional<std::string> Environ::get(const std::string& key) const {
  auto it = vars_.find(key);
  if (it == vars_.end()) return std::nullopt;
  return it->second;
}

std::string Environ::get_or(const std::string& key, const std::string& fallback) const {
  auto it = vars_.find(key);
  return it == vars_.end() ? fallback : it->second;
}

std::optional<int64_t> Environ::get_int(const std::string& key) const {
  auto it = vars_.find(key);
  if (it == vars_.end()) return std::nullopt;
  const auto parsed = numbers::parse_int(it->second, 0);
  if (!parsed) {
    throw ConfigError("environment variable " + key + "='" + printable(it->second) +
                      "' is not a non-negative integer: it " + parsed.problem +
                      ". Unset it or set it the way the launcher does.");
  }
  return *parsed.value;
}

int64_t Environ::get_int_or(const std::string& key, int64_t fallback) const {
  return get_int(key).value_or(fallback);
}

}  // namespace volt
