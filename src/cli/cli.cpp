#include "volt/cli/cli.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <system_error>
#include <utility>
#include <variant>
#include <vector>

#include "volt/core/error.h"
#include "volt/core/input_file.h"
#include "volt/core/numbers.h"
#include "volt/core/printable.h"

namespace volt::cli {
namespace {

enum class Kind {
  kBool,
  kInt,
  kDouble,
  kString,
  kOptionalInt,
  kOptionalUint,
  kBatchLimit,
  kDevices,
  kLogger
};

using Value = std::variant<bool, int64_t, double, std::string, std::optional<int64_t>,
                           std::optional<uint64_t>, BatchLimit, LoggerOption>;

struct KindInfo {
  const char* metavar;  // shown in --help
  const char* expects;  // "... expects <this>, got 'x'"
  const char* getter;   // the accessor that reads this kind
};

KindInfo info(Kind kind) {
  switch (kind) {
    case Kind::kBool:
      return {"[true|false]", "a boolean (true or false)", "get_bool"};
    case Kind::kInt:
      return {"INT", "an integer", "get_int"};
    case Kind::kDouble:
      return {"FLOAT", "a number", "get_double"};
    case Kind::kString:
      return {"STR", "a string", "get_string"};
    case Kind::kOptionalInt:
      return {"INT|null", "an integer or null", "trainer_options()"};
    case Kind::kOptionalUint:
      return {"UINT|null", "a non-negative integer or null", "trainer_options()"};
    case Kind::kBatchLimit:
      return {"N|FRACTION", "a number of batches like 10 or a fraction like 0.25",
              "trainer_options()"};
    case Kind::kDevices:
      return {"N|-1|auto|IDS", "a device count (2, or -1 for all), auto, or device ids (0,1)",
              "get_string"};
    case Kind::kLogger:
      return {"true|false|NAMES", "true, false, or logger names (csv,tensorboard)", "trainer_options()"};
  }
  return {"", "", ""};
}

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

bool all_digits(const std::string& text) {
  return !text.empty() && std::all_of(text.begin(), text.end(),
                                      [](unsigned char c) { return std::isdigit(c) != 0; });
}

// from_chars refuses a leading '+'; users and YAML files write it. (Only the YAML writer's
// "would a reader take this text for a number?" test uses to_number; values go through volt::numbers.)
std::string drop_plus(const std::string& text) {
  return text.size() > 1 && text[0] == '+' && text[1] != '-' && text[1] != '+' ? text.substr(1)
                                                                               : text;
}

template <typename T>
std::optional<T> to_number(const std::string& text) {
  const std::string body = drop_plus(text);
  T result{};
  auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), result);
  if (body.empty() || ec != std::errc() || end != body.data() + body.size()) return std::nullopt;
  return result;
}

std::optional<bool> to_bool(const std::string& text) {
  const std::string t = lower(text);
  if (t == "true" || t == "yes" || t == "on" || t == "1") return true;
  if (t == "false" || t == "no" || t == "off" || t == "0") return false;
  return std::nullopt;
}

bool is_null(const std::string& text) {
  const std::string t = lower(text);
  return t == "null" || t == "none" || t == "~";
}

// Lightning's devices: a count ("2", "-1"), "auto", or ids ("0,1"; "2," is the single id 2).
// The YAML / Python list spelling "[0, 1]" is accepted too, and "[2]" keeps meaning the id 2.
std::optional<std::string> to_devices(std::string text) {
  text.erase(std::remove_if(text.begin(), text.end(),
                            [](unsigned char c) { return std::isspace(c) != 0; }),
             text.end());
  if (lower(text) == "auto") return "auto";
  if (auto n = numbers::parse_int(text)) return std::to_string(*n.value);
  const bool bracketed = text.size() >= 2 && text.front() == '[' && text.back() == ']';
  if (bracketed) text = text.substr(1, text.size() - 2) + ",";
  if (text.find(',') == std::string::npos) return std::nullopt;
  std::vector<std::string> ids;
  std::stringstream in(text);
  for (std::string id; std::getline(in, id, ',');) {
    auto n = numbers::parse_uint(id);
    if (!all_digits(id) || !n) return std::nullopt;
    ids.push_back(std::to_string(*n.value));
  }
  std::string joined;
  for (const auto& id : ids) joined += (joined.empty() ? "" : ",") + id;
  return ids.size() == 1 ? joined + "," : joined;
}

