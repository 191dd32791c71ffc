// volt::generator — renders complete C++ training projects on Volt from templates and options.
// Shared by `volt new` (tools/volt/new_command.cpp) and the web page (`volt ui`). No LibTorch dependency.
#pragma once

#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "volt/core/error.h"

namespace volt::generator {

/// One thing wrong with the options: the option key ("backend") and what is wrong, with the allowed values.
struct Problem {
  std::string option;
  std::string message;
};

/// Thrown by render() and write_project(); what() lists every problem, one per line ("option: message").
/// A volt::Error like every other error Volt throws, so one `catch (const volt::Error&)` covers the
/// library, the generator and the tools.
class GeneratorError : public volt::Error {
 public:
  /// Builds the error from a non-empty list of problems.
  explicit GeneratorError(std::vector<Problem> problems);
  /// The problems, in the order they were found.
  const std::vector<Problem>& problems() const;

 private:
  std::vector<Problem> problems_;
};

/// The generator's version, recorded in every generated project.
std::string version();

/// Array of {key, label, group ("Project"|"Training"|"Handlers"|"Loggers"), type ("enum"|"list"|"int"|"number"|
/// "bool"|"string"), choices?, default, min?, max?, help, flag ("--nproc-per-node")}: drives the web form and
/// `volt new --help`. A "list" (logger) takes several of its choices: validated, it is a JSON array of names in the
/// order given (empty: none); as text, "csv,tensorboard" or "none".
nlohmann::json option_schema();

/// Array of {id, title, description}, one per template.
nlohmann::json templates();

/// The result of validate().
struct Validation {
  nlohmann::json options;       ///< the input completed with defaults and forced values
  std::vector<Problem> errors;  ///< impossible combinations, bad values, unknown keys
  std::vector<Problem> forced;  ///< options fixed by another choice: {option, "forced by backend=xla-tpu: ..."}
};

/// Checks options (a JSON object keyed by option key) against the schema and the rules; never throws for bad input.
Validation validate(const nlohmann::json& options);

/// A rendered project: its name and its files (relative path -> content).
struct Project {
  std::string name;
  std::map<std::string, std::string> files;
};

/// Renders the chosen template with the options; throws GeneratorError when validate() has errors.
Project render(const nlohmann::json& options);

/// Zip archive bytes; entries are "<name>/<path>", relative, never containing "..".
std::string zip_archive(const Project& project);

/// A Jupyter notebook (nbformat 4 JSON text) for Colab that installs, builds and runs the project with the chosen
/// launch; metadata.accelerator is "TPU" for xla-tpu, "GPU" for nccl or gpu, absent for CPU.
std::string notebook(const Project& project, const nlohmann::json& options);

/// The `volt new NAME --template T --flag v ...` command line that recreates the project (non-default options only).
std::string command_line(const nlohmann::json& options);

/// Writes the project into out_dir (created if missing) atomically, file by file; refuses a non-empty out_dir
/// unless force, and any path that would leave out_dir. Throws GeneratorError.
void write_project(const Project& project, const std::filesystem::path& out_dir, bool force);

}  // namespace volt::generator
