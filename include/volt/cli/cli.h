#pragma once
#include <cstdint>
#include <iostream>
#include <memory>
#include <ostream>
#include <string>
#include <type_traits>

#include "volt/core/trainer_options.h"

namespace volt::cli {

namespace detail {
struct CliState;
}  // namespace detail

/// The command line of a training program, as PyTorch Lightning's LightningCLI: every Trainer
/// flag as `--trainer.<field>`, the program's own options in named sections
/// (`--model.lr 0.01`), YAML config files (`--config run.yaml`), `--print-config` and `--help`.
///
///   volt::cli::Cli cli("train", "Trains an MNIST classifier.");
///   cli.add_option("model.lr", 1e-3, "learning rate")
///       .add_option("data.batch_size", 64, "samples per batch");
///   if (!cli.parse(argc, argv)) return 0;  // --help or --print-config was served
///   volt::Trainer trainer(cli.trainer_options());
///
/// Precedence, lowest first: defaults, config files in the order given, command-line flags
/// (whatever their position relative to --config). Every error is a volt::ConfigError that
/// says what was given and how to fix it; the library never calls exit().
/// Movable, not copyable.
class Cli {
 public:
  /// `program` is the name shown in the usage line; `description` follows it in --help.
  explicit Cli(std::string program, std::string description = "",
               const TrainerOptions& trainer_defaults = TrainerOptions());
  /// Defined where the option table is complete.
  ~Cli();
  /// Takes over the options and parsed values; the moved-from Cli may only be destroyed or
  /// assigned to.
  Cli(Cli&&) noexcept;
  /// As the move constructor.
  Cli& operator=(Cli&&) noexcept;
  /// Not copyable: one command line, one owner.
  Cli(const Cli&) = delete;
  /// Not copyable.
  Cli& operator=(const Cli&) = delete;

  /// Declares the option `key` ("section.name", e.g. "model.lr"; letters, digits, '_' and
  /// '-') with its default and a one-line help. Call before parse(). Throws ConfigError for a
  /// malformed or duplicate key, and for keys in the built-in "trainer" section.
  Cli& add_option(const std::string& key, bool default_value, const std::string& help);
  /// An integer option (64-bit).
  Cli& add_option(const std::string& key, int64_t default_value, const std::string& help);
  /// An integer option given as another integer type (`5`, `size_t{64}`): stored as int64_t.
  template <typename T,
            typename = std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool> &&
                                        !std::is_same_v<T, int64_t>>>
  Cli& add_option(const std::string& key, T default_value, const std::string& help) {
    return add_option(key, static_cast<int64_t>(default_value), help);
  }
  /// A floating-point option; integers are accepted as values ("3" reads as 3.0).
  Cli& add_option(const std::string& key, double default_value, const std::string& help);
  /// A string option; any text is a valid value.
  Cli& add_option(const std::string& key, const std::string& default_value,
                  const std::string& help);
  /// A string option; without this overload a string literal would pick the bool one.
  Cli& add_option(const std::string& key, const char* default_value, const std::string& help);

  /// Reads `argv[1..argc)`: `--section.key VALUE`, `--section.key=VALUE`, a bare boolean flag
  /// (`--trainer.deterministic` means true; `--trainer.logger=false`), `--config FILE` (may
  /// repeat), `--print-config` and `--help`/`-h`. Values are reset to their defaults first, so
  /// parse() may be called again. Returns true when the program should go on; false after
  /// printing the usage (--help, which wins over everything else) or the merged configuration
  /// as YAML (--print-config) to `out`. Throws ConfigError for an unknown option or config
  /// key (suggesting the nearest valid name), a value of the wrong type, a missing value, a
  /// missing or malformed config file, or a positional argument.
  bool parse(int argc, const char* const* argv, std::ostream& out = std::cout);

  /// The value of a bool option. Throws ConfigError for an unknown key or another type.
  bool get_bool(const std::string& key) const;
  /// The value of an integer option (including plain integer fields of "trainer").
  int64_t get_int(const std::string& key) const;
  /// The value of a floating-point option.
  double get_double(const std::string& key) const;
  /// The value of a string option (including "trainer.devices", as text: "auto", "0,1").
  std::string get_string(const std::string& key) const;

  /// The "trainer" section as parsed; default-constructed TrainerOptions before parse().
  /// Values are checked for syntax only; the Trainer validates ranges and combinations.
  const TrainerOptions& trainer_options() const;

  /// The whole configuration (trainer section first, then the program's sections in the
  /// order they were declared; every key) as YAML that --config reads back to the same
  /// values. This is what --print-config prints.
  std::string to_yaml() const;

  /// The --help text: usage line, description, and every option with its type, default and
  /// help, grouped by section.
  std::string usage() const;

 private:
  std::unique_ptr<detail::CliState> state_;
};

}  // namespace volt::cli
