#pragma once
// The generator tests' starting options: a minimal project named "app", plus `extra`.
#include <nlohmann/json.hpp>

namespace volt::testing {

inline nlohmann::json base_options(nlohmann::json extra = nlohmann::json::object()) {
  nlohmann::json o = {{"name", "app"}, {"template", "minimal"}};
  o.update(extra);
  return o;
}

}  // namespace volt::testing
