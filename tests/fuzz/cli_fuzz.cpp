// volt::cli::Cli: the command line and the YAML config files it reads (--config).
// Input: NUL-separated parts. Part 0 is the text of a config file; parts 1.. are argv words, where
// "@CFG@" stands for the config file's path (without one, "--config PATH" is appended when part 0
// is not empty). Besides "only ConfigError for bad input", it checks the documented round trip:
// what to_yaml() prints (--print-config) reads back through --config to the same configuration.
#include <sstream>
#include <string>
#include <vector>

#include "fuzz_target.h"
#include "volt/cli/cli.h"
#include "volt/core/error.h"
#include "volt/core/trainer_flags.h"

namespace {

constexpr const char* kTarget = "cli";

volt::cli::Cli make_cli() {
  volt::cli::Cli cli("fuzz", "the fuzz target's program");
  cli.add_option("model.lr", 1e-3, "learning rate")
      .add_option("model.hidden", int64_t{128}, "hidden units")
      .add_option("model.name", "mlp", "architecture")
      .add_option("data.shuffle", true, "shuffle the training data")
      .add_option("data.root", "", "data folder");
  return cli;
}

bool parse(volt::cli::Cli& cli, const std::vector<std::string>& args, std::ostream& out) {
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return cli.parse(static_cast<int>(argv.size()), argv.data(), out);
}

}  // namespace

VOLT_FUZZ_TARGET(cli) {
  const std::vector<std::string> parts = volt::fuzz::split_nul(data, size, 17);
  const std::string config = volt::fuzz::scratch_path("config.yaml");
  volt::fuzz::write_file(config, reinterpret_cast<const uint8_t*>(parts[0].data()), parts[0].size());
  std::vector<std::string> args{"fuzz"};
  bool named_config = false;
  for (size_t i = 1; i < parts.size(); ++i) {
    named_config = named_config || parts[i] == "@CFG@";
    args.push_back(parts[i] == "@CFG@" ? config : parts[i]);
  }
  if (!named_config && !parts[0].empty()) args.insert(args.end(), {"--config", config});

  volt::cli::Cli cli = make_cli();
  std::ostringstream out;
  try {
    if (!parse(cli, args, out)) return 0;  // --help or --print-config
    (void)cli.trainer_options();
    (void)cli.get_double("model.lr");
    (void)cli.get_int("model.hidden");
    (void)cli.get_string("model.name");
    (void)cli.get_bool("data.shuffle");
    (void)cli.get_string("trainer.devices");
  } catch (const volt::Error&) {
    return 0;
  } catch (const std::exception& e) {
    volt::fuzz::crash_on_exception(kTarget, e);
  }

  // The flag table's data-free checks on whatever was parsed: a ConfigError or nothing.
  try {
    volt::check_trainer_flags(cli.trainer_options());
  } catch (const volt::Error&) {
  } catch (const std::exception& e) {
    volt::fuzz::crash_on_exception(kTarget, e);
  }

  // The printed configuration must read back to itself.
  const std::string printed = cli.to_yaml();
  const std::string again_path = volt::fuzz::scratch_path("printed.yaml");
  volt::fuzz::write_file(again_path, reinterpret_cast<const uint8_t*>(printed.data()), printed.size());
  volt::cli::Cli again = make_cli();
  try {
    parse(again, {"fuzz", "--config", again_path}, out);
  } catch (const std::exception& e) {
    volt::fuzz::crash(kTarget, std::string("the printed configuration does not read back: ") + e.what() +
                                   "\n--- printed ---\n" + printed);
  }
  if (again.to_yaml() != printed) {
    volt::fuzz::crash(kTarget, "the printed configuration reads back to another one\n--- printed ---\n" + printed +
                                   "--- read back and printed ---\n" + again.to_yaml());
  }
  return 0;
}
