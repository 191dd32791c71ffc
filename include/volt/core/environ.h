#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace volt {

/// A snapshot of environment variables. Plans and cluster environments read this, not
/// getenv, so that a test (or `volt plan`) can describe any job without touching the
/// process environment.
class Environ {
 public:
  Environ() = default;
  explicit Environ(std::map<std::string, std::string> vars) : vars_(std::move(vars)) {}
  /// The variables of this process now.
  static Environ current();

  bool has(const std::string& key) const { return vars_.count(key) != 0; }
  /// The value, or nullopt when unset (an empty value counts as set).
  std::optional<std::string> get(const std::string& key) const;
  std::string get_or(const std::string& key, const std::string& fallback) const;
  /// A non-negative integer variable; unset: nullopt; anything else: ConfigError naming it.
  std::optional<int64_t> get_int(const std::string& key) const;
  int64_t get_int_or(const std::string& key, int64_t fallback) const;
  void set(const std::string& key, std::string value) { vars_[key] = std::move(value); }
  void unset(const std::string& key) { vars_.erase(key); }
  const std::map<std::string, std::string>& vars() const { return vars_; }

 private:
  std::map<std::string, std::string> vars_;
};

}  // namespace volt
