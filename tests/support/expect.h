#pragma once
// Small assertions shared by the test suites.
#include <exception>
#include <string>

#include <gtest/gtest.h>

namespace volt::testing {

/// Runs `fn`, expects an exception of type E and returns its message ("" when none was
/// thrown; a failure is recorded for a missing or different exception).
template <typename E, typename Fn>
std::string error_message(Fn&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "unexpected exception type: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no exception thrown";
  return "";
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace volt::testing
