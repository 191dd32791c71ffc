#include "volt/core/logger_option.h"

namespace volt {

LoggerOption::LoggerOption(const std::string& names) {
  // Every comma-separated field is kept, empty ones too, so that the Trainer can name
  // "csv,,tensorboard" as given instead of reading it as two names.
  size_t start = 0;
  for (;;) {
    const size_t comma = names.find(',', start);
    std::string name = names.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t first = name.find_first_not_of(" \t");
    const size_t last = name.find_last_not_of(" \t");
    names_.push_back(first == std::string::npos ? std::string() : name.substr(first, last - first + 1));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
}

std::string LoggerOption::to_string() const {
  if (names_.empty()) return on_ ? "true" : "false";
  std::string out;
  for (const auto& n : names_) out += (out.empty() ? "" : ",") + n;
  return out;
}

}  // namespace volt
