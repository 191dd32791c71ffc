// Rendering a template with validated options into a Project, and the Colab notebook.
#include <algorithm>
#include <cctype>
#include <sstream>
#include <stdexcept>

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
  for (const auto& [key, value] : o.items()) d.set(key, option_text(value));
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
    entry.set("value", option_text(value));
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

/// The Debian (and Ubuntu) packages that building Volt and a project needs, besides LibTorch: the notebook installs
/// the missing ones. Volt's CMakeLists.txt (library and the volt command, without the web page) is what decides it.
constexpr const char* kBuildPackages =
    "cmake ninja-build g++ ccache libyaml-cpp-dev nlohmann-json3-dev zlib1g-dev libpng-dev libjpeg-dev "
    "libkainjow-mustache-dev";

std::string base64(std::string_view bytes) {
  static constexpr char kDigits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const auto n = (static_cast<unsigned char>(bytes[i]) << 16) | (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                   static_cast<unsigned char>(bytes[i + 2]);
    out += {kDigits[(n >> 18) & 63], kDigits[(n >> 12) & 63], kDigits[(n >> 6) & 63], kDigits[n & 63]};
  }
  if (i + 1 == bytes.size()) {
    const auto n = static_cast<unsigned char>(bytes[i]) << 16;
    out += {kDigits[(n >> 18) & 63], kDigits[(n >> 12) & 63], '=', '='};
  } else if (i + 2 == bytes.size()) {
    const auto n = (static_cast<unsigned char>(bytes[i]) << 16) | (static_cast<unsigned char>(bytes[i + 1]) << 8);
    out += {kDigits[(n >> 18) & 63], kDigits[(n >> 12) & 63], kDigits[(n >> 6) & 63], '='};
  }
  return out;
}

/// Python that finds the latest run's folder (the first logger's lightning_logs/version_N) as `run_dir`.
std::string latest_run(const std::string& root) {
  return "import glob\nruns = sorted(glob.glob(os.path.join(PROJECT, '" + root +
         "lightning_logs', 'version_*')), key=lambda d: int(d.rsplit('_', 1)[1]))\n"
         "if not runs:\n    raise SystemExit('no run folder in ' + os.path.join(PROJECT, '" + root +
         "lightning_logs') + ': did the training cell run?')\nrun_dir = runs[-1]\n";
}

/// The cells after training that open what the loggers and the profiler wrote: the curves Volt draws, TensorBoard
/// inside the notebook, the profile's table, the trace to download. `section` numbers the first of them.
template <typename Markdown, typename Code>
void add_log_cells(json& cells, const json& o, int section, const Markdown& markdown, const Code& code) {
  const json& loggers = o["logger"];
  const std::string profiler = o["profiler"];
  const std::string root = root_prefix(o);
  const auto has = [&](const char* name) { return std::find(loggers.begin(), loggers.end(), name) != loggers.end(); };
  if (has("csv")) {
    cells.push_back(markdown("## " + std::to_string(section++) +
                             ". The curves\n\n`volt plot` draws every metric of the runs' metrics.csv files (`" + root +
                             "lightning_logs/version_N`, overlaid) against the step."));
    cells.push_back(code("logs = os.path.join(PROJECT, '" + root + "lightning_logs')\n"
                         "run([os.path.join(ROOT, 'volt-prefix', 'bin', 'volt'), 'plot', logs, '--out', "
                         "os.path.join(PROJECT, 'curves.png')])\n"
                         "from IPython.display import Image, display\n"
                         "display(Image(filename=os.path.join(PROJECT, 'curves.png')))"));
  }
  if (has("tensorboard")) {
    cells.push_back(markdown("## " + std::to_string(section++) +
                             ". TensorBoard\n\nThe curves and hyperparameters of every run, from the event files in "
                             "`" + root + "lightning_logs/version_N` (Colab has TensorBoard)."));
    cells.push_back(code("%load_ext tensorboard\n%tensorboard --logdir {PROJECT}/" + root + "lightning_logs"));
  }
  if (profiler == "none") return;
  const std::string file = profiler == "pytorch" ? "fit-trace.json" : "fit-profile.txt";
  // The profile is in the latest run's folder (the first logger's), or in the project folder without a logger.
  const std::string find = loggers.empty() ? "path = os.path.join(PROJECT, '" + root + file + "')\n"
                                           : latest_run(root) + "path = os.path.join(run_dir, '" + file + "')\n";
  if (profiler == "pytorch") {
    cells.push_back(markdown("## " + std::to_string(section) +
                             ". The trace\n\nLibTorch's profiler wrote a Chrome trace of the recorded steps: "
                             "download it and open it at https://ui.perfetto.dev (Open trace file)."));
    cells.push_back(code(find + "print(path, os.path.getsize(path), 'bytes')\n"
                                "try:\n    from google.colab import files\n    files.download(path)\n"
                                "except ImportError:\n    print('(not on Colab: the file is at', path + ')')"));
  } else {
    cells.push_back(markdown("## " + std::to_string(section) + ". The profile\n\nThe " + profiler +
                             " profiler's table of every action, as written at the end of fit."));
    cells.push_back(code(find + "print(open(path).read())"));
  }
}