std::string format_double(double d) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), d);
  std::string text(buf, ec == std::errc() ? end : buf);
  // A reader should see a float, as Lightning prints 0.0 and not 0.
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}

std::string to_text(const Value& value) {
  struct Visitor {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t n) const { return std::to_string(n); }
    std::string operator()(double d) const { return format_double(d); }
    std::string operator()(const std::string& s) const { return s; }
    std::string operator()(const std::optional<int64_t>& n) const {
      return n ? std::to_string(*n) : "null";
    }
    std::string operator()(const std::optional<uint64_t>& n) const {
      return n ? std::to_string(*n) : "null";
    }
    std::string operator()(const BatchLimit& limit) const { return limit.to_string(); }
    std::string operator()(const LoggerOption& logger) const { return logger.to_string(); }
  };
  return std::visit(Visitor{}, value);
}

// Every number goes through volt::numbers: overflow, nan/inf and sign are refused with the reason.
// `where` names the source ("--model.lr", "run.yaml: model.lr"), `key` the option ("model.lr").
Value parse_value(Kind kind, const std::string& text, const std::string& where, const std::string& key) {
  std::string problem;
  switch (kind) {
    case Kind::kBool:
      if (auto b = to_bool(text)) return *b;
      break;
    case Kind::kInt: {
      const auto n = numbers::parse_int(text);
      if (n) return *n.value;
      if (n.out_of_range) problem = n.problem;
      break;
    }
    case Kind::kDouble: {
      const auto d = numbers::parse_double(text);
      if (d) return *d.value;
      if (d.out_of_range) problem = d.problem;
      break;
    }
    case Kind::kString:
      return text;
    case Kind::kOptionalInt: {
      if (is_null(text)) return std::optional<int64_t>();
      const auto n = numbers::parse_int(text);
      if (n) return std::optional<int64_t>(*n.value);
      if (n.out_of_range) problem = n.problem;
      break;
    }
    case Kind::kOptionalUint: {
      if (is_null(text)) return std::optional<uint64_t>();
      const auto n = numbers::parse_uint(text);
      if (n) return std::optional<uint64_t>(*n.value);
      if (n.out_of_range) problem = n.problem;
      break;
    }
    case Kind::kBatchLimit:
      return BatchLimit::parse(text, where);
    case Kind::kDevices:
      if (auto devices = to_devices(text)) return *devices;
      break;
    case Kind::kLogger: {
      // A switch, or names checked by the Trainer against the logger registry.
      if (auto b = to_bool(text)) return LoggerOption(*b);
      std::string names = text;
      if (names.size() >= 2 && names.front() == '[' && names.back() == ']') names = names.substr(1, names.size() - 2);
      if (!names.empty()) return LoggerOption(names);
      break;
    }
  }
  // A number refused for its value (not its spelling) also reads as key=value, the form the Trainer's own
  // checks use, so that every message about one option can be found the same way.
  throw ConfigError(where + " expects " + info(kind).expects + ", got '" + printable(text) + "'" +
                    (problem.empty() ? "" : ": " + key + "=" + printable(text) + " " + problem));
}

// --- the built-in trainer section: one row per TrainerOptions field ---

struct TrainerField {
  const char* name;
  Kind kind;
  const char* help;
  std::function<Value(const TrainerOptions&)> get;
  std::function<void(TrainerOptions&, const Value&)> set;
};

