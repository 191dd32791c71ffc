#pragma once
#include <cstdint>
#include <string>

namespace volt {

/// The batch count of a loader without a length (one over an IterableDataset): Lightning's
/// float("inf"). Loops run such a loader until its stream ends.
inline constexpr int64_t kInfiniteBatches = INT64_MAX;

/// A number of batches (count) or a share of a loader (fraction in (0, 1]).
/// Lightning's int-or-float flags: limit_*_batches, val_check_interval.
struct BatchLimit {
  double value = 1.0;
  bool is_fraction = true;

  static BatchLimit count(int64_t n) { return {static_cast<double>(n), false}; }
  static BatchLimit fraction(double f) { return {f, true}; }
  /// "10" -> count 10, "0.25" or "1.0" -> fraction (as Lightning reads int vs float).
  static BatchLimit parse(const std::string& text, const std::string& flag);
  /// The number of batches this limit allows out of `available`.
  int64_t apply(int64_t available) const;
  std::string to_string() const;
  bool operator==(const BatchLimit& o) const { return value == o.value && is_fraction == o.is_fraction; }
};

}  // namespace volt
