#include "volt/environments/default_environment.h"

#include <cstdlib>
#include <string>

#include "volt/core/error.h"

namespace volt::environments {
namespace {

int64_t int_var(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long long parsed = std::strtoll(v, &end, 10);
  if (end == v || *end != '\0' || parsed < 0) {
    throw ConfigError(std::string("environment variable ") + name + "='" + v +
                      "' is not a non-negative integer. Unset it or set it as torchrun does.");
  }
  return parsed;
}

}  // namespace

bool DefaultEnvironment::detect() {
  return std::getenv("WORLD_SIZE") != nullptr && std::getenv("RANK") != nullptr;
}

DefaultEnvironment::DefaultEnvironment() {
  external_ = detect();
  if (const char* addr = std::getenv("MASTER_ADDR"); addr != nullptr && *addr != '\0') main_address_ = addr;
  const int64_t port = int_var("MASTER_PORT", main_port_);
  if (port < 1 || port > 65535) {
    throw ConfigError("MASTER_PORT=" + std::to_string(port) + " is not a TCP port. Use 1-65535.");
  }
  main_port_ = static_cast<int>(port);
  world_size_ = int_var("WORLD_SIZE", 1);
  global_rank_ = int_var("RANK", 0);
  local_rank_ = int_var("LOCAL_RANK", 0);
  node_rank_ = int_var("GROUP_RANK", int_var("NODE_RANK", 0));
  if (world_size_ < 1 || global_rank_ >= world_size_) {
    throw ConfigError("RANK=" + std::to_string(global_rank_) + " with WORLD_SIZE=" + std::to_string(world_size_) +
                      ": the rank must be below the world size.");
  }
}

}  // namespace volt::environments
