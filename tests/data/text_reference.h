// tests/data/text_reference.py (pandas 1.5, sentencepiece 0.1.97 under /usr/bin/python3) for the tabular and
// text tests. Tests that need it skip, saying why, when /usr/bin/python3 lacks the module.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include "support/source_dir.h"

namespace volt::testing {

inline std::filesystem::path text_reference_script() {
  return volt::testing::source_dir() / "tests" / "data" / "text_reference.py";
}

/// Empty when /usr/bin/python3 imports `module`; else why not, with the Debian package to install.
inline std::string python_module_missing(const std::string& module, const std::string& package) {
  const std::string cmd = "/usr/bin/python3 -c 'import " + module + "' >/dev/null 2>&1";
  if (std::system(cmd.c_str()) == 0) return "";
  return "/usr/bin/python3 cannot import " + module + " (apt-get install " + package + ")";
}

/// Runs text_reference.py with `args` (already shell-quoted); its stdout as JSON, or throws.
inline nlohmann::json run_text_reference(const std::string& args) {
  const std::string cmd = "/usr/bin/python3 '" + text_reference_script().string() + "' " + args;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("cannot run " + cmd);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  const int status = ::pclose(pipe);
  if (status != 0) throw std::runtime_error(cmd + " failed with status " + std::to_string(status) + ": " + out);
  return nlohmann::json::parse(out);
}

/// `s` in single quotes for a shell command line.
inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace volt::testing
