// The `volt` command: facts about this build and the hardware plan a set of flags gives.
#include <ATen/Parallel.h>
#include <ATen/Context.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "volt/accelerators/hardware_probe.h"
#include "volt/connectors/accelerator_connector.h"
#include "volt/core/compat.h"
#include "volt/core/error.h"
#include "volt/core/version.h"
#include "volt/trainer/trainer.h"

namespace {

constexpr const char* kUsage =
    "usage: volt <command> [options]\n"
    "\n"
    "commands:\n"
    "  version            print Volt's and LibTorch's versions\n"
    "  info               this build and machine: versions, threads, BLAS, registered plug-ins\n"
    "  plan [--devices D --strategy S ... --assume cuda=8 --json]\n"
    "                     resolve hardware flags into the plan a Trainer would run (volt plan --help)\n"
    "  help               this text\n";

int cmd_info() {
  std::cout << "volt " << VOLT_VERSION_STRING << ", LibTorch " << volt::compat::torch_version() << "\n";
  std::cout << "CUDA in this LibTorch: " << (at::hasCUDA() ? "yes" : "no") << "\n";
  std::cout << "intra-op threads (LibTorch default here): " << at::get_num_threads() << "\n";
  std::cout << at::get_parallel_info();
  std::cout << "\n" << volt::connectors::AcceleratorConnector::describe_registries();
  return 0;
}

const char* error_kind(const volt::Error& e) {
  if (dynamic_cast<const volt::ConfigError*>(&e)) return "ConfigError";
  if (dynamic_cast<const volt::NotSupportedError*>(&e)) return "NotSupportedError";
  return "Error";
}

constexpr const char* kPlanUsage =
    "usage: volt plan [--accelerator A] [--devices D] [--strategy S] [--precision P] [--num-nodes N]\n"
    "                 [--cluster-environment E] [--assume cpu|cuda=N|tpu=N|tpu=TYPE] [--json]\n"
    "Resolves Trainer flags in this environment (its variables: torchrun, SLURM, ...) into the hardware plan.\n"
    "--devices takes 2, -1, auto, \"0,1\", \"1,\" or [0,1]. --assume replaces this machine's hardware probe.\n";

int cmd_plan(int argc, char** argv) {
  volt::TrainerOptions options;
  std::string assume;
  bool json = false;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i];
      std::string value;
      const auto eq = arg.find('=');
      if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
      }
      auto next = [&]() -> std::string {
        if (!value.empty()) return value;
        if (i + 1 >= argc) throw volt::ConfigError(arg + " needs a value. " + std::string(kPlanUsage));
        return argv[++i];
      };
      if (arg == "--json") {
        json = true;
      } else if (arg == "--help" || arg == "-h") {
        std::cout << kPlanUsage;
        return 0;
      } else if (arg == "--accelerator") {
        options.accelerator = next();
      } else if (arg == "--devices") {
        options.devices = next();
      } else if (arg == "--strategy") {
        options.strategy = next();
      } else if (arg == "--precision") {
        options.precision = next();
      } else if (arg == "--num-nodes") {
        const std::string v = next();
        if (v.empty() || v.find_first_not_of("-0123456789") != std::string::npos) {
          throw volt::ConfigError("--num-nodes expects an integer, got '" + v + "'.");
        }
        options.num_nodes = std::stoll(v);
      } else if (arg == "--cluster-environment") {
        options.cluster_environment = next();
      } else if (arg == "--assume") {
        assume = next();
      } else {
        throw volt::ConfigError("unknown option '" + arg + "'. " + std::string(kPlanUsage));
      }
    }
    const volt::Environ env = volt::Environ::current();
    const auto probe = assume.empty() ? volt::accelerators::HardwareProbe::detect(env)
                                      : volt::accelerators::HardwareProbe::assume(assume, env);
    volt::connectors::AcceleratorConnector connector(options, env, probe);
    if (json) {
      std::cout << connector.plan().to_json() << "\n";
    } else {
      std::cout << connector.plan().describe();
    }
    return 0;
  } catch (const volt::Error& e) {
    if (json) {
      std::cout << nlohmann::json{{"error", e.what()}, {"kind", error_kind(e)}}.dump() << "\n";
    } else {
      std::cerr << "volt plan: " << e.what() << "\n";
    }
    return 2;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string cmd = argv[1];
  try {
    if (cmd == "version" || cmd == "--version") {
      std::cout << "volt " << VOLT_VERSION_STRING << " (LibTorch " << volt::compat::torch_version() << ")\n";
      return 0;
    }
    if (cmd == "info") return cmd_info();
    if (cmd == "plan") return cmd_plan(argc - 1, argv + 1);
    if (cmd == "help" || cmd == "--help" || cmd == "-h") {
      std::cout << kUsage;
      return 0;
    }
    std::cerr << "volt: unknown command '" << cmd << "'.\n\n" << kUsage;
    return 2;
  } catch (const volt::Error& e) {
    std::cerr << "volt " << cmd << ": " << e.what() << "\n";
    return 2;
  }
}
