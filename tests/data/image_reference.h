// tests/data/image_reference.py (PIL 9, torchvision 0.14 under /usr/bin/python3) for the image tests.
// Tests that need it skip, saying why, when /usr/bin/python3 lacks PIL or torchvision.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/from_blob.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>
#include "support/source_dir.h"

namespace volt::testing {

inline std::filesystem::path image_reference_script() {
  return volt::testing::source_dir() / "tests" / "data" / "image_reference.py";
}

/// Empty when /usr/bin/python3 imports `modules` (e.g. "PIL" or "PIL, torchvision"); else why not.
inline std::string python_missing(const std::string& modules) {
  const std::string cmd = "/usr/bin/python3 -c 'import " + modules + "' >/dev/null 2>&1";
  if (std::system(cmd.c_str()) == 0) return "";
  return "/usr/bin/python3 cannot import " + modules + " (apt-get install python3-pil python3-torchvision)";
}

/// Runs image_reference.py with `args`; its stdout, or throws with the exit status.
inline std::string run_image_reference(const std::string& args) {
  const std::string cmd = "/usr/bin/python3 '" + image_reference_script().string() + "' " + args;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("cannot run " + cmd);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  const int status = ::pclose(pipe);
  if (status != 0) throw std::runtime_error(cmd + " failed with status " + std::to_string(status) + ": " + out);
  return out;
}

/// A raw file as a tensor of `shape` and `dtype` (a copy).
inline at::Tensor read_raw(const std::string& path, std::vector<int64_t> shape, at::ScalarType dtype) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return at::from_blob(bytes.data(), shape, dtype).clone();
}

}  // namespace volt::testing
