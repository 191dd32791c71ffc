// Lightning 2.2.5 from ../shared/oracle (a test tool; its README says how it runs), unpacked once per
// build folder for the tests that compare with it. Tests that need it skip, saying why, without it.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include "support/source_dir.h"

namespace volt::testing {

/// ../shared/oracle/setup.sh beside the source tree: VOLT_SOURCE_DIR (ctest sets it), else the tree this
/// header is in.
inline std::filesystem::path oracle_setup() {
  return source_dir() / ".." / "shared" / "oracle" / "setup.sh";
}

inline bool oracle_available() { return std::filesystem::exists(oracle_setup()); }

/// Lightning's PYTHONPATH, or "" without the oracle or when it could not be unpacked. The first caller
/// unpacks it into ./lightning_oracle; test processes that ctest runs at the same time wait on a lock. The
/// path goes to a file beside the folder first, because setup.sh replaces the folder as it unpacks.
inline std::string oracle_pythonpath() {
  if (!oracle_available()) return "";
  const std::filesystem::path dest = std::filesystem::absolute("lightning_oracle");
  const std::filesystem::path ready = dest / ".pythonpath";
  if (!std::filesystem::exists(ready)) {
    const std::string tmp = dest.string() + ".pythonpath.tmp";
    const std::string unpack = "bash '" + oracle_setup().string() + "' '" + dest.string() +
                               "' 2>/dev/null | grep '^PYTHONPATH=' | tail -1 | cut -d= -f2- > '" + tmp + "' && mv '" +
                               tmp + "' '" + ready.string() + "'";
    const std::string cmd =
        "flock '" + dest.string() + ".lock' bash -c \"[ -f '" + ready.string() + "' ] || { " + unpack + "; }\"";
    if (std::system(cmd.c_str()) != 0) return "";
  }
  std::ifstream in(ready);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace volt::testing