template <typename T>
Kind kind_of() {
  static_assert(std::is_constructible_v<Value, std::in_place_type_t<T>, T>,
                "a TrainerOptions field of a type the command line cannot read yet");
  if constexpr (std::is_same_v<T, bool>) {
    return Kind::kBool;
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return Kind::kInt;
  } else if constexpr (std::is_same_v<T, double>) {
    return Kind::kDouble;
  } else if constexpr (std::is_same_v<T, std::string>) {
    return Kind::kString;
  } else if constexpr (std::is_same_v<T, std::optional<int64_t>>) {
    return Kind::kOptionalInt;
  } else if constexpr (std::is_same_v<T, std::optional<uint64_t>>) {
    return Kind::kOptionalUint;
  } else if constexpr (std::is_same_v<T, LoggerOption>) {
    return Kind::kLogger;
  } else {
    return Kind::kBatchLimit;
  }
}

template <typename T>
TrainerField field(const char* name, T TrainerOptions::*member, const char* help,
                   Kind kind = kind_of<T>()) {
  return {name, kind, help,
          [member](const TrainerOptions& o) { return Value(std::in_place_type<T>, o.*member); },
          [member](TrainerOptions& o, const Value& v) { o.*member = std::get<T>(v); }};
}

const std::vector<TrainerField>& trainer_fields() {
  using O = TrainerOptions;
  static const std::vector<TrainerField> fields = {
      field("accelerator", &O::accelerator, "hardware: auto, cpu, gpu, cuda, tpu"),
      field("devices", &O::devices, "devices per node: a count, -1 for all, auto, or ids like 0,1",
            Kind::kDevices),
      field("strategy", &O::strategy, "auto, single_device, ddp, ddp_spawn, dp, xla, ..."),
      field("precision", &O::precision, "32-true, 16-mixed, bf16-mixed, 64-true, 16-true, ..."),
      field("num_nodes", &O::num_nodes, "number of machines"),
      field("num_threads", &O::num_threads, "intra-op threads per process on CPU; 0: all cores"),
      field("allow_cpu_oversubscription", &O::allow_cpu_oversubscription, "allow devices above the core count on CPU"),
      field("cluster_environment", &O::cluster_environment,
            "auto, slurm, torchelastic, kubeflow, lsf, mpi, tpu or default"),
      field("slurm_auto_detect", &O::slurm_auto_detect, "treat srun jobs as SLURM jobs"),
      field("slurm_auto_requeue", &O::slurm_auto_requeue,
            "on the requeue signal, checkpoint and requeue the SLURM job"),
      field("slurm_requeue_signal", &O::slurm_requeue_signal, "the signal SLURM sends before the time limit"),
      field("slurm_requeue_command", &O::slurm_requeue_command, "the command that requeues the job"),
      field("process_group_backend", &O::process_group_backend, "ddp's collectives: auto, gloo, nccl"),
      field("process_group_timeout_s", &O::process_group_timeout_s,
            "seconds a collective waits for the other ranks before failing"),
      field("rendezvous_timeout_s", &O::rendezvous_timeout_s, "seconds all ranks may take to join"),
      field("ddp_bucket_cap_mb", &O::ddp_bucket_cap_mb, "gradient bucket size (MiB) of the DDP reducer"),
      field("ddp_first_bucket_cap_mb", &O::ddp_first_bucket_cap_mb, "size (MiB) of the first gradient bucket"),
      field("ddp_gradient_as_bucket_view", &O::ddp_gradient_as_bucket_view,
            "gradients as views into the reducer's buckets"),
      field("max_epochs", &O::max_epochs,
            "stop after this many epochs; -1: 1000 if max_steps is -1, else no limit"),
      field("min_epochs", &O::min_epochs, "train at least this many epochs"),
      field("max_steps", &O::max_steps, "stop after this many optimizer steps; -1: no limit"),
      field("min_steps", &O::min_steps, "train at least this many optimizer steps"),
      field("limit_train_batches", &O::limit_train_batches,
            "training batches per epoch: a count, or a fraction of the loader"),
      field("limit_val_batches", &O::limit_val_batches, "validation batches: count or fraction"),
      field("limit_test_batches", &O::limit_test_batches, "test batches: count or fraction"),
      field("limit_predict_batches", &O::limit_predict_batches,
            "prediction batches: count or fraction"),
      field("val_check_interval", &O::val_check_interval,
            "validate every fraction of a training epoch, or every n training batches"),
      field("check_val_every_n_epoch", &O::check_val_every_n_epoch,
            "validate every n epochs; null: only by val_check_interval"),
      field("num_sanity_val_steps", &O::num_sanity_val_steps,
            "validation batches run before training to catch bugs early; -1: all"),
      field("fast_dev_run", &O::fast_dev_run,
            "0: off; n: run n batches of each stage once, no checkpoints or loggers"),
      field("accumulate_grad_batches", &O::accumulate_grad_batches,
            "batches whose gradients are summed before each optimizer step"),
      field("gradient_clip_val", &O::gradient_clip_val, "clip gradients at this value; 0: off"),
      field("gradient_clip_algorithm", &O::gradient_clip_algorithm, "norm or value"),
      field("seed", &O::seed, "seed LibTorch's generators and the data order; null: not seeded"),
      field("deterministic", &O::deterministic, "use deterministic algorithms only"),
      field("default_root_dir", &O::default_root_dir, "where logs and checkpoints are written"),
      field("enable_progress_bar", &O::enable_progress_bar, "show a progress bar"),
      field("enable_checkpointing", &O::enable_checkpointing,
            "save checkpoints with the default checkpoint callback"),
      field("async_checkpoint", &O::async_checkpoint, "write checkpoints in a background thread"),
      field("enable_model_summary", &O::enable_model_summary, "print a model summary at start"),
      field("logger", &O::logger,
            "true: the CSV logger; false: none; or logger names, e.g. tensorboard or csv,tensorboard (one "
            "version_N folder)"),
      field("log_every_n_steps", &O::log_every_n_steps, "log metrics every n training steps"),
      field("profiler", &O::profiler, "time every hook and step: simple, advanced or pytorch; empty: off"),
  };
  return fields;
}

