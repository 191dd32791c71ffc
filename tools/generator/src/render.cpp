// Rendering a template with validated options into a Project, and the Colab notebook.
#include <algorithm>
#include <cctype>
#include <sstream>

#include <kainjow/mustache.hpp>

#include "volt/generator/generator.h"
#include "generator_internal.h"

namespace volt::generator {

namespace {

using nlohmann::json;
namespace mu = kainjow::mustache;

const std::string kCommon = "_common";
const std::string kSuffix = ".mustache";
/// Text shared by several template files, included with {{> name}}; never a project file itself.
const std::string kPartials = "_partials/";

std::string file_text(const EmbeddedFile& f) { return std::string(f.content, f.size); }

}  // namespace

json template_meta(const std::string& id) {
  for (const auto& f : embedded_files()) {
    if (f.path == id + "/template.json") return json::parse(file_text(f));
  }
  throw GeneratorError(std::vector<Problem>{{"template", "'" + id + "' has no template.json in tools/generator/templates"}});
}

namespace {

std::string show(const json& v) { return option_text(v); }

std::string cpp_identifier(const std::string& name) {
  std::string out = name;
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

// Everything a template may use: every option as text, plus what the options imply for the Trainer
// (strategy, devices) and for the README (which launch sections apply).
/// The TPU host type a project with backend xla-tpu names (gcloud, the emulation).
std::string tpu_host_type(const json& o) { return o["tpu_chips_per_host"] == 4 ? "v4-8" : "v2-8"; }

/// A Cloud TPU VM name for the project: gcloud takes lowercase letters, digits and hyphens,
/// starting with a letter, at most 63 characters ("my_app" gives "my-app-tpu").
std::string tpu_vm_name(const std::string& project) {
  std::string out;
  for (char c : project) {
    const char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out += (std::isalnum(static_cast<unsigned char>(l)) != 0) ? l : '-';
  }
  if (out.empty() || std::isalpha(static_cast<unsigned char>(out.front())) == 0) out = "v-" + out;
  out = out.substr(0, 59);
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out + "-tpu";
}

/// Where a run writes, relative to the folder the program runs in: "" for trainer.default_root_dir ".", else the
/// folder and a slash.
std::string root_prefix(const json& o) {
  std::string root = o["default_root_dir"];
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  return root == "." || root == "./" ? std::string() : root + "/";
}

/// The loggers and the profiler: config.yaml's trainer.logger and trainer.profiler, and which parts of the README's
/// "Logs" section and of the notebook apply.
void set_observability(mu::data& d, const json& o) {
  const json& loggers = o["logger"];
  const auto has = [&](const char* name) { return std::find(loggers.begin(), loggers.end(), name) != loggers.end(); };
  // trainer.logger: true is the CSV logger alone (the Trainer's default), false none, else the names.
  std::string value;
  if (loggers.empty()) {
    value = "false";
  } else if (loggers == json::array({"csv"})) {
    value = "true";
  } else if (loggers.size() == 1) {
    value = loggers[0].get<std::string>();
  } else {
    for (const auto& l : loggers) value += (value.empty() ? "[" : ", ") + l.get<std::string>();
    value += "]";
  }
  d.set("trainer_logger", value);
  d.set("logger_csv", has("csv"));
  d.set("logger_tensorboard", has("tensorboard"));
  d.set("any_logger", !loggers.empty());
  d.set("several_loggers", loggers.size() > 1);
  const std::string profiler = o["profiler"];
  d.set("profiler_on", profiler != "none");
  d.set("profiler_simple", profiler == "simple");
  d.set("profiler_advanced", profiler == "advanced");
  d.set("profiler_pytorch", profiler == "pytorch");
  d.set("logs_section", !loggers.empty() || profiler != "none");
  // The profiler writes into the first logger's folder, or where the program runs when there is no logger.
  d.set("profile_dir", loggers.empty() ? root_prefix(o) : root_prefix(o) + "lightning_logs/version_0/");
}

mu::data context(const json& o, const json& meta, const std::string& command) {
  mu::data d;
  for (const auto& [key, value] : o.items()) d.set(key, show(value));
  const std::string dist = o["distributed"], backend = o["backend"];
  const bool xla = backend == "xla-tpu";
  const int64_t nnodes = o["nnodes"], nproc = o["nproc_per_node"];
  d.set("identifier", cpp_identifier(o["name"]));
  d.set("generator_version", std::string(kGeneratorVersion));
  d.set("command", command);
  d.set("title", meta["title"].get<std::string>());
  d.set("description", meta["description"].get<std::string>());
  d.set("trainer_accelerator", o["accelerator"].get<std::string>());
  d.set("trainer_devices", dist == "off" ? std::string("1") : std::to_string(nproc));
  d.set("trainer_strategy", xla ? "xla" : dist == "launch" ? "ddp" : dist == "spawn" ? "ddp_spawn" : "auto");
  set_observability(d, o);
  d.set("lr_find_on", o["lr_find"] == true);
  d.set("max_time_on", !o["max_time"].get<std::string>().empty());
  d.set("loss_metric", meta.value("loss_metric", std::string("train_loss")));
  d.set("save_last_on", o["save_last"] == true);  // as a section: the option's own entry is its text, "false"
  // ModelCheckpoint's folder: the first logger's version folder, or checkpoints/ where the program runs.
  const bool logs = !o["logger"].empty();
  const std::string root = root_prefix(o);
  d.set("logs_root", root + "lightning_logs");
  d.set("root_where", root.empty() ? std::string("the folder the program runs in")
                                   : "`" + root + "` (trainer.default_root_dir)");
  d.set("checkpoint_dir", root + (logs ? "lightning_logs/version_N/checkpoints/" : "checkpoints/"));
  d.set("last_checkpoint", root + (logs ? "lightning_logs/version_0/checkpoints/last.ckpt" : "checkpoints/last.ckpt"));
  d.set("monitor", std::string(o["save_best"] == true ? "val_loss" : ""));
  d.set("dist_off", dist == "off");
  d.set("dist_launch", dist == "launch");
  d.set("dist_spawn", dist == "spawn" && !xla);
  d.set("distributed_run", dist != "off");
  d.set("xla", xla);
  d.set("gpu", o["accelerator"] == "gpu" || backend == "nccl");
  d.set("multi_node", nnodes > 1);
  d.set("sbatch_file", nnodes > 1 || o["sbatch"] == true);
  d.set("include_tests", o["include_tests"] == true);
  d.set("other_node_ranks", [&] {
    mu::data list{mu::data::type::list};
    for (int64_t r = 1; r < nnodes && r < 4; ++r) list.push_back(mu::data("rank", std::to_string(r)));
    return list;
  }());
  d.set("tpu_accelerator_type", tpu_host_type(o));
  d.set("tpu_vm_name", tpu_vm_name(o["name"].get<std::string>()));
  d.set("last_node_rank", std::to_string(nnodes - 1));
  d.set("more_node_ranks", nnodes > 4);
  d.set("this_node", o["node_rank"].get<int64_t>() > 0);
  // A one-process run of a distributed config: the same config with these overrides.
  // (accelerator auto: a TPU project's one-process run works on any machine.)
  d.set("one_process_flags", std::string(dist == "off" ? ""
                                                       : std::string(xla ? " --trainer.accelerator auto" : "") +
                                                             " --trainer.strategy auto --trainer.devices 1 "
                                                             "--trainer.num_nodes 1"));
  mu::data data_list{mu::data::type::list};
  const json data_options = meta.value("data", json::object());
  for (const auto& [key, value] : data_options.items()) {
    mu::data entry;
    entry.set("key", key);
    entry.set("value", show(value));
    data_list.push_back(entry);
  }
  d.set("data", data_list);
  d.set("data_package", meta.value("data_package", std::string()));
  d.set("has_data_package", !meta.value("data_package", std::string()).empty());
  for (const auto& f : embedded_files()) {
    const std::string path = f.path;
    if (path.rfind(kPartials, 0) != 0 || path.size() <= kPartials.size() + kSuffix.size()) continue;
    const std::string name = path.substr(kPartials.size(), path.size() - kPartials.size() - kSuffix.size());
    std::string text = file_text(f);
    // The tag's own line ends with a newline: the partial's last one would double it.
    if (!text.empty() && text.back() == '\n') text.pop_back();
    d.set(name, mu::partial([text] { return text; }));
  }
  return d;
}

std::string render_text(const std::string& path, const std::string& text, const mu::data& d) {
  mu::mustache tmpl{text};
  tmpl.set_custom_escape([](const std::string& s) { return s; });
  if (!tmpl.is_valid()) throw GeneratorError(std::vector<Problem>{{"template", path + ": " + tmpl.error_message()}});
  std::string out = tmpl.render(d);
  if (!tmpl.is_valid()) throw GeneratorError(std::vector<Problem>{{"template", path + ": " + tmpl.error_message()}});
  return out;
}

// A section that is left out keeps the end of its closing tag's line (kainjow's mustache), so rendered files had
// runs of empty lines where options were off, and a CMakeLists.txt ended in one: every rendered file gets one
// empty line at most between blocks and ends in exactly one newline.
std::string collapse_blank_lines(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  size_t newlines = 0;
  for (const char c : text) {
    newlines = c == '\n' ? newlines + 1 : 0;
    if (newlines <= 2) out += c;
  }
  while (out.size() >= 2 && out[out.size() - 1] == '\n' && out[out.size() - 2] == '\n') out.pop_back();
  return out;
}

bool wanted(const std::string& rel, const json& o, const json& meta) {
  if (rel == "template.json") return false;
  for (const auto& excluded : meta.value("exclude", json::array())) {
    if (excluded == rel) return false;
  }
  if (rel.rfind("tests/", 0) == 0 && o["include_tests"] != true) return false;
  if (rel == "run.sbatch" && o["nnodes"] == 1 && o["sbatch"] != true) return false;
  return true;
}

}  // namespace

json templates() {
  json out = json::array();
  for (const auto& f : embedded_files()) {
    const std::string path = f.path;
    const auto slash = path.find('/');
    if (path.compare(slash + 1, std::string::npos, "template.json") != 0) continue;
    const json meta = json::parse(file_text(f));
    out.push_back({{"id", path.substr(0, slash)}, {"title", meta["title"]}, {"description", meta["description"]}});
  }
  return out;
}

Project render(const json& options) {
  const Validation v = validate(options);
  if (!v.errors.empty()) throw GeneratorError(v.errors);
  const json& o = v.options;
  const std::string id = o["template"];
  const json meta = template_meta(id);
  const mu::data d = context(o, meta, command_line(options));
  Project project;
  project.name = o["name"];
  // Common files first; the template's own files of the same path replace them.
  for (const std::string& dir : {kCommon, id}) {
    for (const auto& f : embedded_files()) {
      const std::string path = f.path;
      if (path.rfind(dir + "/", 0) != 0) continue;
      std::string rel = path.substr(dir.size() + 1);
      const bool is_template = rel.size() > kSuffix.size() &&
                               rel.compare(rel.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
      if (is_template) rel.resize(rel.size() - kSuffix.size());
      if (!wanted(rel, o, meta)) continue;
      std::string text = is_template ? render_text(path, file_text(f), d) : file_text(f);
      if (is_template) text = collapse_blank_lines(text);
      project.files[rel] = std::move(text);
    }
  }
  return project;
}

namespace {

/// The cells after training that open what the loggers and the profiler wrote: TensorBoard inside the notebook, the
/// profile's table, the trace to download.
template <typename Markdown, typename Code>
void add_log_cells(json& cells, const json& o, const std::string& name, const Markdown& markdown, const Code& code) {
  const json& loggers = o["logger"];
  const std::string profiler = o["profiler"];
  const std::string dir = "/content/" + name;
  const std::string root = root_prefix(o);
  int section = 5;
  if (std::find(loggers.begin(), loggers.end(), "tensorboard") != loggers.end()) {
    cells.push_back(markdown("## " + std::to_string(section++) +
                             ". TensorBoard\n\nThe curves and hyperparameters of every run, from the event files in "
                             "`" + root + "lightning_logs/version_N` (Colab has TensorBoard)."));
    cells.push_back(code("%load_ext tensorboard\n%tensorboard --logdir " + dir + "/" + root + "lightning_logs"));
  }
  if (profiler == "none") return;
  const std::string file = profiler == "pytorch" ? "fit-trace.json" : "fit-profile.txt";
  // The profile is in the latest run's folder (the first logger's), or in the project folder without a logger.
  const std::string find = loggers.empty()
                               ? "import os\npath = '" + dir + "/" + root + file + "'\n"
                               : "import glob, os\nruns = sorted(glob.glob('" + dir + "/" + root +
                                     "lightning_logs/version_*'), key=lambda d: int(d.rsplit('_', 1)[1]))\n"
                                     "path = os.path.join(runs[-1], '" +
                                     file + "')\n";
  if (profiler == "pytorch") {
    cells.push_back(markdown("## " + std::to_string(section) +
                             ". The trace\n\nLibTorch's profiler wrote a Chrome trace of the recorded steps: "
                             "download it and open it at https://ui.perfetto.dev (Open trace file)."));
    cells.push_back(code(find + "print(path, os.path.getsize(path), 'bytes')\nfrom google.colab import files\n"
                                "files.download(path)"));
  } else {
    cells.push_back(markdown("## " + std::to_string(section) + ". The profile\n\nThe " + profiler +
                             " profiler's table of every action, as written at the end of fit."));
    cells.push_back(code(find + "print(open(path).read())"));
  }
}

}  // namespace

std::string notebook(const Project& project, const json& options) {
  const Validation v = validate(options);
  if (!v.errors.empty()) throw GeneratorError(v.errors);
  const json& o = v.options;
  const json meta = template_meta(o["template"]);
  const std::string name = project.name;
  auto lines = [](const std::string& text) {
    json src = json::array();
    std::istringstream in(text);
    std::string line;
    std::vector<std::string> all;
    while (std::getline(in, line)) all.push_back(line);
    for (size_t i = 0; i < all.size(); ++i) src.push_back(all[i] + (i + 1 < all.size() ? "\n" : ""));
    return src;
  };
  auto markdown = [&](const std::string& text) {
    return json{{"cell_type", "markdown"}, {"metadata", json::object()}, {"source", lines(text)}};
  };
  auto code = [&](const std::string& text) {
    return json{{"cell_type", "code"}, {"metadata", json::object()}, {"execution_count", nullptr},
                {"outputs", json::array()}, {"source", lines(text)}};
  };
  const std::string dist = o["distributed"], backend = o["backend"];
  const bool xla = backend == "xla-tpu", gpu = o["accelerator"] == "gpu" || backend == "nccl";
  const int64_t nproc = o["nproc_per_node"];

  json cells = json::array();
  cells.push_back(markdown("# " + name + ": " + meta["title"].get<std::string>() + "\n\n" +
                           meta["description"].get<std::string>() + "\n\nGenerated by volt new " +
                           kGeneratorVersion + ":\n\n    " + command_line(options) + "\n\n" +
                           (xla ? "Runtime: TPU (Runtime > Change runtime type > TPU)."
                                : gpu ? "Runtime: GPU (Runtime > Change runtime type > GPU)." : "Runtime: CPU.")));
  std::string packages = "cmake ninja-build g++ libyaml-cpp-dev nlohmann-json3-dev zlib1g-dev";
  if (!meta.value("data_package", std::string()).empty()) packages += " " + meta["data_package"].get<std::string>();
  cells.push_back(markdown("## 1. Install the build tools, the data and Volt\n\nLibTorch comes from the PyTorch that "
                           "Colab already has. Volt is built from its sources: set `VOLT_SRC` to a Volt source "
                           "folder or git URL (upload a zip of it and unpack it, or clone it)."));
  cells.push_back(code("!apt-get -qq update && apt-get -qq install -y " + packages +
                       "\nimport os, subprocess, torch\nos.environ['TORCH_PREFIX'] = torch.utils.cmake_prefix_path\n"
                       "VOLT_SRC = os.environ.get('VOLT_SRC', '/content/volt')\n"
                       "if not os.path.isdir(VOLT_SRC):\n"
                       "    raise SystemExit('Put the Volt sources in ' + VOLT_SRC + ' (upload and unzip, or git clone)')\n"
                       "!cmake -S {VOLT_SRC} -B /content/volt-build -G Ninja -DCMAKE_BUILD_TYPE=Release "
                       "-DVOLT_BUILD_TESTS=OFF -DVOLT_BUILD_BENCH=OFF -DVOLT_BUILD_EXAMPLES=OFF "
                       "-DCMAKE_PREFIX_PATH=$TORCH_PREFIX\n"
                       "!cmake --build /content/volt-build -j4 && cmake --install /content/volt-build --prefix "
                       "/content/volt-prefix"));
  // The project itself, file by file, so that the notebook needs nothing else.
  std::string writer = "import os\nfiles = " + json(project.files).dump() +
                       "\nfor path, text in files.items():\n"
                       "    full = os.path.join('/content/" + name + "', path)\n"
                       "    os.makedirs(os.path.dirname(full), exist_ok=True)\n"
                       "    with open(full, 'w') as f:\n        f.write(text)\nprint(len(files), 'files written')";
  cells.push_back(markdown("## 2. The project's files"));
  cells.push_back(code(writer));
  cells.push_back(markdown("## 3. Build"));
  cells.push_back(code("%cd /content/" + name +
                       "\n!cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "
                       "-DCMAKE_PREFIX_PATH=\"/content/volt-prefix;$TORCH_PREFIX\"\n!cmake --build build -j4"));
  std::string run;
  if (dist == "launch") {
    run = "!/content/volt-prefix/bin/volt launch --nproc-per-node " + std::to_string(nproc) + " -- ./build/" + name +
          " --config config.yaml";
  } else if (xla) {
    // Volt needs a TPU runtime library; without one the notebook still runs, on the emulation.
    run = "import os\n"
          "if os.environ.get('VOLT_TPU_RUNTIME_LIBRARY'):\n"
          "    print('TPU runtime:', os.environ['VOLT_TPU_RUNTIME_LIBRARY'])\n"
          "else:\n"
          "    print('VOLT_TPU_RUNTIME_LIBRARY is not set: training on the emulated TPU (the CPU); see Volt docs/tpu.md')\n"
          "    os.environ['VOLT_TPU_EMULATION'] = 'lazy'\n"
          "    os.environ['VOLT_TPU_EMULATION_HOST'] = '" +
          tpu_host_type(o) +
          "'\n!./build/" + name + " --config config.yaml";
  } else {
    run = "!./build/" + name + " --config config.yaml";
  }
  cells.push_back(markdown(std::string("## 4. Train\n\n") +
                           (xla ? "Spawns one process per TPU chip (" + std::to_string(nproc) + ")."
                                : dist == "spawn" ? "The program spawns " + std::to_string(nproc) + " processes."
                                : dist == "launch" ? "`volt launch` starts " + std::to_string(nproc) + " processes."
                                                   : "One process.")));
  cells.push_back(code(run));
  add_log_cells(cells, o, name, markdown, code);

  json metadata = {{"kernelspec", {{"name", "python3"}, {"display_name", "Python 3"}, {"language", "python"}}},
                   {"language_info", {{"name", "python"}}},
                   {"colab", {{"provenance", json::array()}, {"name", name + ".ipynb"}}},
                   {"volt", {{"generator_version", kGeneratorVersion}, {"command", command_line(options)}}}};
  if (xla) {
    metadata["accelerator"] = "TPU";
  } else if (gpu) {
    metadata["accelerator"] = "GPU";
    metadata["colab"]["gpuType"] = "T4";
  }
  return json{{"nbformat", 4}, {"nbformat_minor", 4}, {"metadata", metadata}, {"cells", cells}}.dump(1) + "\n";
}

}  // namespace volt::generator
