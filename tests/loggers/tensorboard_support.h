#pragma once
// Helpers of the TensorBoard tests: the independent Python reader (tensorboard_check.py)
// run on a folder, and the event files under it.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include "support/source_dir.h"

namespace volt::testing::tb {

inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

inline std::string check_script() {
  const std::filesystem::path dir = volt::testing::source_dir() / "tests" / "loggers";
  return (dir / "tensorboard_check.py").string();
}

/// Empty when /usr/bin/python3 can run the checker.
inline std::string python_skip_reason() {
  if (::access("/usr/bin/python3", X_OK) != 0) return "/usr/bin/python3 is not installed";
  return "";
}

struct PythonResult {
  int exit_code = -1;
  std::string out;  // stdout (the JSON) or stderr on failure
};

/// Runs `tensorboard_check.py dump path`; stdout and stderr are captured.
inline PythonResult python_dump(const std::string& path) {
  const std::string err_file = path + ".check-stderr";
  const std::string command =
      "/usr/bin/python3 " + shell_quote(check_script()) + " dump " + shell_quote(path) + " 2>" + shell_quote(err_file);
  PythonResult r;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) r.out.append(buf, n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (r.exit_code != 0) {
    FILE* f = std::fopen(err_file.c_str(), "r");
    r.out.clear();
    if (f != nullptr) {
      while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) r.out.append(buf, n);
      std::fclose(f);
    }
  }
  std::remove(err_file.c_str());
  return r;
}

/// Every events.out.tfevents.* file under `dir`, sorted.
inline std::vector<std::string> event_files(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) return out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) {
      out.push_back(e.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace volt::testing::tb
