#include "volt/environments/fixed_layout_environment.h"

#include "volt/core/error.h"

namespace volt::environments {

void FixedLayoutEnvironment::check_ranks(const std::string& source) const {
  if (world_size_ < 1 || global_rank_ >= world_size_) {
    throw ConfigError(source + ": rank " + std::to_string(global_rank_) + " with world size " +
                      std::to_string(world_size_) + "; the rank must be below the world size.");
  }
}

void FixedLayoutEnvironment::set_port(int64_t port, const std::string& variable) {
  if (port < 1 || port > 65535) {
    throw ConfigError(variable + "=" + std::to_string(port) + " is not a TCP port. Use 1-65535.");
  }
  main_port_ = static_cast<int>(port);
}

}  // namespace volt::environments
