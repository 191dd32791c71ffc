#include "volt/environments/lsf_environment.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <vector>

#include "environments/detail/launch_variables.h"

namespace volt::environments {

using detail::require;
using detail::require_text;

bool LSFEnvironment::detect(const Environ& env) {
  for (const char* key : {"LSB_JOBID", "LSB_DJOB_RANKFILE", "JSM_NAMESPACE_LOCAL_RANK", "JSM_NAMESPACE_SIZE"}) {
    if (!env.has(key)) return false;
  }
  return true;
}

LSFEnvironment::LSFEnvironment(const Environ& env) {
  const std::string who = "LSF's jsrun";
  world_size_ = require(env, "JSM_NAMESPACE_SIZE", who);
  global_rank_ = require(env, "JSM_NAMESPACE_RANK", who);
  local_rank_ = require(env, "JSM_NAMESPACE_LOCAL_RANK", who);
  check_ranks("JSM_NAMESPACE_RANK/JSM_NAMESPACE_SIZE");
  const std::string rankfile = require_text(env, "LSB_DJOB_RANKFILE", who);
  std::ifstream in(rankfile);
  if (!in) throw ConfigError("LSB_DJOB_RANKFILE=" + rankfile + " cannot be read; is this an LSF job?");
  std::vector<std::string> hosts;
  std::string line;
  bool first = true;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (first) {  // the launch (batch) node runs no rank
      first = false;
      continue;
    }
    if (std::find(hosts.begin(), hosts.end(), line) == hosts.end()) hosts.push_back(line);
  }
  if (hosts.empty()) throw ConfigError("LSB_DJOB_RANKFILE=" + rankfile + " lists no compute host.");
  main_address_ = hosts.front();
  std::string self = env.get_or("HOSTNAME", "");
  if (self.empty()) {
    char buf[256] = {0};
    if (::gethostname(buf, sizeof(buf) - 1) == 0) self = buf;
  }
  auto it = std::find(hosts.begin(), hosts.end(), self);
  node_rank_ = it == hosts.end() ? 0 : static_cast<int64_t>(it - hosts.begin());
  if (auto port = env.get_int("MASTER_PORT")) {
    set_port(*port, "MASTER_PORT");
  } else {
    set_port(10000 + require(env, "LSB_JOBID", who) % 1000, "LSB_JOBID-derived port");
  }
}

}  // namespace volt::environments
