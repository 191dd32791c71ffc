#include "volt/accelerators/devices.h"

#include <algorithm>
#include <sstream>

#include "volt/core/error.h"
#include "volt/core/numbers.h"

namespace volt::accelerators {
namespace {

bool all_digits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  const auto e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// No machine has a million devices; the bound keeps counts times nodes far from overflow.
constexpr int64_t kMaxDevices = 1000000;

int64_t device_number(const std::string& raw, const std::string& part, const char* what) {
  const auto n = numbers::parse_int(part, 0, kMaxDevices - 1);
  if (!n) throw ConfigError("devices='" + raw + "' has the " + what + " " + part + ", which " + n.problem + ".");
  return *n.value;
}

const char* kForms = "Use a count (devices=2), -1 for all, \"auto\", or a list of device ids (devices=\"0,1\", \"[0, 1]\", "
                     "or \"1,\" for the device with id 1).";

}  // namespace

DevicesSpec DevicesSpec::parse(const std::string& raw) {
  DevicesSpec spec;
  spec.text = raw;
  std::string text = trim(raw);
  const bool bracketed = text.size() >= 2 && text.front() == '[' && text.back() == ']';
  if (bracketed) text = trim(text.substr(1, text.size() - 2));
  if (text.empty()) {
    throw ConfigError("devices='" + raw + "' selects no device. " + kForms);
  }
  if (!bracketed && text == "auto") return spec;
  if (!bracketed && text == "-1") {
    spec.kind = Kind::kAll;
    return spec;
  }
  if (bracketed || text.find(',') != std::string::npos) {
    spec.kind = Kind::kIds;
    std::stringstream ss(text);
    std::string part;
    while (std::getline(ss, part, ',')) {
      part = trim(part);
      if (part.empty()) continue;
      if (!all_digits(part)) {
        throw ConfigError("devices='" + raw + "' has '" + part + "', which is not a device id. " + kForms);
      }
      const int64_t id = device_number(raw, part, "device id");
      if (std::find(spec.ids.begin(), spec.ids.end(), id) != spec.ids.end()) {
        throw ConfigError("devices='" + raw + "' lists device " + part + " twice. List each id once.");
      }
      spec.ids.push_back(id);
    }
    if (spec.ids.empty()) throw ConfigError("devices='" + raw + "' is an empty list. " + kForms);
    return spec;
  }
  if (!all_digits(text)) throw ConfigError("devices='" + raw + "' is not understood. " + kForms);
  spec.kind = Kind::kCount;
  spec.count = device_number(raw, text, "device count");
  if (spec.count == 0) throw ConfigError("devices=" + raw + " asks for no device. " + kForms);
  return spec;
}

}  // namespace volt::accelerators
