// The option schema, validation with the combination rules, and the command line that recreates a project.
#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "generator_internal.h"
#include "volt/core/numbers.h"
#include "volt/core/printable.h"
#include "volt/generator/generator.h"

namespace volt::generator {

namespace {

using nlohmann::json;

json option(const std::string& key, const std::string& label, const std::string& group, const std::string& type,
            json default_value, const std::string& help) {
  std::string flag = "--" + key;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return json{{"key", key}, {"label", label}, {"group", group}, {"type", type}, {"default", std::move(default_value)},
              {"help", help}, {"flag", flag}};
}

json with_choices(json o, json choices) {
  o["choices"] = std::move(choices);
  return o;
}

json with_range(json o, json min, json max) {
  if (!min.is_null()) o["min"] = std::move(min);
  if (!max.is_null()) o["max"] = std::move(max);
  return o;
}

std::string join(const json& choices) {
  std::string out;
  for (const auto& c : choices) out += (out.empty() ? "" : ", ") + (c.is_string() ? c.get<std::string>() : c.dump());
  return out;
}


std::string expected_kind(const json& spec) {
  const std::string type = spec["type"];
  if (type == "bool") return "true or false";
  if (type == "int") return "an integer";
  if (type == "number") return "a number";
  if (type == "list") return "names from " + join(spec["choices"]) + ", separated by commas, or none";
  return "text";
}

// A list option ("csv,tensorboard", ["csv", "tensorboard"] or "none"): the names, each one of the choices and
// given once, in the order given (Lightning: the first logger decides the log folder).
bool coerce_list(const json& spec, const json& given, json& out, std::string& why) {
  const json& choices = spec["choices"];
  const std::string how = "give one or several of " + join(choices) + ", separated by commas (" +
                          choices.front().get<std::string>() + "," + choices.back().get<std::string>() + "), or none";
  const std::string as_given = printable(
      given.is_string() ? given.get<std::string>() : given.dump(-1, ' ', false, json::error_handler_t::replace));
  std::vector<std::string> names;
  if (given.is_string()) {
    const std::string text = given;
    if (text == "none") {
      out = json::array();
      return true;
    }
    if (text.empty()) {
      why = "got ''; " + how;
      return false;
    }
    size_t start = 0;
    while (true) {
      const size_t comma = text.find(',', start);
      std::string name = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      const size_t first = name.find_first_not_of(' '), last = name.find_last_not_of(' ');
      names.push_back(first == std::string::npos ? "" : name.substr(first, last - first + 1));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  } else if (given.is_array()) {
    for (const auto& item : given) {
      if (!item.is_string()) {
        why = "expects names as text, got " + as_given + "; " + how;
        return false;
      }
      names.push_back(item.get<std::string>());
    }
    if (names == std::vector<std::string>{"none"}) names.clear();
  } else {
    why = "expects " + expected_kind(spec) + ", got " + as_given;
    return false;
  }
  out = json::array();
  for (const auto& name : names) {
    if (name.empty()) {
      why = "'" + as_given + "' has an empty name; " + how;
      return false;
    }
    if (name == "none") {
      why = "'" + as_given + "' names none (no " + spec["key"].get<std::string>() + ") together with others; " + how;
      return false;
    }
    if (std::find(choices.begin(), choices.end(), name) == choices.end()) {
      why = "'" + printable(name) + "' is not one of: " + join(choices) + "; " + how;
      return false;
    }
    if (std::find(out.begin(), out.end(), name) != out.end()) {
      why = "'" + printable(name) + "' is given twice in '" + as_given + "'; give each name once";
      return false;
    }
    out.push_back(name);
  }
  return true;
}

// Values from a command line or a web form arrive as text: read them as the schema's type.
bool coerce(const json& spec, const json& given, json& out, std::string& why) {
  const std::string type = spec["type"];
  if (type == "list") return coerce_list(spec, given, out, why);
  if (type == "string" || type == "enum") {
    if (given.is_string()) {
      out = given;
    } else if (given.is_number_integer() && type == "enum") {
      out = given.dump();
    } else {
      why = "expects text, got " + given.dump(-1, ' ', false, json::error_handler_t::replace);
      return false;
    }
    if (type == "enum") {
      for (const auto& c : spec["choices"]) {
        if (c == out) return true;
      }
      why = "'" + printable(option_text(out)) + "' is not one of: " + join(spec["choices"]);
      return false;
    }
    return true;
  }
  if (type == "bool") {
    if (given.is_boolean()) {
      out = given;
      return true;
    }
    if (given.is_string()) {
      static const std::set<std::string> yes{"true", "1", "yes", "on"}, no{"false", "0", "no", "off"};
      const std::string s = given;
      if (yes.count(s)) out = true;
      if (no.count(s)) out = false;
      if (!out.is_null()) return true;
    }
    why = "expects true or false, got " + (given.is_string()
                                               ? "'" + printable(given.get<std::string>()) + "'"
                                               : given.dump(-1, ' ', false, json::error_handler_t::replace));
    return false;
  }
  // Numbers: one parser (volt::numbers) for text; a JSON number is checked against the range as given, so the
  // message shows the value the user sent (a seed of 2^64 is not shown wrapped to a negative number).
  const double lo = spec.contains("min") ? spec["min"].get<double>() : -9.2e18;
  const double hi = spec.contains("max") ? spec["max"].get<double>() : 9.2e18;
  const auto out_of_range = [&](double v) {
    why = printable(given.is_string() ? given.get<std::string>() : given.dump()) +
          (v < lo ? " is below the minimum " + spec.value("min", json(lo)).dump()
                  : " is above the maximum " + spec.value("max", json(hi)).dump());
    return false;
  };
  if (type == "int") {
    if (given.is_number_unsigned()) {
      const uint64_t u = given.get<uint64_t>();
      if (static_cast<double>(u) < lo || static_cast<double>(u) > hi) return out_of_range(static_cast<double>(u));
      out = static_cast<int64_t>(u);
    } else if (given.is_number_integer()) {
      const int64_t i = given.get<int64_t>();
      if (static_cast<double>(i) < lo || static_cast<double>(i) > hi) return out_of_range(static_cast<double>(i));
      out = i;
    } else if (given.is_number_float()) {
      const double d = given.get<double>();
      if (std::floor(d) != d) {
        why = "expects an integer, got " + given.dump();
        return false;
      }
      if (d < lo || d > hi) return out_of_range(d);
      out = static_cast<int64_t>(d);
    } else if (given.is_string()) {
      const std::string s = given;
      const auto n = numbers::parse_int(s, static_cast<int64_t>(lo), static_cast<int64_t>(hi));
      if (!n) {
        why = "expects an integer from " + spec.value("min", json(lo)).dump() + " to " +
              spec.value("max", json(hi)).dump() + ", got '" + printable(s) + "', which " + n.problem;
        return false;
      }
      out = *n.value;
    } else {
      why = "expects an integer, got " + printable(given.dump(-1, ' ', false, json::error_handler_t::replace));
      return false;
    }
    return true;
  }
  // number
  if (given.is_number()) {
    const double d = given.get<double>();
    if (d < lo || d > hi) return out_of_range(d);
    out = d;
  } else if (given.is_string()) {
    const std::string s = given;
    const auto d = numbers::parse_double(s, lo, hi);
    if (!d) {
      why = "expects a number from " + spec.value("min", json(lo)).dump() + " to " +
            spec.value("max", json(hi)).dump() + ", got '" + printable(s) + "', which " + d.problem;
      return false;
    }
    out = *d.value;
  } else {
    why = "expects a number, got " + printable(given.dump(-1, ' ', false, json::error_handler_t::replace));
    return false;
  }
  return true;
}

json template_defaults(const json& id) {
  for (const auto& t : templates()) {
    if (t["id"] == id) return template_meta(id).value("defaults", json::object());
  }
  return json::object();  // an unknown template is reported by the enum check
}

// Lightning's max_time string: four whole numbers DD:HH:MM:SS, read as days, hours, minutes and seconds (each may
// be larger than its unit, as timedelta allows); a limit of zero is refused, since the run would stop at once.
bool is_max_time(const std::string& s) {
  int fields = 0;
  bool nonzero = false;
  size_t start = 0;
  while (true) {
    const size_t colon = s.find(':', start);
    const std::string part = s.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (part.empty() || part.size() > 6 || part.find_first_not_of("0123456789") != std::string::npos) return false;
    nonzero = nonzero || part.find_first_not_of('0') != std::string::npos;
    ++fields;
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return fields == 4 && nonzero;
}

}  // namespace

GeneratorError::GeneratorError(std::vector<Problem> problems)
    : volt::Error([&] {
        std::string text;
        for (const auto& p : problems) text += (text.empty() ? "" : "\n") + p.option + ": " + p.message;
        return text;
      }()),
      problems_(std::move(problems)) {}

const std::vector<Problem>& GeneratorError::problems() const { return problems_; }

std::string version() { return kGeneratorVersion; }

json option_schema() {
  json ids = json::array();
  for (const auto& t : templates()) ids.push_back(t["id"]);
  return json::array({
      with_choices(option("template", "Template", "Project", "enum", "image-classification",
                          "what the project trains (volt new --list-templates describes each)"),
                   ids),
      option("name", "Project name", "Project", "string", "volt_project",
             "folder, CMake target and program name: a letter, then letters, digits, '_' or '-' (64 at most)"),
      option("include_tests", "Include tests", "Project", "bool", true,
             "two ctest tests in CMakeLists.txt: a smoke test (a few batches of every stage on CPU) and a check "
             "that config.yaml reads back"),
      option("sbatch", "SLURM script", "Project", "bool", false,
             "write run.sbatch even for one node (always written when nnodes > 1)"),
      with_choices(option("accelerator", "Accelerator", "Training", "enum", "auto",
                          "hardware to train on; auto picks a GPU when there is one"),
                   {"auto", "cpu", "gpu", "tpu"}),
      with_choices(option("distributed", "Distributed", "Training", "enum", "off",
                          "off: one process; launch: `volt launch` starts the processes (one or several nodes); "
                          "spawn: the program starts them itself on one machine"),
                   {"off", "launch", "spawn"}),
      with_choices(option("backend", "Backend", "Training", "enum", "gloo",
                          "communication backend: gloo (CPU or GPU), nccl (GPU), xla-tpu (TPU: spawn, one process "
                          "per chip)"),
                   {"gloo", "nccl", "xla-tpu"}),
      with_range(option("tpu_chips_per_host", "TPU chips per host", "Training", "int", 8,
                        "8 on v2/v3/v5e-8/v6e-8 hosts, 4 on v4/v5p hosts; xla-tpu runs one process per chip"),
                 4, 8),
      with_range(option("nproc_per_node", "Processes per node", "Training", "int", 1,
                        "processes (devices) per node with distributed launch or spawn"),
                 1, 64),
      with_range(option("nnodes", "Nodes", "Training", "int", 1, "machines taking part (launch only)"), 1, 1024),
      with_range(option("node_rank", "Node rank", "Training", "int", 0,
                        "rank of the machine the project is generated for (0: the master); the README marks its command"),
                 0, 1023),
      option("master_addr", "Master address", "Training", "string", "",
             "address of node 0 that every node can reach; required when nnodes > 1"),
      with_range(option("master_port", "Master port", "Training", "int", 29500, "free TCP port on node 0"), 1024,
                 65535),
      with_choices(option("precision", "Precision", "Training", "enum", "32-true",
                          "numeric precision (Lightning's names); 16-mixed needs a GPU"),
                   {"32-true", "16-mixed", "bf16-mixed", "64-true"}),
      with_range(option("max_epochs", "Max epochs", "Training", "int", 3, "epochs to train"), 1, 100000),
      with_range(option("batch_size", "Batch size", "Training", "int", 64, "training samples per batch per process"),
                 1, 65536),
      with_range(option("lr", "Learning rate", "Training", "number", 0.001, "optimizer learning rate"), 1e-8, 10.0),
      with_choices(option("optimizer", "Optimizer", "Training", "enum", "adam", "adam, adamw or sgd (momentum 0.9)"),
                   {"adam", "adamw", "sgd"}),
      with_range(option("seed", "Seed", "Training", "int", 42, "seeds LibTorch and the data order"), 0,
                 4294967295LL),
      option("deterministic", "Deterministic", "Training", "bool", false, "deterministic algorithms only"),
      option("save_best", "Save best", "Handlers", "bool", true,
             "keep the best checkpoints by the validation metric (val_loss)"),
      option("save_last", "Save last", "Handlers", "bool", true, "always keep last.ckpt, to resume from"),
      with_range(option("every_n_train_steps", "Save every N steps", "Handlers", "int", 0,
                        "also save every N optimizer steps; 0: once per epoch"),
                 0, 100000000),
      with_range(option("save_top_k", "Keep top k", "Handlers", "int", 1,
                        "how many best checkpoints to keep (-1: all); above 1 needs save_best"),
                 -1, 1000),
      option("early_stopping", "Early stopping", "Handlers", "bool", false,
             "stop when val_loss has not improved for `patience` validations"),
      with_range(option("patience", "Patience", "Handlers", "int", 3, "validations without improvement"), 1, 1000),
      option("stop_on_nan", "Stop on NaN", "Handlers", "bool", false,
             "stop training at the step whose training loss is NaN or infinite (EarlyStopping's check_finite)"),
      option("checkpoint_filename", "Checkpoint name", "Handlers", "string", "",
             "file name of the ranked checkpoints, ModelCheckpoint's template: {epoch}, {step} and logged metrics "
             "such as {val_loss:.4f}; empty: {epoch}-{val_loss:.4f} (or {epoch}-{step} without save_best)"),
      option("max_time", "Time limit", "Handlers", "string", "",
             "stop training after this long, as Lightning's max_time: DD:HH:MM:SS (e.g. 00:01:30:00); the run "
             "saves its checkpoints as at a normal end; empty: no limit"),
      option("lr_find", "Find the learning rate", "Training", "bool", false,
             "before fit, sweep the learning rate (Lightning's Tuner.lr_find: 100 steps from 1e-8 to 1, on short fits "
             "of its own) and train with its suggestion instead of lr; one process or distributed launch"),
      with_choices(option("logger", "Loggers", "Loggers", "list", json::array({"csv"}),
                          "where the run's metrics go, in lightning_logs/version_N: csv (metrics.csv, drawn by volt "
                          "plot), tensorboard (event files for TensorBoard), both (csv,tensorboard), or none"),
                   {"csv", "tensorboard"}),
      option("default_root_dir", "Output folder", "Loggers", "string", ".",
             "the folder every run writes into (lightning_logs/, checkpoints, profiles), relative to where the "
             "program runs"),
      with_range(option("log_every_n_steps", "Log every N steps", "Loggers", "int", 50,
                        "how often the loggers record the per-step values"),
                 1, 1000000),
      with_choices(option("profiler", "Profiler", "Loggers", "enum", "none",
                          "simple: time of every action, a table at the end of fit and fit-profile.txt; advanced: "
                          "per-call statistics (min, max, mean, stddev, percentiles); pytorch: LibTorch's profiler, "
                          "a Chrome trace fit-trace.json; none: off"),
                   {"none", "simple", "advanced", "pytorch"}),
  });
}

Validation validate(const json& input) {
  Validation v;
  const json schema = option_schema();
  json given = json::object();  // the options the input set, read as their types
  if (!input.is_object()) {
    v.errors.push_back({"options", "expected an object of option: value, got " + input.dump()});
    return v;
  }
  std::string known;
  for (const auto& spec : schema) known += (known.empty() ? "" : ", ") + spec["key"].get<std::string>();
  for (const auto& [key, value] : input.items()) {
    // key by name: clang before 16 cannot capture a structured binding (the fuzz build uses clang-14).
    const auto spec =
        std::find_if(schema.begin(), schema.end(), [&key = key](const json& s) { return s["key"] == key; });
    if (spec == schema.end()) {
      v.errors.push_back({printable(key), "unknown option; the options are: " + known});
      continue;
    }
    if (value.is_null()) {
      // Not "the default": a form or file that sends null for a field has lost its value somewhere.
      v.errors.push_back({key, "expects " + expected_kind(*spec) + ", got null; leave the option out to get its " +
                                   "default (" + option_text((*spec)["default"]) + ")"});
      continue;
    }
    json out;
    std::string why;
    if (coerce(*spec, value, out, why)) {
      given[key] = out;
    } else {
      v.errors.push_back({key, why});
    }
  }
  for (const auto& spec : schema) {
    const std::string key = spec["key"];
    v.options[key] = given.contains(key) ? given[key] : spec["default"];
  }
  json& o = v.options;
  // A template may choose other defaults (the GAN's learning rate); given values always win.
  const json template_default = template_defaults(o["template"]);
  for (const auto& [key, value] : template_default.items()) {
    if (!given.contains(key)) o[key] = value;
  }
  const auto set = [&](const std::string& key) { return given.contains(key); };
  // Fix `key` to `value` because of `cause`: an error when the user asked for something else.
  const auto force = [&](const std::string& key, const json& value, const std::string& cause, const std::string& why) {
    if (o[key] == value) {
      if (!set(key)) v.forced.push_back({key, "forced by " + cause + ": " + why});
      return;
    }
    if (set(key)) {
      v.errors.push_back({key, option_text(o[key]) + " is impossible with " + cause + ": " + why});
    } else {
      o[key] = value;
      v.forced.push_back({key, "forced by " + cause + ": " + why});
    }
  };

  if (!validate_name(o["name"].get<std::string>(), v.errors)) o["name"] = spec_default(schema, "name");

  // The accelerator and the backend decide each other.
  const std::string acc = o["accelerator"];
  if (!set("backend")) {
    if (acc == "tpu") force("backend", "xla-tpu", "accelerator=tpu", "a TPU is driven through XLA");
    if (acc == "gpu" && o["distributed"] != "off") {
      force("backend", "nccl", "accelerator=gpu", "nccl is the GPU backend (pass --backend gloo to use gloo)");
    }
  }
  const std::string backend = o["backend"];
  if (backend == "xla-tpu") {
    const std::string cause = "backend=xla-tpu";
    force("accelerator", "tpu", cause, "XLA runs on TPU devices; allowed: accelerator tpu");
    force("distributed", "spawn", cause, "XLA starts one process per TPU chip itself; allowed: distributed spawn");
    const int64_t chips = o["tpu_chips_per_host"];
    if (chips != 4 && chips != 8) {
      v.errors.push_back({"tpu_chips_per_host", std::to_string(chips) + " is not a TPU host size; allowed: 8 "
                                                                         "(v2, v3, v5e-8, v6e-8) or 4 (v4, v5p)"});
    }
    force("nproc_per_node", chips, cause + " with tpu_chips_per_host=" + std::to_string(chips),
          "one process per chip; set tpu_chips_per_host=4 for v4/v5p hosts");
    if (o["precision"] == "16-mixed") {
      v.errors.push_back({"precision", "16-mixed is impossible with backend=xla-tpu: TPUs compute in bfloat16; "
                                       "allowed: 32-true, bf16-mixed, 64-true"});
    }
    if (o["sbatch"] == true) {
      v.errors.push_back({"sbatch", "true is impossible with backend=xla-tpu: a TPU VM runs the program itself, "
                                    "without SLURM; allowed: false"});
    }
    if (o["nnodes"] != 1) {
      v.errors.push_back({"nnodes", o["nnodes"].dump() + " is impossible with backend=xla-tpu: the generator "
                                                         "writes single-host TPU VM projects; allowed: 1"});
    }
  } else {
    if (o["accelerator"] == "tpu") {
      v.errors.push_back({"accelerator", "tpu is impossible with backend=" + backend +
                                             ": a TPU needs backend xla-tpu; allowed with " + backend + ": " +
                                             (backend == "nccl" ? "gpu" : "auto, cpu, gpu")});
    }
    if (backend == "nccl") force("accelerator", "gpu", "backend=nccl", "NCCL runs on NVIDIA GPUs; allowed: gpu");
  }
  if (o["precision"] == "16-mixed" && o["accelerator"] == "cpu") {
    v.errors.push_back({"precision", "16-mixed is impossible with accelerator=cpu: float16 autocast needs a GPU; "
                                     "allowed on CPU: 32-true, bf16-mixed, 64-true"});
  }

  const std::string dist = o["distributed"];
  if (dist == "off") {
    if (o["nproc_per_node"] != 1) {
      v.errors.push_back({"nproc_per_node", o["nproc_per_node"].dump() +
                                                " processes need distributed=launch or spawn; with distributed=off "
                                                "allowed: 1"});
    }
    if (o["nnodes"] != 1) {
      v.errors.push_back({"nnodes", o["nnodes"].dump() + " nodes need distributed=launch; with distributed=off "
                                                         "allowed: 1"});
    }
  }
  if (dist == "spawn" && o["nnodes"] != 1 && backend != "xla-tpu") {
    v.errors.push_back({"nnodes", o["nnodes"].dump() + " nodes are impossible with distributed=spawn: spawn starts "
                                                       "processes on one machine; use distributed=launch"});
  }
  const int64_t nnodes = o["nnodes"];
  if (o["node_rank"].get<int64_t>() >= nnodes) {
    v.errors.push_back({"node_rank", o["node_rank"].dump() + " must be below nnodes=" + std::to_string(nnodes) +
                                         "; allowed: 0 to " + std::to_string(nnodes - 1)});
  }
  const std::string addr = o["master_addr"];
  if (nnodes > 1) {
    if (addr.empty()) {
      v.errors.push_back({"master_addr", "nnodes=" + std::to_string(nnodes) +
                                             " needs the address of node 0 that every node can reach, e.g. "
                                             "--master-addr 10.0.0.1 (and --master-port, default 29500)"});
    } else if (addr == "localhost" || addr.rfind("127.", 0) == 0) {
      v.errors.push_back({"master_addr", printable(addr) +
                                             " is this machine only; with nnodes=" + std::to_string(nnodes) +
                                             " give node 0's address on the network, e.g. 10.0.0.1"});
    }
  }
  if (!addr.empty() && addr.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:") !=
                           std::string::npos) {
    v.errors.push_back({"master_addr", "'" + addr + "' is not a host name or IP address (letters, digits, '.', "
                                                    "'-', ':')"});
  }

  // Handlers.
  const std::string max_time = o["max_time"];
  if (!max_time.empty() && !is_max_time(max_time)) {
    v.errors.push_back({"max_time", "'" + printable(max_time) +
                                        "' is not a time limit: give DD:HH:MM:SS (days, hours, minutes, seconds as "
                                        "whole numbers, not all zero), e.g. 00:01:30:00 for an hour and a half, or "
                                        "leave it empty for no limit"});
  }
  const std::string filename = o["checkpoint_filename"];
  if (filename.find_first_of("/\\") != std::string::npos || filename == "." || filename == ".." ||
      filename.find_first_of("\"'`$;|&<>\n\r\t") != std::string::npos) {
    v.errors.push_back({"checkpoint_filename", "'" + printable(filename) +
                                                   "' is not a file name template: no folders ('/'), quotes or "
                                                   "shell characters; e.g. best-{epoch}-{val_loss:.4f}"});
  } else if (std::count(filename.begin(), filename.end(), '{') != std::count(filename.begin(), filename.end(), '}')) {
    v.errors.push_back({"checkpoint_filename", "'" + printable(filename) +
                                                   "' has unbalanced braces: each {key} or {key:spec} opens and "
                                                   "closes, e.g. {epoch}-{val_loss:.4f}"});
  }
  const std::string root = o["default_root_dir"];
  if (root.empty() || root.front() == '/' || root.find("..") != std::string::npos ||
      root.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/") !=
          std::string::npos) {
    v.errors.push_back({"default_root_dir", "'" + printable(root) +
                                                "' is not a folder inside the project: give a relative path of "
                                                "letters, digits, '.', '_', '-' and '/' without '..', e.g. runs (an "
                                                "absolute one can be given at run time: --trainer.default_root_dir)"});
  }
  const std::string tmpl = o["template"];
  if (o["lr_find"] == true) {
    if (tmpl == "gan") {
      v.errors.push_back({"lr_find", "true is impossible with template=gan: the GAN trains two optimizers and the "
                                     "learning-rate finder tunes one; allowed: false"});
    } else if (dist == "spawn") {
      v.errors.push_back({"lr_find", "true is impossible with distributed=spawn" +
                                         std::string(backend == "xla-tpu" ? " (backend xla-tpu)" : "") +
                                         ": each short fit of the sweep would start the workers again; use "
                                         "distributed=off or launch, or set lr from a one-process sweep"});
    }
  }
  if (tmpl == "gan") {
    force("save_best", false, "template=gan", "a GAN has no validation loss to rank checkpoints by");
    force("early_stopping", false, "template=gan", "a GAN has no validation loss to stop on");
  }
  if (o["save_top_k"].get<int64_t>() > 1 && o["save_best"] == false) {
    v.errors.push_back({"save_top_k", o["save_top_k"].dump() + " needs save_best=true: ranking checkpoints needs "
                                                               "the validation metric; allowed without it: -1, 0, 1"});
  }
  return v;
}

std::string command_line(const json& options) {
  const Validation v = validate(options);
  std::set<std::string> forced;
  for (const auto& p : v.forced) forced.insert(p.option);
  std::string out = "volt new " + shell_quote(v.options["name"]) + " --template " +
                    shell_quote(v.options["template"]);
  for (const auto& spec : option_schema()) {
    const std::string key = spec["key"];
    if (key == "name" || key == "template" || forced.count(key)) continue;
    const json& value = v.options[key];
    const json defaults = template_defaults(v.options["template"]);
    if (value == defaults.value(key, spec["default"])) continue;
    out += " " + spec["flag"].get<std::string>() + " " + shell_quote(option_text(value));
  }
  return out;
}

}  // namespace volt::generator
