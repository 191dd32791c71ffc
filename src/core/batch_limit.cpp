#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>
#include <system_error>

#include "volt/core/batch_limit.h"
#include "volt/core/error.h"

namespace volt {
namespace {

bool all_of_chars(const std::string& text, const char* allowed) {
  return !text.empty() && text.find_first_not_of(allowed) == std::string::npos;
}

[[noreturn]] void throw_bad_limit(const std::string& text, const std::string& flag) {
  throw ConfigError(flag + " expects a number of batches like 10 or a fraction of the loader " +
                    "like 0.25, got '" + text + "'");
}

}  // namespace

BatchLimit BatchLimit::parse(const std::string& text, const std::string& flag) {
  // from_chars rejects a leading '+', which Python's int() and float() accept.
  const std::string body = !text.empty() && text[0] == '+' ? text.substr(1) : text;
  const std::string unsigned_body = !body.empty() && body[0] == '-' ? body.substr(1) : body;
  if (body.size() != text.size() && body.size() != unsigned_body.size()) {
    throw_bad_limit(text, flag);
  }
  const char* first = body.data();
  const char* last = body.data() + body.size();

  // Lightning tells the two apart by Python type, so "1" is a count and "1.0" a fraction.
  if (all_of_chars(unsigned_body, "0123456789")) {
    int64_t n = 0;
    auto [end, ec] = std::from_chars(first, last, n);
    if (ec != std::errc() || end != last) throw_bad_limit(text, flag);
    return count(n);
  }
  // Decimal notation only: from_chars would also take "inf" and "nan", which are no limits.
  if (!all_of_chars(unsigned_body, "0123456789.eE+-")) throw_bad_limit(text, flag);
  double f = 0.0;
  auto [end, ec] = std::from_chars(first, last, f);
  if (ec != std::errc() || end != last || !std::isfinite(f)) throw_bad_limit(text, flag);
  return fraction(f);
}

int64_t BatchLimit::apply(int64_t available) const {
  if (!is_fraction) return std::min(static_cast<int64_t>(value), available);
  // Truncation as Lightning's int(num_batches * limit), but a positive share of a non-empty
  // loader never rounds down to zero batches.
  const auto n = static_cast<int64_t>(static_cast<double>(available) * value);
  if (n == 0 && value > 0.0 && available > 0) return 1;
  return n;
}

std::string BatchLimit::to_string() const {
  if (!is_fraction) return std::to_string(static_cast<int64_t>(value));
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  std::string text(buf, ec == std::errc() ? end : buf);
  // Keep the text a fraction when it is read back: 1.0 must not become the count 1.
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}

}  // namespace volt
