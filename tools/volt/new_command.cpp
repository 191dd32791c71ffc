// `volt new`: renders a Volt training project from a template and options (tools/generator) into a
// folder, and optionally a zip and a Colab notebook of it.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "command_args.h"
#include "volt/core/input_file.h"
#include "volt/core/printable.h"
#include "volt/core/strict_json.h"
#include "volt/generator/generator.h"

namespace {

namespace gen = volt::generator;
using nlohmann::json;

std::string usage() {
  std::ostringstream out;
  out << "usage: volt new NAME [--template T] [--OPTION VALUE ...] [--options FILE] [--output DIR] [--force]\n"
         "                    [--zip FILE] [--notebook FILE] [--no-write] [--list-templates] [--json]\n"
         "Writes a complete C++ training project on Volt into DIR (default ./NAME). Training options go into its\n"
         "config.yaml, so one build serves every value. --options reads a JSON or YAML object of the options below\n"
         "(flags given on the command line win). --zip and --notebook also write the project as a zip archive and\n"
         "as a Colab notebook; --no-write writes only those. --json prints the result (or the errors) as JSON.\n"
         "\ntemplates:\n";
  for (const auto& t : gen::templates()) {
    out << "  " << t["id"].get<std::string>() << std::string(24 - t["id"].get<std::string>().size(), ' ')
        << t["description"].get<std::string>() << "\n";
  }
  std::string group;
  for (const auto& o : gen::option_schema()) {
    if (o["group"] != group) {
      group = o["group"];
      out << "\n" << group << ":\n";
    }
    std::string left = "  " + o["flag"].get<std::string>() + " ";
    if (o["type"] == "list") {
      left += "NAME[,NAME]";  // the names are in the help
    } else if (o.contains("choices")) {
      std::string c;
      for (const auto& v : o["choices"]) c += (c.empty() ? "" : "|") + v.get<std::string>();
      left += c;
    } else {
      left += o["type"] == "bool" ? "true|false" : o["type"] == "string" ? "TEXT" : "N";
    }
    if (left.size() < 34) left += std::string(34 - left.size(), ' ');
    const json& d = o["default"];
    std::string shown = d.is_string() ? d.get<std::string>() : d.dump();
    if (d.is_array()) {
      shown.clear();
      for (const auto& v : d) shown += (shown.empty() ? "" : ",") + v.get<std::string>();
    }
    out << left << " " << o["help"].get<std::string>() << " (default: " << (shown.empty() ? "none" : shown) << ")\n";
  }
  return out.str();
}

[[noreturn]] void options_error(const std::string& message) {
  throw gen::GeneratorError(std::vector<gen::Problem>{{"options", message}});
}

// A YAML or JSON reader keeps one of two equal keys silently: both are refused, with where they are.
json yaml_to_json(const YAML::Node& node, const std::string& path) {
  if (node.IsMap()) {
    json out = json::object();
    std::map<std::string, int> lines;
    for (const auto& kv : node) {
      const std::string key = kv.first.as<std::string>();
      const int line = kv.first.Mark().line + 1;
      if (const auto [it, inserted] = lines.emplace(key, line); !inserted) {
        options_error(volt::printable(path) + " has the option '" + volt::printable(key) + "' twice, on lines " +
                      std::to_string(it->second) + " and " + std::to_string(line) + "; delete the one you do not mean");
      }
      out[key] = yaml_to_json(kv.second, path);
    }
    return out;
  }
  if (node.IsSequence()) {
    json out = json::array();
    for (const auto& v : node) out.push_back(yaml_to_json(v, path));
    return out;
  }
  if (node.IsNull()) return nullptr;
  return node.as<std::string>();  // scalars as text: validate() reads them as the schema's type
}

json parse_json_unique(const std::string& text, const std::string& path) {
  try {
    return volt::parse_strict_json(text, 16);  // options are one flat object
  } catch (const volt::StrictJsonError& e) {
    if (e.kind == volt::StrictJsonError::Kind::kTooDeep) {
      options_error(volt::printable(path) + " is nested deeper than " + std::to_string(e.depth) +
                    " levels; it must hold one object of option: value");
    }
    options_error(volt::printable(path) + " has the option '" + volt::printable(e.key) +
                  "' twice; JSON readers keep only one of them. Delete the one you do not mean");
  }
}

// An options file is a few lines; anything near this size is the wrong file.
constexpr size_t kMaxOptionsBytes = 1u << 20;

json read_options_file(const std::string& path) {
  std::string text;
  if (const std::string problem = volt::read_input_file(path, text, kMaxOptionsBytes); !problem.empty()) {
    options_error("'" + volt::printable(path) + "' (given with --options) " + problem +
                  "; give a JSON or YAML file of option: value");
  }
  try {
    const bool is_json = path.size() > 5 && path.compare(path.size() - 5, 5, ".json") == 0;
    json out = is_json ? parse_json_unique(text, path) : yaml_to_json(YAML::Load(text), path);
    if (!out.is_object()) {
      options_error(volt::printable(path) + " must hold an object of option: value (e.g. backend: xla-tpu)");
    }
    return out;
  } catch (const json::exception& e) {
    options_error(volt::printable(path) + " is not valid JSON: " + volt::printable(e.what()));
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp's own message for this is "bad file".
    options_error(volt::printable(path) + " nests lists or mappings " + std::to_string(e.depth()) +
                  " levels deep, beyond what the YAML reader takes; it must hold one mapping of option: value");
  } catch (const YAML::Exception& e) {
    options_error(volt::printable(path) + " is not valid YAML: " + volt::printable(e.what()));
  }
}

// Why a file cannot be written at path (--zip, --notebook), or "": its folder must exist (a typo in it should
// not silently create folders), and the path must not be a folder.
std::string output_file_problem(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(path);
  if (fs::is_directory(p, ec)) return "'" + volt::printable(path) + "' is a folder; give a file name in it";
  const fs::path parent = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  const auto status = fs::status(parent, ec);
  if (!fs::exists(status)) {
    return "the folder '" + volt::printable(parent.string()) + "' of '" + volt::printable(path) +
           "' does not exist; create it first (mkdir -p " + volt::printable(parent.string()) +
           ") or choose another path";
  }
  if (!fs::is_directory(status)) {
    return "'" + volt::printable(parent.string()) + "' is a file, not a folder, so '" + volt::printable(path) +
           "' cannot be written";
  }
  return "";
}

// Why the project folder cannot be made at dir, or "": the nearest existing ancestor must be a folder.
std::string output_dir_problem(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (fs::path p = fs::path(dir); !p.empty(); p = p.parent_path()) {
    const auto status = fs::status(p, ec);
    if (fs::exists(status)) {
      if (fs::is_directory(status)) return "";
      return "'" + volt::printable(p.string()) + "' is " + (p == fs::path(dir) ? "" : "a part of the path and ") +
             "a file, not a folder; choose another --output";
    }
    if (p == p.parent_path()) break;
  }
  return "";
}

// The bytes go to a temp file in the same folder, are synced, then renamed over the target.
void write_file_atomically(const std::string& path, const std::string& bytes) {
  gen::Project one;
  const std::filesystem::path p = std::filesystem::absolute(path);
  one.name = "file";
  one.files[p.filename().string()] = bytes;
  gen::write_project(one, p.parent_path(), /*force=*/true);
}

json problems_json(const std::vector<gen::Problem>& problems) {
  json out = json::array();
  for (const auto& p : problems) out.push_back({{"option", p.option}, {"message", p.message}});
  return out;
}

}  // namespace