// --- names and suggestions ---

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The closest candidate, or "" when none is close enough to be a plausible typo.
std::string nearest(const std::string& given, const std::vector<std::string>& candidates) {
  // "--max_epochs" for "--trainer.max_epochs": the section was left out.
  for (const auto& c : candidates) {
    if (c.size() > given.size() && c.compare(c.size() - given.size(), given.size(), given) == 0 &&
        c[c.size() - given.size() - 1] == '.') {
      return c;
    }
  }
  std::string best;
  size_t best_distance = std::max<size_t>(2, given.size() / 3) + 1;
  for (const auto& c : candidates) {
    const size_t d = edit_distance(given, c);
    if (d < best_distance) best = c, best_distance = d;
  }
  return best;
}

std::string section_of(const std::string& key) { return key.substr(0, key.find('.')); }

std::string describe(const YAML::Node& node) {
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  if (node.IsNull()) return "null";
  return "'" + node.Scalar() + "'";
}

}  // namespace

namespace detail {

struct Option {
  std::string key;  // "section.name"
  Kind kind;
  std::string help;
  Value default_value;
  Value value;
  std::function<void(TrainerOptions&, const Value&)> bind;  // empty for the program's options
};

struct CliState {
  std::string program;
  std::string description;
  std::vector<Option> options;  // trainer first, then the program's, in declaration order
  std::map<std::string, size_t> index;
  TrainerOptions trainer;

  void add(const std::string& key, Kind kind, Value default_value, const std::string& help,
           std::function<void(TrainerOptions&, const Value&)> bind = nullptr) {
    index.emplace(key, options.size());
    options.push_back({key, kind, help, default_value, default_value, std::move(bind)});
  }

