#include "volt/core/environ.h"

#include <cerrno>
#include <cstdlib>

#include "volt/core/error.h"

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
  const std::string& v = it->second;
  char* end = nullptr;
  errno = 0;
  const long long parsed = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || end != v.c_str() + v.size() || errno != 0 || parsed < 0) {
    throw ConfigError("environment variable " + key + "='" + v +
                      "' is not a non-negative integer. Unset it or set it the way the launcher does.");
  }
  return parsed;
}

int64_t Environ::get_int_or(const std::string& key, int64_t fallback) const {
  return get_int(key).value_or(fallback);
}

}  // namespace volt
