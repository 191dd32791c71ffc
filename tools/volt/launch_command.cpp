// `volt launch`: torchrun's static launcher for Volt programs (and any program that reads
// torchrun's variables). Starts --nproc-per-node copies of the program on this node, each
// with RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR and
// MASTER_PORT, forwards SIGINT/SIGTERM to them, and when one fails stops the rest and
// reports which rank, on which host, how, and its last lines of stderr.
#include "launch_command.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "volt/core/error.h"
#include "volt/core/input_file.h"
#include "volt/core/numbers.h"
#include "volt/core/printable.h"
#include "volt/environments/default_environment.h"
#include "volt/strategies/launchers/worker_group.h"

namespace {

constexpr const char* kLaunchUsage =
    "usage: volt launch [--nproc-per-node N] [--nnodes M] [--node-rank K] [--master-addr ADDR]\n"
    "                   [--master-port PORT] [--stop-timeout SEC] -- PROGRAM [ARGS...]\n"
    "\n"
    "Starts N copies of PROGRAM on this node as ranks K*N .. K*N+N-1 of a job of N*M processes, with\n"
    "torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR,\n"
    "MASTER_PORT). Run the same command on every node with its --node-rank; --master-addr is node 0's\n"
    "address. Defaults: N=1, M=1, K=0, ADDR=127.0.0.1, PORT: a free port on one node, 29500 on several.\n"
    "When a rank fails, the others are stopped (SIGTERM, then SIGKILL) and the launcher exits non-zero\n"
    "after naming the rank, its host, its exit code or signal and its last lines of stderr. SIGINT or\n"
    "SIGTERM to the launcher reaches every rank; ranks then get --stop-timeout seconds (default 60) to\n"
    "checkpoint and exit.\n";

std::atomic<int> g_signal{0};

extern "C" void forward(int sig) {
  g_signal.store(sig);
  volt::strategies::launchers::WorkerGroup::forward_signal(sig);
}

int64_t parse_int(const std::string& flag, const std::string& value, int64_t min, int64_t max) {
  const auto n = volt::numbers::parse_int(value, min, max);
  if (!n) {
    throw volt::ConfigError(flag + " '" + volt::printable(value) + "' is not valid: it " + n.problem +
                            "; use a whole number from " + std::to_string(min) + " to " + std::to_string(max) + ".");
  }
  return *n.value;
}

/// PROGRAM as a path: as given when it holds a '/', else found on PATH.
// True for a regular file this user may execute (a folder passes access(X_OK) too).
bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::string resolve_program(const std::string& program) {
  if (program.empty()) throw volt::ConfigError("the program after -- is an empty word; give its path or name.");
  if (program.find('/') != std::string::npos) {
    if (const std::string problem = volt::input_file_problem(program); !problem.empty()) {
      throw volt::ConfigError("the program '" + volt::printable(program) + "' " + problem +
                              "; give the path of "
                              "the program to start, e.g. ./build/train.");
    }
    if (!is_executable_file(program)) {
      throw volt::ConfigError("the program '" + volt::printable(program) + "' is not executable (chmod +x it).");
    }
    return program;
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = dirs.find(':', start);
    const std::string dir = dirs.substr(start, end == std::string::npos ? std::string::npos : end - start);
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (is_executable_file(candidate)) return candidate;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  throw volt::ConfigError("the program '" + volt::printable(program) +
                          "' is not on PATH. Give its path, e.g. ./build/" + volt::printable(program) + ".");
}

}  // namespace

int cmd_launch(int argc, char** argv) {
  int64_t nproc = 1, nnodes = 1, node_rank = 0, stop_timeout = 60;
  std::string master_addr = "127.0.0.1";
  int64_t master_port = -1;
  bool addr_given = false;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "-h" || a == "--help") {
      std::cout << kLaunchUsage;
      return 0;
    }
    std::string key = a, value;
    const auto eq = a.find('=');
    if (eq != std::string::npos) {
      key = a.substr(0, eq);
      value = a.substr(eq + 1);
    } else if (a.rfind("--", 0) == 0) {
      if (i + 1 >= argc) throw volt::ConfigError(a + " needs a value.\n" + kLaunchUsage);
      value = argv[++i];
    } else {
      throw volt::ConfigError("'" + volt::printable(a) +
                              "' is not an option of volt launch; put the program after --, e.g. "
                              "volt launch --nproc-per-node 2 -- ./train --config config.yaml");
    }
    if (key == "--nproc-per-node" || key == "--nproc_per_node") {
      nproc = parse_int(key, value, 1, 4096);
    } else if (key == "--nnodes") {
      nnodes = parse_int(key, value, 1, 65536);
    } else if (key == "--node-rank" || key == "--node_rank") {
      node_rank = parse_int(key, value, 0, 65535);
    } else if (key == "--master-addr" || key == "--master_addr") {
      // An empty address would reach the ranks as MASTER_ADDR= and fail in each of them, later.
      if (value.empty() || value.find_first_of(" \t\n") != std::string::npos) {
        throw volt::ConfigError(key + " '" + volt::printable(value) +
                                "' is not an address: give node 0's host name or IP address, e.g. --master-addr "
                                "10.0.0.1 (leave the flag out on one node: 127.0.0.1).");
      }
      master_addr = value;
      addr_given = true;
    } else if (key == "--master-port" || key == "--master_port") {
      master_port = parse_int(key, value, 1, 65535);
    } else if (key == "--stop-timeout") {
      stop_timeout = parse_int(key, value, 1, 86400);
    } else {
      throw volt::ConfigError("unknown option " + volt::printable(key) + " for volt launch.\n" + kLaunchUsage);
    }
  }
  if (i >= argc) throw volt::ConfigError("no program to launch: give it after --.\n" + std::string(kLaunchUsage));
  if (node_rank >= nnodes) {
    throw volt::ConfigError("--node-rank " + std::to_string(node_rank) + " with --nnodes " + std::to_string(nnodes) +
                            ": node ranks run from 0 to " + std::to_string(nnodes - 1) + ".");
  }
  if (nnodes > 1 && !addr_given) {
    throw volt::ConfigError("--nnodes " + std::to_string(nnodes) + " needs --master-addr: the address of node 0 "
                            "that every node can reach (and the same --master-port on every node).");
  }
  if (master_port < 0) master_port = nnodes > 1 ? 29500 : volt::environments::DefaultEnvironment::find_free_port();
  const unsigned cores = std::thread::hardware_concurrency();
  if (cores > 0 && nproc > static_cast<int64_t>(cores)) {
    std::cerr << "volt launch: warning: --nproc-per-node " << nproc << " is more than this machine's " << cores
              << " CPU cores; CPU ranks will compete for them.\n";
  }
  std::vector<std::string> args(argv + i, argv + argc);
  args[0] = resolve_program(args[0]);
  const int64_t world = nproc * nnodes;

  struct sigaction action {};
  action.sa_handler = forward;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  volt::strategies::launchers::WorkerGroup group;
  for (int64_t local = 0; local < nproc; ++local) {
    const auto spec = volt::strategies::launchers::torchrun_worker(args, node_rank, local, nproc, world, master_addr,
                                                        static_cast<int>(master_port), "volt-launch");
    group.start(spec);
  }
  std::cerr << "volt launch: started ranks " << node_rank * nproc << ".." << node_rank * nproc + nproc - 1 << " of "
            << world << " on " << volt::strategies::launchers::WorkerGroup::host_name() << " (rendezvous " << master_addr << ":"
            << master_port << ")\n";
  for (;;) {
    if (const int sig = g_signal.load()) {
      std::cerr << "volt launch: got signal " << sig << "; waiting up to " << stop_timeout
                << " s for the ranks to stop\n";
      int code = 0;
      for (const auto& e : group.wait_all(std::chrono::seconds(stop_timeout))) {
        if (e.failed() && code == 0) code = e.exit_code;
      }
      return code != 0 ? code : 128 + sig;
    }
    if (auto f = group.failure(std::chrono::milliseconds(100))) {
      group.stop_all();
      std::cerr << "volt launch: " << f->describe() << "volt launch: stopped the other ranks.\n";
      return f->exit_code != 0 ? f->exit_code : 1;
    }
    if (!group.any_running()) return 0;
  }
}
