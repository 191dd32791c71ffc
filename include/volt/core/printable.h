#pragma once
// Text from a user (a file name, a key in a file) as a message can show it. A file name on Linux
// is any bytes; a JSON writer refuses what is not UTF-8 and a terminal garbles control bytes.
// Header-only and free of LibTorch: the `volt` front end and the project generator use it too.
#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

namespace volt {

/// Length of the valid UTF-8 sequence at text[i] (1 to 4), or 0 when the bytes there are not one
/// (a stray continuation byte, a truncated or overlong sequence, a surrogate, beyond U+10FFFF).
inline std::size_t utf8_sequence_length(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // beyond U+10FFFF
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return n;
}

/// True when text is valid UTF-8.
inline bool is_valid_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8_sequence_length(text, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

/// text with every byte that is not part of valid UTF-8, every control character and the
/// backslash written as an escape (\xff, \n, \\), so that a message naming it is valid UTF-8
/// and shows which bytes were given. Valid UTF-8 without control characters is returned as is.
inline std::string printable(std::string_view text) {
  static const char* const kHex = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const std::size_t n = utf8_sequence_length(text, i);
    if (n > 1) {
      out.append(text.substr(i, n));
      i += n;
      continue;
    }
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (n == 0 || c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
    ++i;
  }
  return out;
}

/// A double as text that reads back as the same double (17 significant digits, "%.17g"), for messages that
/// must not round what they report (a learning rate, a memory budget).
inline std::string exact_number_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

/// printable(text) in single quotes, as messages name a value that was given: 'x'.
inline std::string in_quotes(std::string_view text) { return "'" + printable(text) + "'"; }

}  // namespace volt
