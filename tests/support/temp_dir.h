#pragma once
// A fresh folder per test under the system's temporary directory, removed with everything in
// it when the object goes.
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

#include "volt/core/file_check.h"

namespace volt::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "volt_test") {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "_XXXXXX")).string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ec;
    volt::remove_tree(path_.string(), ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }
  /// The path of `name` inside the folder.
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string operator/(const std::string& name) const { return file(name); }

 private:
  std::filesystem::path path_;
};

}  // namespace volt::testing
