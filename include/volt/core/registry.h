#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "volt/core/error.h"

namespace volt {

/// The form a registry key is compared in: ASCII lower case, as Lightning lower-cases the
/// strategy, accelerator and precision strings it is given ("DDP" is "ddp", "BF16-mixed"
/// is "bf16-mixed"). Every registry lookup goes through it; messages keep what was given.
inline std::string registry_key(std::string name) {
  for (char& c : name) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return name;
}

/// Maps a key ("ddp", "cpu", "bf16-mixed") to a factory and a one-line description. Keys
/// match case-insensitively (registry_key). Built-ins are added by explicit registration
/// functions, never static initialisers.
template <typename Product, typename... Args>
class Registry {
 public:
  using Factory = std::function<std::shared_ptr<Product>(Args...)>;

  /// `what` names the kind in messages: "strategy", "accelerator", ...
  explicit Registry(std::string what) : what_(std::move(what)) {}

  /// Adds or replaces a key.
  void add(const std::string& key, std::string description, Factory factory) {
    entries_[registry_key(key)] = Entry{std::move(description), std::move(factory)};
  }
  bool contains(const std::string& key) const { return entries_.count(registry_key(key)) != 0; }

  /// Builds the product of `key`; an unknown key throws a ConfigError listing the known ones.
  std::shared_ptr<Product> create(const std::string& key, Args... args) const {
    return entry(key).factory(std::forward<Args>(args)...);
  }
  const std::string& description(const std::string& key) const { return entry(key).description; }

  /// (key, description) pairs in key order.
  std::vector<std::pair<std::string, std::string>> list() const {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& [k, e] : entries_) out.emplace_back(k, e.description);
    return out;
  }
  /// "a, b, c".
  std::string known_keys() const {
    std::string out;
    for (const auto& [k, e] : entries_) out += (out.empty() ? "" : ", ") + k;
    return out;
  }

 private:
  struct Entry {
    std::string description;
    Factory factory;
  };
  const Entry& entry(const std::string& key) const {
    auto it = entries_.find(registry_key(key));
    if (it == entries_.end()) {
      throw ConfigError(what_ + "='" + key + "' is not known. Known " + what_ + " names: " + known_keys() + ".");
    }
    return it->second;
  }
  std::string what_;
  std::map<std::string, Entry> entries_;
};

}  // namespace volt
