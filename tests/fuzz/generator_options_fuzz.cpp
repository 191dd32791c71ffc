// volt::generator: the option JSON that `volt new` and `volt ui` hand to validate() and render().
// The input is JSON text; objects are what both callers pass. validate() must never throw; options it
// accepts must render (or fail with GeneratorError), and the project must pack into a zip and a
// notebook and give a command line.
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz_target.h"
#include "volt/generator/generator.h"

namespace {
constexpr const char* kTarget = "generator_options";
}  // namespace

VOLT_FUZZ_TARGET(generator_options) {
  namespace gen = volt::generator;
  const nlohmann::json options =
      nlohmann::json::parse(data, data + size, /*callback=*/nullptr, /*allow_exceptions=*/false);
  if (options.is_discarded() || !options.is_object()) return 0;
  gen::Validation v;
  try {
    v = gen::validate(options);
  } catch (const std::exception& e) {
    volt::fuzz::crash(kTarget, std::string("validate() threw, which it never may: ") + e.what());
  }
  if (!v.errors.empty()) return 0;
  try {
    const gen::Project project = gen::render(options);
    if (project.files.empty()) volt::fuzz::crash(kTarget, "render() accepted the options and wrote no file");
    for (const auto& [rel, text] : project.files) {
      if (rel.empty() || rel[0] == '/' || rel.find("..") != std::string::npos) {
        volt::fuzz::crash(kTarget, "render() made a path that leaves the project: '" + rel + "'");
      }
    }
    (void)gen::zip_archive(project);
    (void)gen::notebook(project, v.options);
    (void)gen::command_line(options);
  } catch (const gen::GeneratorError&) {
    return 0;
  } catch (const std::exception& e) {
    volt::fuzz::crash_on_exception(kTarget, e);
  }
  return 0;
}
