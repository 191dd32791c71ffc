#pragma once
#include <string>

namespace volt {

/// Reads a length of time as Lightning's max_time and Timer(duration=...) take it:
/// "DD:HH:MM:SS" (four whole, non-negative fields: days, hours, minutes, seconds; a field
/// may exceed its unit, "00:36:00:00" is 36 hours) or a number of seconds ("90", "0.5").
/// Spaces around the text are ignored. Returns seconds. Throws ConfigError naming `what`
/// (e.g. "max_time"), the text given and the two accepted spellings.
double parse_duration(const std::string& text, const std::string& what);

/// Seconds as Lightning prints a timedelta of whole seconds: "0:05:03", "2 days, 1:00:00".
std::string format_duration(double seconds);

}  // namespace volt