  const Option& find(const std::string& key, const char* accessor) const {
    auto it = index.find(key);
    if (it != index.end()) return options[it->second];
    const std::string near = nearest(key, keys());
    throw ConfigError(std::string(accessor) + "(\"" + key + "\"): no such option" +
                      (near.empty() ? "" : "; did you mean \"" + near + "\"?") +
                      " Declare program options with add_option before reading them.");
  }

  std::vector<std::string> keys() const {
    std::vector<std::string> result;
    for (const auto& o : options) result.push_back(o.key);
    return result;
  }

  std::vector<std::string> sections() const {
    std::vector<std::string> result;
    for (const auto& o : options) {
      const std::string s = section_of(o.key);
      if (std::find(result.begin(), result.end(), s) == result.end()) result.push_back(s);
    }
    return result;
  }
};

}  // namespace detail

namespace {

using detail::CliState;
using detail::Option;

template <typename T>
const T& get_as(const CliState& state, const std::string& key, const char* accessor) {
  const Option& option = state.find(key, accessor);
  if (const T* value = std::get_if<T>(&option.value)) return *value;
  throw ConfigError(std::string(accessor) + "(\"" + key + "\"): the option holds " +
                    info(option.kind).expects + "; read it with " + info(option.kind).getter);
}

std::string yaml_text(const YAML::Node& node, Kind kind, const std::string& where) {
  if (node.IsScalar()) return node.Scalar();
  if (node.IsNull()) {
    if (kind == Kind::kString) {
      throw ConfigError(where + " expects a string, got null; write \"\" for an empty string");
    }
    return "null";
  }
  if (node.IsSequence() && kind == Kind::kLogger) {
    std::string names;
    for (const auto& element : node) {
      if (!element.IsScalar()) {
        throw ConfigError(where + " expects a list of logger names like [csv, tensorboard], got an element that is " +
                          describe(element));
      }
      names += (names.empty() ? "" : ",") + element.Scalar();
    }
    if (names.empty()) throw ConfigError(where + " expects logger names, got an empty list; write false for no logger");
    return names;
  }
  if (node.IsSequence() && kind == Kind::kDevices) {
    std::string ids;
    for (const auto& element : node) {
      if (!element.IsScalar()) {
        throw ConfigError(where + " expects a list of device ids like [0, 1], got an element " +
                          "that is " + describe(element));
      }
      ids += (ids.empty() ? "" : ",") + element.Scalar();
    }
    return "[" + ids + "]";
  }
  throw ConfigError(where + " expects " + info(kind).expects + ", got " + describe(node));
}

// The 1-based line of a node in its file, for messages.
int line_of(const YAML::Node& node) {
  return node.Mark().line + 1;
}

// yaml-cpp keeps both entries of a repeated key and a lookup takes one of them silently: a
// repeated section or key is refused, naming both lines, so that an edit never goes unread.
void check_unique(std::map<std::string, int>& seen, const std::string& key, const YAML::Node& node,
                  const std::string& path, const char* what) {
  const auto [it, inserted] = seen.emplace(key, line_of(node));
  if (!inserted) {
    throw ConfigError("config file '" + printable(path) + "' has the " + what + " '" + printable(key) +
                      "' twice, on lines " + std::to_string(it->second) + " and " + std::to_string(line_of(node)) +
                      "; YAML would keep only one of them. Delete the one you do not mean.");
  }
}

// A config file is small; a bigger one is a mistake (a data file given as --config).
constexpr size_t kMaxConfigBytes = 16u << 20;

// Reads one --config file into `values` (indexed like state.options).
void apply_file(const CliState& state, const std::string& path, std::vector<Value>& values) {
  // The type is checked before reading: a FIFO would block, /dev/zero never end.
  std::string text;
  if (const std::string problem = read_input_file(path, text, kMaxConfigBytes); !problem.empty()) {
    throw ConfigError("config file '" + printable(path) + "' (given with --config) cannot be opened: it " + problem +
                      "; give the path of a YAML file, relative to the current directory");
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp's own message for this is "bad file".
    throw ConfigError("config file '" + printable(path) + "' nests lists or mappings " + std::to_string(e.depth()) +
                      " levels deep (line " + std::to_string(e.mark.line + 1) +
                      "), beyond what the YAML reader takes; a config file is sections of keys");
  } catch (const YAML::Exception& e) {
    throw ConfigError("config file '" + printable(path) + "' is not valid YAML: " + printable(e.what()));
  }
  if (root.IsNull()) return;  // an empty file sets nothing
  if (!root.IsMap()) {
    throw ConfigError("config file '" + printable(path) + "' must be a mapping of sections such as " +
                      "'trainer: {max_epochs: 3}', got " + describe(root));
  }
  const std::vector<std::string> sections = state.sections();
  std::map<std::string, int> seen_sections;
  for (const auto& section : root) {
    const std::string name = section.first.Scalar();
    check_unique(seen_sections, name, section.first, path, "section");
    if (std::find(sections.begin(), sections.end(), name) == sections.end()) {
      const std::string near = nearest(name, sections);
      std::string known;
      for (const auto& s : sections) known += (known.empty() ? "" : ", ") + s;
      throw ConfigError(printable(path) + ": unknown section '" + printable(name) + "'" +
                        (near.empty() ? "" : "; did you mean '" + near + "'?") + " The sections are: " + known + ".");
    }
    if (section.second.IsNull()) continue;
    if (!section.second.IsMap()) {
      throw ConfigError(printable(path) + ": section '" + name + "' must be a mapping of keys such as '" + name +
                        ": {key: value}', got " + describe(section.second));
    }
    std::map<std::string, int> seen_keys;
    for (const auto& entry : section.second) {
      const std::string key = name + "." + entry.first.Scalar();
      check_unique(seen_keys, key, entry.first, path, "key");
      auto it = state.index.find(key);
      if (it == state.index.end()) {
        const std::string near = nearest(key, state.keys());
        throw ConfigError(printable(path) + ": unknown key " + printable(key) +
                          (near.empty() ? "; run with --help to list the options" : "; did you mean " + near + "?"));
      }
      const std::string where = printable(path) + ": " + key;
      const Kind kind = state.options[it->second].kind;
      values[it->second] = parse_value(kind, yaml_text(entry.second, kind, where), where, key);
    }
  }
}

void emit(YAML::Emitter& out, Kind kind, const Value& value) {
  const std::string text = to_text(value);
  if ((kind == Kind::kOptionalInt || kind == Kind::kOptionalUint) && text == "null") {
    out << YAML::Null;
    return;
  }
  // A YAML reader would take these plain scalars for numbers, booleans or null, not text.
  const bool ambiguous = text.empty() || to_bool(text) || is_null(text) ||
                         to_number<double>(text) || starts_with(lower(text), "0x") ||
                         starts_with(lower(text), "0o") || lower(text).find(".inf") <= 1 ||
                         lower(text) == ".nan";
  if (kind == Kind::kString && ambiguous) out << YAML::DoubleQuoted;
  out << text;
}

}  // namespace

