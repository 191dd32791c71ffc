#pragma once
// JSON from a user (a safetensors header, a `volt new --options` file, a `volt ui` request body), parsed
// without what a JSON parser accepts silently: a key twice in one object (nlohmann keeps the last one), and
// nesting so deep that printing or copying the value, which recurses once per level, overflows the stack
// (100000 nested arrays crashed `volt new --options`). Header-only; needs nlohmann_json, not LibTorch.
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace volt {

/// Why parse_strict_json refused well-formed JSON.
class StrictJsonError : public std::runtime_error {
 public:
  enum class Kind { kRepeatedKey, kTooDeep };
  StrictJsonError(Kind kind, std::string key, std::string entry, int depth)
      : std::runtime_error(kind == Kind::kTooDeep ? "JSON nested deeper than " + std::to_string(depth) + " levels"
                                                  : "the key '" + key + "' appears twice in one object"),
        kind(kind),
        key(std::move(key)),
        entry(std::move(entry)),
        depth(depth) {}
  Kind kind;
  std::string key;    ///< the repeated key (kRepeatedKey)
  std::string entry;  ///< the top-level key it sits under, "" when it is itself top-level
  int depth;          ///< the nesting level of the key (1: top level), or the limit (kTooDeep)
};

/// Parses text; throws StrictJsonError for a repeated key or nesting beyond max_depth, and
/// nlohmann::json::parse_error for text that is not JSON.
inline nlohmann::json parse_strict_json(std::string_view text, int max_depth = 64) {
  std::vector<std::set<std::string>> keys;  // one set per open object
  std::string entry;
  const nlohmann::json::parser_callback_t check = [&](int depth, nlohmann::json::parse_event_t event,
                                                      nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if ((event == Event::object_start || event == Event::array_start) && depth >= max_depth) {
      throw StrictJsonError(StrictJsonError::Kind::kTooDeep, "", entry, max_depth);
    }
    if (event == Event::object_start) keys.emplace_back();
    if (event == Event::object_end && !keys.empty()) keys.pop_back();
    if (event == Event::key && !keys.empty()) {
      std::string key = parsed.get<std::string>();
      if (depth == 1) entry = key;
      if (!keys.back().insert(key).second) {
        throw StrictJsonError(StrictJsonError::Kind::kRepeatedKey, std::move(key), depth == 1 ? "" : entry, depth);
      }
    }
    return true;
  };
  return nlohmann::json::parse(text.begin(), text.end(), check);
}

}  // namespace volt
