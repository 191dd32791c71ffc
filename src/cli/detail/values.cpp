#include "cli/detail/values.h"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <vector>

#include "volt/core/error.h"
#include "volt/core/numbers.h"
#include "volt/core/printable.h"

namespace volt::cli::detail {
namespace {

bool all_digits(const std::string& text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

// from_chars refuses a leading '+'; users and YAML files write it.
std::string drop_plus(const std::string& text) {
  return text.size() > 1 && text[0] == '+' && text[1] != '-' && text[1] != '+' ? text.substr(1) : text;
}

// Lightning's devices: a count ("2", "-1"), "auto", or ids ("0,1"; "2," is the single id 2).
// The YAML / Python list spelling "[0, 1]" is accepted too, and "[2]" keeps meaning the id 2.
std::optional<std::string> to_devices(std::string text) {
  text.erase(std::remove_if(text.begin(), text.end(), [](unsigned char c) { return std::isspace(c) != 0; }),
             text.end());
  if (lower(text) == "auto") return "auto";
  if (auto n = numbers::parse_int(text)) return std::to_string(*n.value);
  const bool bracketed = text.size() >= 2 && text.front() == '[' && text.back() == ']';
  if (bracketed) text = text.substr(1, text.size() - 2) + ",";
  if (text.find(',') == std::string::npos) return std::nullopt;
  std::vector<std::string> ids;
  std::stringstream in(text);
  for (std::string id; std::getline(in, id, ',');) {
    auto n = numbers::parse_uint(id);
    if (!all_digits(id) || !n) return std::nullopt;
    ids.push_back(std::to_string(*n.value));
  }
  std::string joined;
  for (const auto& id : ids) joined += (joined.empty() ? "" : ",") + id;
  return ids.size() == 1 ? joined + "," : joined;
}

}  // namespace

const char* getter_of(Kind kind) {
  switch (kind) {
    case Kind::kBool:
      return "get_bool";
    case Kind::kInt:
      return "get_int";
    case Kind::kDouble:
      return "get_double";
    case Kind::kString:
    case Kind::kDevices:
      return "get_string";
    default:
      return "trainer_options()";
  }
}

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

std::optional<bool> to_bool(const std::string& text) {
  const std::string t = lower(text);
  if (t == "true" || t == "yes" || t == "on" || t == "1") return true;
  if (t == "false" || t == "no" || t == "off" || t == "0") return false;
  return std::nullopt;
}

bool is_null(const std::string& text) {
  const std::string t = lower(text);
  return t == "null" || t == "none" || t == "~";
}

bool reads_as_number(const std::string& text) {
  const std::string body = drop_plus(text);
  double result{};
  auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), result);
  return !body.empty() && ec == std::errc() && end == body.data() + body.size();
}

// Every number goes through volt::numbers: overflow, nan/inf and sign are refused with the reason.
Value parse_value(Kind kind, const std::string& text, const std::string& where, const std::string& key) {
  std::string problem;
  switch (kind) {
    case Kind::kBool:
      if (auto b = to_bool(text)) return *b;
      break;
    case Kind::kInt: {
      const auto n = numbers::parse_int(text);
      if (n) return *n.value;
      if (n.out_of_range) problem = n.problem;
      break;
    }
    case Kind::kDouble: {
      const auto d = numbers::parse_double(text);
      if (d) return *d.value;
      if (d.out_of_range) problem = d.problem;
      break;
    }
    case Kind::kString:
      return text;
    case Kind::kOptionalInt: {
      if (is_null(text)) return std::optional<int64_t>();
      const auto n = numbers::parse_int(text);
      if (n) return std::optional<int64_t>(*n.value);
      if (n.out_of_range) problem = n.problem;
      break;
    }
    case Kind::kOptionalUint: {
      if (is_null(text)) return std::optional<uint64_t>();
      const auto n = numbers::parse_uint(text);
      if (n) return std::optional<uint64_t>(*n.value);
      if (n.out_of_range) problem = n.problem;
      break;
    }
    case Kind::kBatchLimit:
      return BatchLimit::parse(text, where);
    case Kind::kDevices:
      if (auto devices = to_devices(text)) return *devices;
      break;
    case Kind::kLogger: {
      // A switch, or names checked by the Trainer against the logger registry.
      if (auto b = to_bool(text)) return LoggerOption(*b);
      std::string names = text;
      if (names.size() >= 2 && names.front() == '[' && names.back() == ']') names = names.substr(1, names.size() - 2);
      if (!names.empty()) return LoggerOption(names);
      break;
    }
  }
  // A number refused for its value (not its spelling) also reads as key=value, the form the Trainer's own
  // checks use, so that every message about one option can be found the same way.
  throw ConfigError(where + " expects " + flag_type_expects(kind) + ", got '" + printable(text) + "'" +
                    (problem.empty() ? "" : ": " + key + "=" + printable(text) + " " + problem));
}

}  // namespace volt::cli::detail