// --- Cli ---

Cli::Cli(std::string program, std::string description, const TrainerOptions& trainer_defaults)
    : state_(std::make_unique<CliState>()) {
  state_->program = std::move(program);
  state_->description = std::move(description);
  const TrainerOptions& defaults = trainer_defaults;
  state_->trainer = trainer_defaults;
  for (const auto& f : trainer_fields()) {
    state_->add(std::string("trainer.") + f.name, f.kind, f.get(defaults), f.help, f.set);
  }
}

Cli::~Cli() = default;
Cli::Cli(Cli&&) noexcept = default;
Cli& Cli::operator=(Cli&&) noexcept = default;

namespace {

void check_new_key(const CliState& state, const std::string& key) {
  const auto dot = key.find('.');
  const bool well_formed = dot != std::string::npos && dot > 0 && dot + 1 < key.size() &&
                           key.find('.', dot + 1) == std::string::npos &&
                           std::all_of(key.begin(), key.end(), [](unsigned char c) {
                             return std::isalnum(c) != 0 || c == '_' || c == '-' || c == '.';
                           });
  if (!well_formed) {
    throw ConfigError("add_option(\"" + key + "\"): a key is 'section.name' with letters, " +
                      "digits, '_' or '-', e.g. \"model.lr\"");
  }
  if (section_of(key) == "trainer") {
    throw ConfigError("add_option(\"" + key + "\"): the trainer section is built in and holds " +
                      "the Trainer's flags; put program options in another section, e.g. \"model." +
                      key.substr(dot + 1) + "\"");
  }
  if (state.index.count(key) != 0) {
    throw ConfigError("add_option(\"" + key + "\"): the option is declared twice");
  }
}

}  // namespace

