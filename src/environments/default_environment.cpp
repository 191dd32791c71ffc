#include "volt/environments/default_environment.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "volt/core/error.h"

namespace volt::environments {

bool DefaultEnvironment::detect(const Environ& env) {
  return env.has("WORLD_SIZE") && env.has("RANK");
}

int DefaultEnvironment::find_free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 29500;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 29500;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

DefaultEnvironment::DefaultEnvironment(const Environ& env) {
  external_ = detect(env);
  // A launcher sets RANK and WORLD_SIZE together; one without the other is a broken launch.
  for (const auto& [have, missing] : {std::pair<const char*, const char*>{"RANK", "WORLD_SIZE"}, {"WORLD_SIZE", "RANK"}}) {
    if (env.has(have) && !env.has(missing)) {
      throw ConfigError(std::string(have) + "=" + env.get_or(have, "") + " is set but " + missing +
                        " is not. A launcher (torchrun, srun, mpirun) sets both; set " + missing +
                        " too, or unset " + have + " to run a single process.");
    }
  }
  if (auto addr = env.get("MASTER_ADDR"); addr && !addr->empty()) main_address_ = *addr;
  if (auto port = env.get_int("MASTER_PORT")) {
    set_port(*port, "MASTER_PORT");
  } else {
    main_port_ = external_ ? 29500 : find_free_port();
  }
  world_size_ = env.get_int_or("WORLD_SIZE", 1);
  global_rank_ = env.get_int_or("RANK", 0);
  local_rank_ = env.get_int_or("LOCAL_RANK", 0);
  node_rank_ = env.get_int_or("GROUP_RANK", env.get_int_or("NODE_RANK", 0));
  if (world_size_ < 1 || global_rank_ >= world_size_) {
    throw ConfigError("RANK=" + std::to_string(global_rank_) + " with WORLD_SIZE=" + std::to_string(world_size_) +
                      ": the rank must be below the world size.");
  }
}

}  // namespace volt::environments
