#pragma once
#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
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

/// The Info of a registry whose entries carry nothing beyond key, description and factory.
struct NoInfo {};

/// Maps a key ("ddp", "cpu", "bf16-mixed") to a one-line description, a factory and, where a
/// kind needs it, typed metadata (`Info`: a strategy's launcher and accelerators, an
/// environment's detection). Every run-time choice of Volt is one of these: accelerators,
/// strategies, precision, cluster environments, checkpoint IO, loggers, profilers.
///
/// Keys match case-insensitively (registry_key); entries() keeps registration order (a
/// replaced key keeps its place), list() and messages sort by key. Safe to use from several threads: every call takes
/// the registry's lock, and a factory runs outside it (it may look up other registries). Built-ins are added by
/// explicit registration functions, never static initialisers.
template <typename Info, typename Product, typename... Args>
class InfoRegistry {
 public:
  using Factory = std::function<std::shared_ptr<Product>(Args...)>;

  /// One registered key.
  struct Entry {
    std::string key;  ///< in registry_key form
    std::string description;
    Info info;
    /// Empty for a key that is known (plans can be made with it) but that this build
    /// cannot construct.
    Factory factory;
  };

  /// `what` names the kind in messages ("strategy", "accelerator", ...); `reserved`: words
  /// that mean something else in the option and cannot be registered ("auto"), listed
  /// first among the known names.
  explicit InfoRegistry(std::string what, std::vector<std::string> reserved = {})
      : what_(std::move(what)), reserved_(std::move(reserved)) {}
  InfoRegistry(const InfoRegistry& other) {
    std::lock_guard<std::mutex> lock(other.mutex_);
    what_ = other.what_;
    reserved_ = other.reserved_;
    entries_ = other.entries_;
  }
  InfoRegistry& operator=(const InfoRegistry&) = delete;

  /// The kind, as messages name it.
  const std::string& what() const { return what_; }

  /// Adds `key`, or replaces its description, info and factory. ConfigError for an empty
  /// key, a reserved word, or (allow_empty_factory false) an empty factory.
  void add(const std::string& key, std::string description, Info info, Factory factory,
           bool allow_empty_factory = false) {
    const std::string k = registry_key(key);
    if (k.empty()) {
      throw ConfigError("registering a " + what_ + ": the name is empty; give the name users write in " + what_ + "=.");
    }
    if (std::find(reserved_.begin(), reserved_.end(), k) != reserved_.end()) {
      throw ConfigError("registering " + what_ + "='" + key + "': '" + k + "' already means something else in the " +
                        what_ + " option. Choose another name.");
    }
    if (!factory && !allow_empty_factory) {
      throw ConfigError("registering " + what_ + "='" + key +
                        "': the factory is empty; pass a function that "
                        "builds the " +
                        what_ + ".");
    }
    std::lock_guard<std::mutex> lock(mutex_);
    Entry entry{k, std::move(description), std::move(info), std::move(factory)};
    for (auto& e : entries_) {
      if (e.key == k) {
        e = std::move(entry);
        return;
      }
    }
    entries_.push_back(std::move(entry));
  }
  /// add() with a default-constructed Info.
  void add(const std::string& key, std::string description, Factory factory) {
    add(key, std::move(description), Info{}, std::move(factory));
  }
  /// Replaces the factory of a key that is already there, keeping its description and
  /// info. ConfigError listing the known keys when it is not.
  void set_factory(const std::string& key, Factory factory) {
    if (!factory) throw ConfigError("registering " + what_ + "='" + key + "': the factory is empty.");
    std::lock_guard<std::mutex> lock(mutex_);
    find_locked(key).factory = std::move(factory);
  }
  /// Removes a key; false when it was not there.
  bool remove(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::string k = registry_key(key);
    auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.key == k; });
    if (it == entries_.end()) return false;
    entries_.erase(it);
    return true;
  }

  bool contains(const std::string& key) const {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::string k = registry_key(key);
    return std::any_of(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.key == k; });
  }
  /// Whether `key` is known and this build can construct it.
  bool has_factory(const std::string& key) const {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::string k = registry_key(key);
    for (const auto& e : entries_) {
      if (e.key == k) return static_cast<bool>(e.factory);
    }
    return false;
  }

  /// Builds the product of `key`. An unknown key: ConfigError listing the known ones; a key
  /// without a factory: NotSupportedError; a factory that returns null: Error.
  std::shared_ptr<Product> create(const std::string& key, Args... args) const {
    const Entry e = entry(key);
    if (!e.factory) {
      throw NotSupportedError(what_ + "='" + key + "' is known, but this build of Volt cannot construct it (" +
                              e.description + ").");
    }
    auto product = e.factory(std::forward<Args>(args)...);
    if (!product) throw Error("the factory of " + what_ + "='" + key + "' returned a null pointer.");
    return product;
  }
  /// The entry of `key` (a copy); ConfigError listing the known keys when there is none.
  Entry entry(const std::string& key) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return const_cast<InfoRegistry*>(this)->find_locked(key);
  }
  std::string description(const std::string& key) const { return entry(key).description; }
  Info info(const std::string& key) const { return entry(key).info; }

  /// Every entry, in registration order (a copy).
  std::vector<Entry> entries() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return entries_;
  }
  /// (key, description) pairs in key order.
  std::vector<std::pair<std::string, std::string>> list() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& e : entries_) out.emplace_back(e.key, e.description);
    std::sort(out.begin(), out.end());
    return out;
  }
  /// "auto, a, b, c": the reserved words, then the keys in key order.
  std::string known_keys() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return known_locked();
  }

 private:
  std::string known_locked() const {
    std::vector<std::string> keys;
    for (const auto& e : entries_) keys.push_back(e.key);
    std::sort(keys.begin(), keys.end());
    std::string out;
    for (const auto& r : reserved_) out += (out.empty() ? "" : ", ") + r;
    for (const auto& k : keys) out += (out.empty() ? "" : ", ") + k;
    return out;
  }
  Entry& find_locked(const std::string& key) {
    const std::string k = registry_key(key);
    for (auto& e : entries_) {
      if (e.key == k) return e;
    }
    throw ConfigError(what_ + "='" + key + "' is not known. Known " + what_ + " names: " + known_locked() + ".");
  }

  std::string what_;
  std::vector<std::string> reserved_;
  std::vector<Entry> entries_;
  mutable std::mutex mutex_;
};

/// A registry without typed metadata: key, description, factory.
template <typename Product, typename... Args>
using Registry = InfoRegistry<NoInfo, Product, Args...>;

}  // namespace volt
