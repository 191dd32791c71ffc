// The `volt` command: facts about this build and the hardware plan a set of flags gives.
#include <ATen/Parallel.h>
#include <ATen/Context.h>

#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "volt/cli/cli.h"
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
    "  plan [--trainer.X V ...] [--config F]\n"
    "                     resolve Trainer flags into the hardware plan, checking them as the Trainer would\n"
    "  help               this text\n";

int cmd_info() {
  std::cout << "volt " << VOLT_VERSION_STRING << ", LibTorch " << volt::compat::torch_version() << "\n";
  std::cout << "CUDA in this LibTorch: " << (at::hasCUDA() ? "yes" : "no") << "\n";
  std::cout << "intra-op threads (LibTorch default here): " << at::get_num_threads() << "\n";
  std::cout << at::get_parallel_info();
  std::cout << "\n" << volt::connectors::AcceleratorConnector::describe_registries();
  return 0;
}

int cmd_plan(int argc, char** argv) {
  volt::cli::Cli cli("volt plan", "Resolve Trainer flags into the hardware plan.");
  if (!cli.parse(argc, argv)) return 0;
  volt::validate_trainer_options(cli.trainer_options());
  volt::connectors::AcceleratorConnector connector(cli.trainer_options());
  std::cout << connector.plan().describe();
  return 0;
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