Cli& Cli::add_option(const std::string& key, bool default_value, const std::string& help) {
  check_new_key(*state_, key);
  state_->add(key, Kind::kBool, default_value, help);
  return *this;
}

Cli& Cli::add_option(const std::string& key, int64_t default_value, const std::string& help) {
  check_new_key(*state_, key);
  state_->add(key, Kind::kInt, default_value, help);
  return *this;
}

Cli& Cli::add_option(const std::string& key, double default_value, const std::string& help) {
  check_new_key(*state_, key);
  state_->add(key, Kind::kDouble, default_value, help);
  return *this;
}

Cli& Cli::add_option(const std::string& key, const std::string& default_value,
                     const std::string& help) {
  check_new_key(*state_, key);
  state_->add(key, Kind::kString, default_value, help);
  return *this;
}

Cli& Cli::add_option(const std::string& key, const char* default_value, const std::string& help) {
  return add_option(key, std::string(default_value), help);
}

bool Cli::parse(int argc, const char* const* argv, std::ostream& out) {
  CliState& state = *state_;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      out << usage();
      return false;
    }
  }

  std::vector<std::string> config_files;
  std::vector<std::pair<size_t, Value>> flags;  // applied after every file: flags win
  bool print_config = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.empty() || arg[0] != '-') {
      throw ConfigError("unexpected argument '" + printable(arg) + "': options are written " +
                        "--section.key VALUE (run with --help to list them)");
    }
    std::string name = arg.substr(starts_with(arg, "--") ? 2 : 1);
    std::optional<std::string> inline_value;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name.resize(eq);
    }
    const bool next_is_value = i + 1 < argc && !starts_with(argv[i + 1], "--");

    if (starts_with(arg, "--") && name == "print-config") {
      if (inline_value) throw ConfigError("--print-config takes no value, got '" + printable(arg) + "'");
      print_config = true;
    } else if (starts_with(arg, "--") && name == "config") {
      if (!inline_value && !next_is_value) {
        throw ConfigError("missing value for --config: write --config FILE.yaml");
      }
      config_files.push_back(inline_value ? *inline_value : argv[++i]);
    } else if (auto it = state.index.find(name);
               starts_with(arg, "--") && it != state.index.end()) {
      const Option& option = state.options[it->second];
      const std::string flag = "--" + name;
      std::string text;
      if (inline_value) {
        text = *inline_value;
      } else if (option.kind == Kind::kBool || option.kind == Kind::kLogger) {
        // A bare boolean flag means true; a following word that is not an option is its value.
        text = i + 1 < argc && argv[i + 1][0] != '-' ? argv[++i] : "true";
      } else if (next_is_value) {
        text = argv[++i];
      } else {
        throw ConfigError("missing value for " + flag + ", which expects " +
                          info(option.kind).expects + ": write " + flag + " VALUE or " + flag +
                          "=VALUE");
      }
      flags.emplace_back(it->second, parse_value(option.kind, text, flag, name));
    } else {
      std::vector<std::string> candidates = state.keys();
      candidates.insert(candidates.end(), {"config", "print-config", "help"});
      const std::string near = nearest(name, candidates);
      throw ConfigError("unknown option " + printable(arg.substr(0, arg.find('='))) +
                        (near.empty() ? "; run with --help to list the options" : "; did you mean --" + near + "?"));
    }
  }

  // Built aside and committed at the end, so a failed parse leaves the previous values.
  std::vector<Value> values;
  for (const auto& option : state.options) values.push_back(option.default_value);
  for (const auto& path : config_files) apply_file(state, path, values);
  for (auto& [index, value] : flags) values[index] = std::move(value);
  TrainerOptions trainer;
  for (size_t i = 0; i < values.size(); ++i) {
    state.options[i].value = std::move(values[i]);
    if (state.options[i].bind) state.options[i].bind(trainer, state.options[i].value);
  }
  state.trainer = std::move(trainer);

  if (print_config) {
    out << to_yaml();
    return false;
  }
  return true;
}

