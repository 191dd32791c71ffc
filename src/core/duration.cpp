#include "volt/core/duration.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "volt/core/error.h"

namespace volt {
namespace {

// Ten years: far above any training run, and exact in a double.
constexpr double kMaxSeconds = 10.0 * 366 * 24 * 3600;

[[noreturn]] void refuse(const std::string& what, const std::string& text, const std::string& why) {
  throw ConfigError(what + "='" + text + "' " + why +
                    ". Use \"DD:HH:MM:SS\" (days, hours, minutes, seconds, e.g. \"00:12:00:00\" for 12 hours) or a "
                    "number of seconds such as 3600.");
}

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

double parse_duration(const std::string& text, const std::string& what) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string::npos) refuse(what, text, "is empty");
  const auto last = text.find_last_not_of(" \t");
  const std::string s = text.substr(first, last - first + 1);
  double seconds = 0;
  if (s.find(':') != std::string::npos) {
    std::vector<std::string> fields;
    size_t start = 0;
    while (true) {
      const size_t colon = s.find(':', start);
      fields.push_back(s.substr(start, colon == std::string::npos ? std::string::npos : colon - start));
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
    if (fields.size() != 4) {
      refuse(what, text, "has " + std::to_string(fields.size()) + " fields separated by ':', not 4");
    }
    static const double kUnit[4] = {86400, 3600, 60, 1};
    static const char* kName[4] = {"days", "hours", "minutes", "seconds"};
    for (size_t i = 0; i < 4; ++i) {
      if (!all_digits(fields[i])) {
        refuse(what, text, std::string("has '") + fields[i] + "' as its " + kName[i] + ", not a whole number >= 0");
      }
      int64_t v = 0;
      const auto r = std::from_chars(fields[i].data(), fields[i].data() + fields[i].size(), v);
      if (r.ec != std::errc() || static_cast<double>(v) * kUnit[i] > kMaxSeconds) {
        refuse(what, text, "is longer than ten years");
      }
      seconds += static_cast<double>(v) * kUnit[i];
    }
  } else {
    // A plain decimal number: no sign, exponent, hexadecimal, inf or nan (strtod takes them all).
    if (s.find_first_not_of("0123456789.") != std::string::npos || s.find_first_of("0123456789") == std::string::npos ||
        s.find('.') != s.rfind('.')) {
      refuse(what, text, "is neither \"DD:HH:MM:SS\" nor a number of seconds");
    }
    seconds = std::strtod(s.c_str(), nullptr);
  }
  if (!std::isfinite(seconds) || seconds > kMaxSeconds) refuse(what, text, "is longer than ten years");
  return seconds;
}

std::string format_duration(double seconds) {
  const auto total = static_cast<int64_t>(seconds < 0 ? 0 : seconds);
  const int64_t days = total / 86400, rest = total % 86400;
  char hms[32];
  std::snprintf(hms, sizeof(hms), "%d:%02d:%02d", static_cast<int>(rest / 3600), static_cast<int>(rest / 60 % 60),
                static_cast<int>(rest % 60));
  if (days == 0) return hms;
  return std::to_string(days) + (days == 1 ? " day, " : " days, ") + hms;
}

}  // namespace volt
