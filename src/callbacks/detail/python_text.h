// Python's spelling of the values ModelCheckpoint puts in its messages and state keys, so they
// read as Lightning's do. Shared by model_checkpoint.cpp and model_checkpoint_names.cpp.
#pragma once
#include <string>

#include "volt/core/types.h"

namespace volt::callbacks::detail {

/// A Python str literal: 'a\'b'.
inline std::string py_str(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\\' || c == '\'') out += '\\';
    out += c;
  }
  return out + "'";
}

/// A Python list of the metric names: [a, b].
inline std::string key_list(const MetricMap& metrics) {
  std::string out = "[";
  for (const auto& [key, value] : metrics) {
    if (out.size() > 1) out += ", ";
    out += key;
  }
  return out + "]";
}

}  // namespace volt::callbacks::detail