/// A Python list literal of the words of `command` (no quoting inside: Volt's commands here are plain words).
std::string py_words(const std::vector<std::string>& words) {
  std::string out = "[";
  for (size_t i = 0; i < words.size(); ++i) out += (i ? ", " : "") + words[i];
  return out + "]";
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
  cells.push_back(markdown(
      "# " + name + ": " + meta["title"].get<std::string>() + "\n\n" + meta["description"].get<std::string>() +
      "\n\nGenerated by volt new " + kGeneratorVersion + ":\n\n    " + command_line(options) + "\n\n" +
      (xla ? "Runtime: TPU (Runtime > Change runtime type > TPU). Volt's XLA strategy drives the chips through a TPU "
             "runtime library given in VOLT_TPU_RUNTIME_LIBRARY; without one, this notebook trains on Volt's TPU "
             "emulation (the same 8 processes and collectives, on the CPU), and says so when it runs."
       : gpu ? "Runtime: GPU (Runtime > Change runtime type > GPU)."
             : "Runtime: CPU.") +
      "\n\nThe notebook carries everything it needs: Volt's own source and the project's files are packed into it. Run "
      "all: it installs the missing build tools with apt, finds LibTorch (the kernel's PyTorch, or the system's), "
      "builds Volt and the project, trains, and draws the curves. Everything goes into `ROOT` (`/content` on Colab; "
      "set VOLT_NOTEBOOK_ROOT to choose)."));
  std::string packages = kBuildPackages;
  if (!meta.value("data_package", std::string()).empty()) packages += " " + meta["data_package"].get<std::string>();
  cells.push_back(markdown("## 1. The build tools and the data\n\nThe Debian/Ubuntu packages that are missing are "
                           "installed (nothing when all are there)."));
  cells.push_back(code(
      "import base64, io, os, subprocess, sys, tarfile\n"
      "ROOT = os.environ.get('VOLT_NOTEBOOK_ROOT', '/content')\n"
      "PROJECT = os.path.join(ROOT, '" + name + "')\n"
      "# Extra flags for the training run (e.g. --trainer.max_epochs 1); none by default.\n"
      "TRAIN_ARGS = os.environ.get('VOLT_NOTEBOOK_TRAIN_ARGS', '').split()\n"
      "ENV = dict(os.environ)\n\n"
      "def run(cmd, cwd=None):\n"
      "    \"\"\"Runs cmd, printing its output as it comes; a failure stops the notebook with the command.\"\"\"\n"
      "    print('$', ' '.join(cmd), flush=True)\n"
      "    p = subprocess.Popen(cmd, cwd=cwd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)\n"
      "    for line in p.stdout:\n        print(line, end='', flush=True)\n"
      "    if p.wait() != 0:\n        raise SystemExit('failed (exit %d): %s' % (p.returncode, ' '.join(cmd)))\n\n"
      "PACKAGES = '" + packages + "'.split()\n"
      "missing = [p for p in PACKAGES if subprocess.run(['dpkg', '-s', p], stdout=subprocess.DEVNULL,\n"
      "                                                 stderr=subprocess.DEVNULL).returncode != 0]\n"
      "if missing:\n"
      "    run(['apt-get', '-qq', 'update'])\n"
      "    run(['apt-get', '-qq', 'install', '-y'] + missing)\n"
      "print('build tools:', len(PACKAGES), 'packages present' + (' (installed: ' + ' '.join(missing) + ')' if missing else ''))"));
  cells.push_back(markdown(
      "## 2. LibTorch\n\nThe kernel's PyTorch when it ships LibTorch's CMake files (Colab's does) and uses the C++11 "
      "ABI that Debian's and Ubuntu's C++ libraries use; else the system's LibTorch (Debian's libtorch-dev)."));
  cells.push_back(code(
      "TORCH_PREFIX = ''\n"
      "try:\n"
      "    import torch\n"
      "    prefix = torch.utils.cmake_prefix_path\n"
      "    if os.path.exists(os.path.join(prefix, 'Torch', 'TorchConfig.cmake')):\n"
      "        if torch._C._GLIBCXX_USE_CXX11_ABI:\n"
      "            TORCH_PREFIX = prefix\n"
      "        else:\n"
      "            print('PyTorch', torch.__version__, 'is built with the pre-C++11 ABI, which the apt packages '\n"
      "                  '(yaml-cpp) cannot link with: using the system LibTorch instead')\n"
      "except ImportError:\n"
      "    pass\n"
      "if TORCH_PREFIX:\n"
      "    print('LibTorch: the kernel\\'s PyTorch', torch.__version__, 'at', TORCH_PREFIX)\n"
      "else:\n"
      "    if subprocess.run(['dpkg', '-s', 'libtorch-dev'], stdout=subprocess.DEVNULL,\n"
      "                      stderr=subprocess.DEVNULL).returncode != 0:\n"
      "        run(['apt-get', '-qq', 'install', '-y', 'libtorch-dev'])\n"
      "    print('LibTorch: the system\\'s (libtorch-dev)')\n"
      "PREFIX_PATH = ';'.join([os.path.join(ROOT, 'volt-prefix')] + ([TORCH_PREFIX] if TORCH_PREFIX else []))"));
  // Volt's source, packed at Volt's build time; the cell is long, so it is folded. Its ~7,000 lines go into the
  // dumped text directly (plain base64 needs no JSON escaping), not through a JSON array: `volt new` stays fast.
  const std::string archive = base64(volt_source_archive());
  constexpr size_t kPerLine = 100;
  std::string packed_json = "\"VOLT_ARCHIVE = (\\n\"";
  for (size_t i = 0; i < archive.size(); i += kPerLine) {
    packed_json += ",\n    \"    '" + archive.substr(i, kPerLine) + "'\\n\"";
  }
  packed_json += ",\n    \")\\n\",\n    \"print('Volt " + std::string(kGeneratorVersion) +
                 ":', len(VOLT_ARCHIVE) * 3 // 4, 'bytes of packed source')\"";
  constexpr const char* kPackedPlaceholder = "@@volt-source-archive@@";
  cells.push_back(markdown("## 3. Volt\n\nVolt's source (packed below as a base64 tar.gz), built and installed into "
                           "`ROOT/volt-prefix` (a few minutes; ccache makes a second run quick)."));
  json archive_cell = code("");
  archive_cell["source"] = json::array({kPackedPlaceholder});
  archive_cell["metadata"] = {{"cellView", "form"}, {"jupyter", {{"source_hidden", true}}}};
  cells.push_back(std::move(archive_cell));
  cells.push_back(code(
      "VOLT_SRC = os.path.join(ROOT, 'volt')\n"
      "with tarfile.open(fileobj=io.BytesIO(base64.b64decode(''.join(VOLT_ARCHIVE))), mode='r:gz') as t:\n"
      "    t.extractall(VOLT_SRC)\n"
      "ENV['CCACHE_BASEDIR'] = VOLT_SRC\n"
      "run(['cmake', '-S', VOLT_SRC, '-B', os.path.join(VOLT_SRC, 'build'), '-G', 'Ninja',\n"
      "     '-DCMAKE_BUILD_TYPE=Release', '-DVOLT_BUILD_TESTS=OFF', '-DVOLT_BUILD_BENCH=OFF',\n"
      "     '-DVOLT_BUILD_EXAMPLES=OFF', '-DVOLT_BUILD_UI=OFF', '-DCMAKE_PREFIX_PATH=' + PREFIX_PATH])\n"
      "run(['cmake', '--build', os.path.join(VOLT_SRC, 'build'), '-j', str(os.cpu_count())])\n"
      "run(['cmake', '--install', os.path.join(VOLT_SRC, 'build'), '--prefix', os.path.join(ROOT, 'volt-prefix')])"));
  // The project itself, file by file, so that the notebook needs nothing else.
  std::string writer = "files = " + json(project.files).dump() +
                       "\nfor path, text in files.items():\n"
                       "    full = os.path.join(PROJECT, path)\n"
                       "    os.makedirs(os.path.dirname(full), exist_ok=True)\n"
                       "    with open(full, 'w') as f:\n        f.write(text)\nprint(len(files), 'files written')";
  cells.push_back(markdown("## 4. The project's files"));
  cells.push_back(code(writer));
  cells.push_back(markdown("## 5. Build the project"));
  cells.push_back(code("ENV['CCACHE_BASEDIR'] = PROJECT\n"
                       "run(['cmake', '-S', PROJECT, '-B', os.path.join(PROJECT, 'build'), '-G', 'Ninja',\n"
                       "     '-DCMAKE_BUILD_TYPE=Release', '-DCMAKE_PREFIX_PATH=' + PREFIX_PATH])\n"
                       "run(['cmake', '--build', os.path.join(PROJECT, 'build'), '-j', str(os.cpu_count())])"));
  const std::string program = "os.path.join(PROJECT, 'build', '" + name + "')";
  std::string run;
  if (dist == "launch") {
    run = "run(" + py_words({"os.path.join(ROOT, 'volt-prefix', 'bin', 'volt')", "'launch'", "'--nproc-per-node'",
                             "'" + std::to_string(nproc) + "'", "'--'", program, "'--config'", "'config.yaml'"}) +
          " + TRAIN_ARGS, cwd=PROJECT)";
  } else if (xla) {
    // Volt needs a TPU runtime library; without one the notebook still runs, on the emulation.
    run = "if os.environ.get('VOLT_TPU_RUNTIME_LIBRARY'):\n"
          "    print('TPU runtime:', os.environ['VOLT_TPU_RUNTIME_LIBRARY'])\n"
          "else:\n"
          "    print('VOLT_TPU_RUNTIME_LIBRARY is not set: training on the emulated TPU (the CPU); see Volt docs/tpu.md')\n"
          "    ENV['VOLT_TPU_EMULATION'] = 'lazy'\n"
          "    ENV['VOLT_TPU_EMULATION_HOST'] = '" +
          tpu_host_type(o) + "'\nrun(" + py_words({program, "'--config'", "'config.yaml'"}) + " + TRAIN_ARGS, cwd=PROJECT)";
  } else {
    run = "run(" + py_words({program, "'--config'", "'config.yaml'"}) + " + TRAIN_ARGS, cwd=PROJECT)";
  }
  cells.push_back(markdown(std::string("## 6. Train\n\n") +
                           (xla ? "Spawns one process per TPU chip (" + std::to_string(nproc) + ")."
                                : dist == "spawn" ? "The program spawns " + std::to_string(nproc) + " processes."
                                : dist == "launch" ? "`volt launch` starts " + std::to_string(nproc) + " processes."
                                                   : "One process.")));
  cells.push_back(code(run));
  add_log_cells(cells, o, 7, markdown, code);

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
  json nb = json::object();
  nb["nbformat"] = 4;
  nb["nbformat_minor"] = 4;
  nb["metadata"] = std::move(metadata);
  nb["cells"] = std::move(cells);
  std::string text = nb.dump(1);
  const std::string placeholder = "\"" + std::string(kPackedPlaceholder) + "\"";
  const size_t at = text.find(placeholder);
  if (at == std::string::npos) throw std::logic_error("notebook: the packed-source cell is missing");
  text.replace(at, placeholder.size(), packed_json);
  return text + "\n";
}

}  // namespace volt::generator
