#pragma once
/// The launch variables every environment of this folder reads: required ones fail with a
/// ConfigError naming the launcher and the variable.
#include <cstdint>
#include <string>

#include "volt/core/environ.h"
#include "volt/core/error.h"

namespace volt::environments::detail {

inline int64_t require(const Environ& env, const char* key, const std::string& who) {
  auto v = env.get_int(key);
  if (!v) {
    throw ConfigError(who + " sets " + key + ", but it is missing here. Start the processes with the launcher, or "
                      "set the variable.");
  }
  return *v;
}

inline std::string require_text(const Environ& env, const char* key, const std::string& who) {
  auto v = env.get(key);
  if (!v || v->empty()) {
    throw ConfigError(who + " sets " + key + ", but it is missing here. Start the processes with the launcher, or "
                      "set the variable.");
  }
  return *v;
}

}  // namespace volt::environments::detail
