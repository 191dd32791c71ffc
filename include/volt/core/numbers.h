#pragma once
// Numbers read from a user (flags, YAML files, environment variables, HTTP bodies) go through
// these parsers, so that every entry point refuses the same bad text the same way: overflow,
// NaN and infinity, and values outside the range the caller allows. Header-only and free of
// LibTorch: the `volt` front end and the project generator use it too.
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace volt::numbers {

/// The outcome of parsing one number: the value, or why the text is not a number in range.
template <typename T>
struct Parsed {
  std::optional<T> value;  ///< set when the text is a number in range
  std::string problem;     ///< otherwise what is wrong, to follow the text: "is above the maximum 65535"
  /// True when the text is a well-formed number that is refused for its value: beyond 64 bits or a double's
  /// range, nan or inf, outside [min, max]. False for text that is not a number at all.
  bool out_of_range = false;
  explicit operator bool() const { return value.has_value(); }
};

namespace detail {

// from_chars refuses a leading '+', which users, YAML files and Python's int() write.
inline std::string_view drop_plus(std::string_view text) {
  if (text.size() > 1 && text[0] == '+' && text[1] != '-' && text[1] != '+') text.remove_prefix(1);
  return text;
}

template <typename T>
std::string show(T v) {
  return std::to_string(v);
}

inline std::string show(double v) {
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(v);
}

template <typename T>
Parsed<T> check_range(T v, T min, T max) {
  Parsed<T> out;
  if (v < min) {
    out.problem = "is below the minimum " + show(min);
  } else if (v > max) {
    out.problem = "is above the maximum " + show(max);
  } else {
    out.value = v;
  }
  out.out_of_range = !out.value;
  return out;
}

template <typename T>
Parsed<T> parse_integer(std::string_view text, T min, T max) {
  Parsed<T> out;
  const std::string_view body = drop_plus(text);
  if (body.empty()) {
    out.problem = "is empty, not a whole number";
    return out;
  }
  const bool negative = body[0] == '-';
  if (std::is_unsigned_v<T> && negative) {
    out.problem = "is negative; a non-negative whole number is needed";
    return out;
  }
  T v{};
  const auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), v);
  if (ec == std::errc::result_out_of_range) {
    // Only digits, but more than 64 bits hold: say how far the type goes, not "not a number".
    out.problem = negative ? "is too small: the smallest whole number here is " + show(min)
                           : "is too large: the largest whole number here is " + show(max);
    out.out_of_range = true;
    return out;
  }
  if (ec != std::errc() || end != body.data() + body.size()) {
    out.problem = "is not a whole number (digits with an optional sign, e.g. 3 or -1)";
    return out;
  }
  return check_range(v, min, max);
}

}  // namespace detail

/// A whole number in [min, max], in decimal: an optional sign ('+' or '-') and digits; no spaces,
/// fraction, exponent or base prefix. Text beyond 64 bits is "too large", not a wrapped value.
inline Parsed<int64_t> parse_int(std::string_view text, int64_t min = std::numeric_limits<int64_t>::min(),
                                 int64_t max = std::numeric_limits<int64_t>::max()) {
  return detail::parse_integer<int64_t>(text, min, max);
}

/// A non-negative whole number in [min, max] (the whole unsigned 64-bit range by default).
inline Parsed<uint64_t> parse_uint(std::string_view text, uint64_t min = 0,
                                   uint64_t max = std::numeric_limits<uint64_t>::max()) {
  return detail::parse_integer<uint64_t>(text, min, max);
}

/// A finite number in [min, max], in decimal or scientific notation (0.25, 1e-3, +2). Refuses nan,
/// inf and text whose value a double cannot hold (1e999), which from_chars and strtod would accept.
inline Parsed<double> parse_double(std::string_view text, double min = -std::numeric_limits<double>::max(),
                                   double max = std::numeric_limits<double>::max()) {
  Parsed<double> out;
  const std::string_view body = detail::drop_plus(text);
  if (body.empty()) {
    out.problem = "is empty, not a number";
    return out;
  }
  double v = 0;
  const auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), v, std::chars_format::general);
  if (ec == std::errc() && end == body.data() + body.size() && !std::isfinite(v)) {
    out.problem = "is not a finite number (nan and inf are refused)";
    out.out_of_range = true;
    return out;
  }
  if (ec == std::errc::result_out_of_range && end == body.data() + body.size()) {
    // Overflow; an underflow (1e-999) is out of range too and is refused rather than read as 0.
    out.problem = "is out of the range of a double (about 1e-308 to 1.8e308)";
    out.out_of_range = true;
    return out;
  }
  if (ec != std::errc() || end != body.data() + body.size()) {
    out.problem = "is not a number (e.g. 0.25, 3 or 1e-3)";
    return out;
  }
  return detail::check_range(v, min, max);
}

}  // namespace volt::numbers