bool Cli::get_bool(const std::string& key) const { return get_as<bool>(*state_, key, "get_bool"); }

int64_t Cli::get_int(const std::string& key) const {
  return get_as<int64_t>(*state_, key, "get_int");
}

double Cli::get_double(const std::string& key) const {
  return get_as<double>(*state_, key, "get_double");
}

std::string Cli::get_string(const std::string& key) const {
  return get_as<std::string>(*state_, key, "get_string");
}

const TrainerOptions& Cli::trainer_options() const { return state_->trainer; }

std::string Cli::to_yaml() const {
  YAML::Emitter out;
  out.SetNullFormat(YAML::LowerNull);
  out << YAML::BeginMap;
  for (const auto& section : state_->sections()) {
    out << YAML::Key << section << YAML::Value << YAML::BeginMap;
    for (const auto& option : state_->options) {
      if (section_of(option.key) != section) continue;
      out << YAML::Key << option.key.substr(section.size() + 1) << YAML::Value;
      emit(out, option.kind, option.value);
    }
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::string Cli::usage() const {
  const CliState& state = *state_;
  std::vector<std::pair<std::string, std::string>> general = {
      {"-h, --help", "print this help and stop"},
      {"--config FILE.yaml",
       "read options from a YAML file of sections (repeatable; later "
       "files win, command-line flags win over all files)"},
      {"--print-config", "print the merged configuration as YAML and stop"},
  };
  size_t width = 0;
  for (const auto& [left, help] : general) width = std::max(width, left.size());
  for (const auto& o : state.options) {
    width = std::max(width, o.key.size() + 3 + std::string(info(o.kind).metavar).size());
  }
  width = std::min<size_t>(width, 44);

  std::ostringstream text;
  auto line = [&](const std::string& left, const std::string& help) {
    text << "  " << left;
    if (left.size() > width) {
      text << "\n" << std::string(width + 2, ' ');
    } else {
      text << std::string(width - left.size(), ' ');
    }
    // Help wraps so that --help reads in a 100-column terminal.
    const size_t room = std::max<size_t>(30, 100 - (width + 4));
    size_t column = 0;
    std::istringstream words(help);
    for (std::string word; words >> word;) {
      if (column > 0 && column + 1 + word.size() > room) {
        text << "\n" << std::string(width + 2, ' ');
        column = 0;
      }
      text << (column == 0 ? "  " : " ") << word;
      column += (column == 0 ? 0 : 1) + word.size();
    }
    text << "\n";
  };
  text << "usage: " << state.program
       << " [--config FILE.yaml]... [--print-config] [--SECTION.KEY VALUE]...\n\n";
  if (!state.description.empty()) text << state.description << "\n\n";
  text << "options:\n";
  for (const auto& [left, help] : general) line(left, help);
  for (const auto& section : state.sections()) {
    text << "\n" << section << ":\n";
    for (const auto& o : state.options) {
      if (section_of(o.key) != section) continue;
      const std::string default_text = to_text(o.default_value);
      line("--" + o.key + " " + info(o.kind).metavar,
           o.help + " (default: " + (default_text.empty() ? "\"\"" : default_text) + ")");
    }
  }
  return text.str();
}

}  // namespace volt::cli
