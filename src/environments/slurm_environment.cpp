#include "volt/environments/slurm_environment.h"

#include <sstream>

#include "volt/core/error.h"
#include "volt/core/numbers.h"

namespace volt::environments {
namespace {

// Far more hosts than any SLURM job has; a node list beyond it is a mistake, not a job.
constexpr int64_t kMaxSlurmHosts = 100000;

/// Splits on commas that are not inside brackets.
std::vector<std::string> split_top_level(const std::string& s, const std::string& whole) {
  std::vector<std::string> parts;
  std::string cur;
  int depth = 0;
  for (char c : s) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0 || depth > 1) throw ConfigError("SLURM node list '" + whole + "' has unbalanced brackets.");
    if (c == ',' && depth == 0) {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (depth != 0) throw ConfigError("SLURM node list '" + whole + "' has unbalanced brackets.");
  parts.push_back(cur);
  return parts;
}

bool digits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

}  // namespace

std::vector<std::string> expand_slurm_nodelist(const std::string& nodelist) {
  std::vector<std::string> hosts;
  if (nodelist.empty()) throw ConfigError("SLURM node list is empty.");
  for (const auto& item : split_top_level(nodelist, nodelist)) {
    if (item.empty()) throw ConfigError("SLURM node list '" + nodelist + "' has an empty entry.");
    const auto open = item.find('[');
    if (open == std::string::npos) {
      hosts.push_back(item);
      continue;
    }
    const auto close = item.find(']', open);
    if (close == std::string::npos) throw ConfigError("SLURM node list '" + nodelist + "' has unbalanced brackets.");
    const std::string prefix = item.substr(0, open);
    const std::string suffix = item.substr(close + 1);
    std::stringstream ranges(item.substr(open + 1, close - open - 1));
    std::string range;
    while (std::getline(ranges, range, ',')) {
      const auto dash = range.find('-');
      const std::string lo = range.substr(0, dash);
      const std::string hi = dash == std::string::npos ? lo : range.substr(dash + 1);
      // Numbers from the environment: digits beyond 64 bits, or a range of more hosts than a job has, are
      // errors (std::stoll threw std::out_of_range; a huge range expanded for ever).
      const auto first = numbers::parse_int(lo, 0), last = numbers::parse_int(hi, 0);
      if (!digits(lo) || !digits(hi) || !first || !last || *last.value < *first.value) {
        throw ConfigError("SLURM node list '" + nodelist + "' has a bad range '" + range + "'.");
      }
      if (*last.value - *first.value >= kMaxSlurmHosts - static_cast<int64_t>(hosts.size())) {
        throw ConfigError("SLURM node list '" + nodelist + "' names more than " + std::to_string(kMaxSlurmHosts) +
                          " hosts (range '" + range + "').");
      }
      const size_t width = lo.size();  // "01-03" keeps its zero padding
      for (int64_t i = *first.value; i <= *last.value; ++i) {
        std::string n = std::to_string(i);
        if (n.size() < width) n.insert(0, width - n.size(), '0');
        hosts.push_back(prefix + n + suffix);
      }
    }
  }
  return hosts;
}

bool SLURMEnvironment::detect(const Environ& env) {
  if (!env.has("SLURM_NTASKS")) return false;
  const std::string job_name = env.get_or("SLURM_JOB_NAME", "");
  return job_name != "bash" && job_name != "interactive";
}

SLURMEnvironment::SLURMEnvironment(const Environ& env, Options options) : options_(std::move(options)), env_(env) {
  auto need = [&](const char* key) {
    auto v = env.get_int(key);
    if (!v) {
      throw ConfigError(std::string("a SLURM job must set ") + key +
                        "; it is missing. Start the program with srun inside the job script.");
    }
    return *v;
  };
  world_size_ = need("SLURM_NTASKS");
  global_rank_ = need("SLURM_PROCID");
  local_rank_ = need("SLURM_LOCALID");
  node_rank_ = need("SLURM_NODEID");
  if (world_size_ < 1 || global_rank_ >= world_size_) {
    throw ConfigError("SLURM_PROCID=" + std::to_string(global_rank_) + " is not below SLURM_NTASKS=" +
                      std::to_string(world_size_) + ".");
  }
  job_id_ = env.get_or("SLURM_JOB_ID", "");
  if (env.has("SLURM_ARRAY_JOB_ID") && env.has("SLURM_ARRAY_TASK_ID")) {
    job_id_ = env.get_or("SLURM_ARRAY_JOB_ID", "") + "_" + env.get_or("SLURM_ARRAY_TASK_ID", "");
  }
  if (auto addr = env.get("MASTER_ADDR")) {
    main_address_ = *addr;
  } else {
    const auto list = env.get("SLURM_NODELIST") ? env.get("SLURM_NODELIST") : env.get("SLURM_JOB_NODELIST");
    main_address_ = list ? expand_slurm_nodelist(*list).front() : "127.0.0.1";
  }
  if (auto port = env.get_int("MASTER_PORT")) {
    set_port(*port, "MASTER_PORT");
  } else {
    const std::string id = env.get_or("SLURM_JOB_ID", "0");
    const std::string tail = id.size() > 4 ? id.substr(id.size() - 4) : id;
    main_port_ = 15000 + (digits(tail) ? static_cast<int>(*numbers::parse_int(tail).value) : 0);
  }
}

void SLURMEnvironment::validate(int64_t devices_per_node, int64_t num_nodes) const {
  if (auto per_node = env_.get("SLURM_NTASKS_PER_NODE")) {
    // "4", "4(x2)" or "2(x3),1": uniform counts only.
    const std::string first = per_node->substr(0, per_node->find_first_of("(,"));
    const bool uniform = per_node->find(',') == std::string::npos;
    const auto count = numbers::parse_int(first);
    if (!digits(first) || !uniform || !count || *count.value != devices_per_node) {
      throw ConfigError("the SLURM job runs SLURM_NTASKS_PER_NODE=" + *per_node + " tasks per node, but the Trainer "
                        "uses devices=" + std::to_string(devices_per_node) + " per node. Set --ntasks-per-node=" +
                        std::to_string(devices_per_node) + " in the job script, or devices=" + first + ".");
    }
  }
  if (auto nodes = env_.get_int("SLURM_NNODES"); nodes && *nodes != num_nodes) {
    throw ConfigError("the SLURM job has SLURM_NNODES=" + std::to_string(*nodes) + " nodes, but the Trainer uses "
                      "num_nodes=" + std::to_string(num_nodes) + ". Set --nodes=" + std::to_string(num_nodes) +
                      " in the job script, or num_nodes=" + std::to_string(*nodes) + ".");
  }
  if (world_size_ != devices_per_node * num_nodes) {
    throw ConfigError("the SLURM job has SLURM_NTASKS=" + std::to_string(world_size_) + " tasks, but devices=" +
                      std::to_string(devices_per_node) + " x num_nodes=" + std::to_string(num_nodes) + " = " +
                      std::to_string(devices_per_node * num_nodes) + " processes. Make them agree.");
  }
}

}  // namespace volt::environments
