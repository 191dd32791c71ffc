#pragma once
// Small assertions shared by the test suites.
#include <exception>
#include <string>
#include <vector>

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

/// Success when `text` (an error message) holds every one of `words`; a failure names the
/// missing word and shows the text, or says that no error was raised ("").
inline ::testing::AssertionResult mentions(const std::string& text, const std::vector<std::string>& words) {
  if (text.empty()) return ::testing::AssertionFailure() << "no error was raised";
  for (const auto& w : words) {
    if (text.find(w) == std::string::npos) return ::testing::AssertionFailure() << "'" << w << "' not in: " << text;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace volt::testing
