#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace volt::accelerators {

/// The `devices` flag as written, before any hardware is looked at (Lightning's grammar):
/// an int n or "n" (a count), -1 (all), "auto", a list "0,1" / "[0, 1]", or "2," (the
/// one device with id 2).
struct DevicesSpec {
  enum class Kind { kAuto, kAll, kCount, kIds };
  Kind kind = Kind::kAuto;
  int64_t count = 0;
  std::vector<int64_t> ids;
  std::string text;  ///< as given, for messages

  /// Parses the flag; 0, "0", "" and an empty list are errors whatever the hardware.
  static DevicesSpec parse(const std::string& text);
};

}  // namespace volt::accelerators