/// `volt new NAME ...`; returns the exit status (0, or 2 for bad input).
int cmd_new(int argc, char** argv) {
  const auto start = std::chrono::steady_clock::now();
  bool json_out = false;
  try {
    json options = json::object();
    json flags = json::object();
    std::string output, zip_path, notebook_path, options_file;
    bool force = false, no_write = false;
    std::vector<gen::Problem> problems;
    const json schema = gen::option_schema();
    for (int i = 1; i < argc; ++i) {
      const volt::tools::CommandArg split = volt::tools::split_command_arg(argv[i]);
      std::string arg = split.name;
      const std::string& value = split.value;
      const bool has_value = split.has_value;
      auto next = [&]() -> std::string {
        if (has_value) return value;
        if (i + 1 >= argc) {
          problems.push_back({arg.substr(2), arg + " needs a value"});
          return "";
        }
        return argv[++i];
      };
      if (arg == "--help" || arg == "-h") {
        std::cout << usage();
        return 0;
      } else if (arg == "--list-templates") {
        for (const auto& t : gen::templates()) {
          std::cout << t["id"].get<std::string>() << ": " << t["title"].get<std::string>() << " - "
                    << t["description"].get<std::string>() << "\n";
        }
        return 0;
      } else if (arg == "--json") {
        json_out = true;
      } else if (arg == "--force") {
        force = true;
      } else if (arg == "--no-write") {
        no_write = true;
      } else if (arg == "--output" || arg == "-o" || arg == "--zip" || arg == "--notebook" || arg == "--options") {
        std::string& target = arg == "--zip"        ? zip_path
                              : arg == "--notebook" ? notebook_path
                              : arg == "--options"  ? options_file
                                                    : output;
        const bool missing = !has_value && i + 1 >= argc;
        target = next();
        // An empty path would read as "not given" below: --zip= would silently write no zip.
        if (target.empty() && !missing) {
          problems.push_back({arg == "-o" ? "output" : arg.substr(2), arg + " needs a path, got ''"});
        }
      } else if (arg.rfind("--", 0) == 0) {
        const auto spec = std::find_if(schema.begin(), schema.end(), [&](const json& s) { return s["flag"] == arg; });
        if (spec == schema.end()) {
          problems.push_back({volt::printable(arg.substr(2)),
                              "unknown flag " + volt::printable(arg) + "; see volt new --help for the options"});
          if (!has_value && i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) ++i;
        } else {
          flags[(*spec)["key"].get<std::string>()] = next();
        }
      } else if (!flags.contains("name")) {
        flags["name"] = arg;
      } else {
        problems.push_back({"name", "unexpected argument '" + volt::printable(arg) + "' after the project name"});
      }
    }
    if (!options_file.empty()) options = read_options_file(options_file);
    for (const auto& [k, v] : flags.items()) options[k] = v;  // the command line wins over the file
    if (!options.contains("name")) {
      problems.push_back({"name", "volt new needs a project name: volt new NAME --template T (volt new --help)"});
    }
    gen::Validation v = gen::validate(options);
    problems.insert(problems.end(), v.errors.begin(), v.errors.end());
    if (output.empty() && v.options["name"].is_string()) output = v.options["name"].get<std::string>();
    if (no_write && zip_path.empty() && notebook_path.empty()) {
      problems.push_back({"no-write", "--no-write without --zip or --notebook would produce nothing"});
    }
    // Every destination is checked before anything is written: a refused run leaves nothing half-done.
    if (!zip_path.empty()) {
      if (std::string p = output_file_problem(zip_path); !p.empty()) problems.push_back({"zip", p});
    }
    if (!notebook_path.empty()) {
      if (std::string p = output_file_problem(notebook_path); !p.empty()) problems.push_back({"notebook", p});
    }
    if (!no_write && !output.empty()) {
      if (std::string p = output_dir_problem(output); !p.empty()) problems.push_back({"output", p});
    }
    if (!problems.empty()) throw gen::GeneratorError(problems);

    const gen::Project project = gen::render(options);
    if (!no_write) gen::write_project(project, output, force);
    if (!zip_path.empty()) write_file_atomically(zip_path, gen::zip_archive(project));
    if (!notebook_path.empty()) write_file_atomically(notebook_path, gen::notebook(project, options));
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (json_out) {
      json files = json::array();
      for (const auto& [path, content] : project.files) files.push_back(path);
      std::cout << json{{"name", project.name}, {"output", no_write ? "" : output},
                        {"files", files},       {"forced", problems_json(v.forced)},
                        {"options", v.options}, {"command", gen::command_line(options)},
                        {"milliseconds", ms}}
                       .dump(-1, ' ', false, json::error_handler_t::replace)
                << "\n";
      return 0;
    }
    for (const auto& f : v.forced) std::cout << "  " << f.option << ": " << f.message << "\n";
    if (!no_write) {
      std::cout << "wrote " << project.files.size() << " files to " << output << "/ (template "
                << v.options["template"].get<std::string>() << ")\n";
    }
    if (!zip_path.empty()) std::cout << "wrote " << zip_path << "\n";
    if (!notebook_path.empty()) std::cout << "wrote " << notebook_path << "\n";
    if (!no_write) std::cout << "next: cd " << output << " and follow README.md (build, then run)\n";
    return 0;
  } catch (const gen::GeneratorError& e) {
    if (json_out) {
      std::cout << json{{"errors", problems_json(e.problems())}}.dump(-1, ' ', false, json::error_handler_t::replace)
                << "\n";
    } else {
      std::cerr << "volt new: the options cannot make a project:\n";
      for (const auto& p : e.problems()) std::cerr << "  " << p.option << ": " << p.message << "\n";
    }
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "volt new: " << e.what() << "\n";
    return 2;
  }
}
