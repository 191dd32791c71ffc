#pragma once

#include <cstdlib>
#include <filesystem>

namespace volt::testing {

/// The repository root: VOLT_SOURCE_DIR when set (ctest sets it), else the tree this header is in, so that a
/// test binary run by hand finds the same files instead of failing (or crashing on a null path).
inline std::filesystem::path source_dir() {
  const char* src = std::getenv("VOLT_SOURCE_DIR");
  if (src != nullptr && *src != '\0') return std::filesystem::path(src);
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path();
}

}  // namespace volt::testing
