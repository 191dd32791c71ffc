// volt-core: the `volt` commands that need LibTorch (the front end, front_main.cpp, execs it
// for everything but new and ui): facts about this build, the hardware plan a set of flags gives, and what a
// checkpoint or weights file holds.
#include <ATen/Context.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cctype>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "command_args.h"
#include "flags_command.h"
#include "launch_command.h"
#include "volt/accelerators/hardware_probe.h"
#include "volt/checkpoint_io/safetensors.h"
#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/checkpoint_io/weights_file.h"
#include "volt/connectors/accelerator_connector.h"
#include "volt/connectors/checkpoint_connector.h"
#include "volt/core/compat.h"
#include "volt/core/error.h"
#include "volt/core/input_file.h"
#include "volt/core/numbers.h"
#include "volt/core/printable.h"
#include "volt/core/version.h"
#include "volt/strategies/fsdp_strategy.h"
#include "volt/trainer/trainer.h"

namespace {

constexpr const char* kUsage =
    "usage: volt <command> [options]\n"
    "\n"
    "commands:\n"
    "  version            print Volt's and LibTorch's versions\n"
    "  info               this build and machine: versions, threads, BLAS, registered plug-ins\n"
    "  plan [--devices D --strategy S ... --assume cuda=8 --json]\n"
    "                     resolve hardware flags into the plan a Trainer would run (volt plan --help)\n"
    "  inspect FILE [--json]\n"
    "                     say which format a file is (Volt or Lightning checkpoint, torch.save state_dict,\n"
    "                     safetensors) and describe it: versions, progress, metrics, every tensor's dtype\n"
    "                     and shape, totals, optimizer state; a damaged file is refused\n"
    "  launch [--nproc-per-node N --nnodes M --node-rank K --master-addr A --master-port P] -- PROGRAM ARGS\n"
    "                     start a program's ranks with torchrun's variables (volt launch --help)\n"
    "  new NAME --template T [--OPTION VALUE ...]\n"
    "                     write a training project on Volt from a template (volt new --help)\n"
    "  ui [--port P] [--host H] [--open]\n"
    "                     the generator as a web page on http://127.0.0.1:8765/ (volt ui --help)\n"
    "  plot RUN_DIR... [--metrics a,b] [--out curves.png|curves.svg]\n"
    "                     draw the curves of runs' metrics.csv as a PNG or SVG (volt plot --help)\n"
    "  flags [--markdown | --names]\n"
    "                     the Trainer's flags: name, type, default, help (--markdown: README.md's table)\n"
    "  help               this text\n";

int cmd_info() {
  std::cout << "volt " << VOLT_VERSION_STRING << ", LibTorch " << volt::compat::torch_version() << "\n";
  std::cout << "CUDA in this LibTorch: " << (at::hasCUDA() ? "yes" : "no") << "\n";
  std::cout << "intra-op threads (LibTorch default here): " << at::get_num_threads() << "\n";
  std::cout << at::get_parallel_info();
  std::cout << "\nregistered plug-ins (kind, key, description):\n" << volt::describe_registries();
  return 0;
}

const char* error_kind(const volt::Error& e) {
  if (dynamic_cast<const volt::ConfigError*>(&e)) return "ConfigError";
  if (dynamic_cast<const volt::NotSupportedError*>(&e)) return "NotSupportedError";
  if (dynamic_cast<const volt::CheckpointError*>(&e)) return "CheckpointError";
  return "Error";
}

constexpr const char* kPlanUsage =
    "usage: volt plan [--accelerator A] [--devices D] [--strategy S] [--precision P] [--num-nodes N]\n"
    "                 [--cluster-environment E] [--assume cpu|cuda=N|tpu=N|tpu=TYPE] [--json]\n"
    "Resolves Trainer flags in this environment (its variables: torchrun, SLURM, ...) into the hardware plan.\n"
    "                 [--params N --optimizer adam|adamw|sgd|momentum|rmsprop|adagrad] [--fsdp-sharding S]\n"
    "                 [--fsdp-cpu-offload true|false]\n"
    "--devices takes 2, -1, auto, \"0,1\", \"1,\" or [0,1]. --assume replaces this machine's hardware probe.\n"
    "--params (e.g. 54.6M, 1.3B, 125000000): also what each rank holds of a model that size (parameters,\n"
    "gradients, optimizer state) under the strategy; --fsdp-sharding: FULL_SHARD, SHARD_GRAD_OP, NO_SHARD;\n"
    "--fsdp-cpu-offload true: those pieces kept in host memory between steps.\n";

// Far more machines than any job has; keeps nodes times devices from overflowing.
constexpr int64_t kMaxNodes = 1000000;

// JSON text of j; text that is not UTF-8 (a file name, a value from the command line) is shown with
// U+FFFD instead of making the JSON writer throw.
std::string dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

/// "54.6M", "1.3B", "125000000", "350k": a number of parameter elements.
int64_t parse_param_count(const std::string& text) {
  std::string body = text;
  double scale = 1;
  if (!body.empty()) {
    const char s = static_cast<char>(std::toupper(static_cast<unsigned char>(body.back())));
    if (s == 'K' || s == 'M' || s == 'B' || s == 'G') {
      scale = s == 'K' ? 1e3 : s == 'M' ? 1e6 : 1e9;
      body.pop_back();
    }
  }
  const auto v = volt::numbers::parse_double(body, 1.0, 1e15);
  if (!v.value || *v.value * scale < 1 || *v.value * scale > 1e15) {
    throw volt::ConfigError("--params expects a number of parameters such as 54.6M, 1.3B or 125000000, got '" +
                            volt::printable(text) + "'" + (v.value ? std::string() : ", which " + v.problem) + ".");
  }
  return static_cast<int64_t>(std::llround(*v.value * scale));
}

int64_t optimizer_state_tensors(const std::string& name) {
  if (name == "adam" || name == "adamw") return 2;
  if (name == "momentum" || name == "rmsprop" || name == "adagrad") return 1;
  if (name == "sgd") return 0;
  throw volt::ConfigError("--optimizer '" + volt::printable(name) +
                          "' is not known. Use adam, adamw (2 state tensors per parameter), momentum (SGD with "
                          "momentum), rmsprop, adagrad (1) or sgd (none).");
}

int64_t bytes_per_element(const std::string& precision) {
  if (precision == "64-true" || precision == "64") return 8;
  if (precision == "bf16-true" || precision == "16-true") return 2;
  return 4;  // 32-true and the mixed precisions keep float32 parameters
}

volt::strategies::RankMemory plan_memory(const volt::connectors::Plan& plan, int64_t num_params, int64_t state_tensors,
                                         const volt::TrainerOptions& options) {
  return volt::strategies::rank_memory(plan.strategy, plan.fsdp.sharding_strategy, plan.world_size, num_params,
                                       bytes_per_element(plan.precision), state_tensors,
                                       options.ddp_gradient_as_bucket_view);
}

nlohmann::json memory_json(const volt::connectors::Plan& plan, int64_t num_params, int64_t state_tensors,
                           const volt::TrainerOptions& options) {
  const auto m = plan_memory(plan, num_params, state_tensors, options);
  return {{"num_params", num_params},         {"parameters", m.parameters},
          {"gradients", m.gradients},         {"optimizer_state", m.optimizer_state},
          {"total", m.total()},               {"communication_buffers", m.communication_buffers},
          {"sharding_strategy", plan.strategy == "fsdp" ? volt::strategies::to_string(plan.fsdp.sharding_strategy) : ""},
          {"cpu_offload", plan.strategy == "fsdp" && plan.fsdp.cpu_offload}};
}

std::string describe_memory(const volt::connectors::Plan& plan, int64_t num_params, const std::string& optimizer,
                            int64_t state_tensors, const volt::TrainerOptions& options) {
  const auto m = plan_memory(plan, num_params, state_tensors, options);
  const auto whole = plan_memory({}, num_params, state_tensors, options);  // one process, no sharding
  auto mib = [](int64_t b) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1f MiB", static_cast<double>(b) / (1024.0 * 1024.0));
    return std::string(buf);
  };
  std::ostringstream out;
  out << "memory per rank (" << num_params << " parameters, " << bytes_per_element(plan.precision)
      << " bytes each, " << optimizer << "; strategy " << plan.strategy;
  if (plan.strategy == "fsdp") out << " " << volt::strategies::to_string(plan.fsdp.sharding_strategy);
  out << " on " << plan.world_size << " rank(s)):\n"
      << "  parameters      " << mib(m.parameters) << "\n"
      << "  gradients       " << mib(m.gradients) << "\n"
      << "  optimizer state " << mib(m.optimizer_state) << "\n"
      << "  total           " << mib(m.total()) << " (" << std::fixed << std::setprecision(3)
      << static_cast<double>(m.total()) / static_cast<double>(std::max<int64_t>(whole.total(), 1))
      << " of one whole copy)\n";
  if (m.communication_buffers > 0) {
    out << "  + " << mib(m.communication_buffers)
        << " in the Reducer's gradient buckets (ddp.gradient_as_bucket_view=true shares them)\n";
  }
  if (plan.strategy == "fsdp" && plan.fsdp.cpu_offload) {
    out << "  all of it in host memory between steps (fsdp.cpu_offload=true; the optimizer steps on the CPU)\n";
  }
  out << "  (activations, and under fsdp the whole parameters inside a step, come on top)\n";
  return out.str();
}

int cmd_plan(int argc, char** argv) {
  volt::TrainerOptions options;
  std::string assume;
  std::string params_text;
  std::string optimizer = "adam";
  // --json is known before any error, so that every error comes out as JSON with it.
  const bool json = std::any_of(argv + 1, argv + argc, [](const char* a) { return std::strcmp(a, "--json") == 0; });
  try {
    for (int i = 1; i < argc; ++i) {
      const volt::tools::CommandArg split = volt::tools::split_command_arg(argv[i]);
      std::string arg = split.name;
      const std::string& value = split.value;
      const bool has_value = split.has_value;
      auto next = [&]() -> std::string {
        if (has_value) return value;
        if (i + 1 >= argc) throw volt::ConfigError(arg + " needs a value. " + std::string(kPlanUsage));
        return argv[++i];
      };
      if (arg == "--json") {
        continue;
      } else if (arg == "--help" || arg == "-h") {
        std::cout << kPlanUsage;
        return 0;
      } else if (arg == "--accelerator") {
        options.accelerator = next();
      } else if (arg == "--devices") {
        options.devices = next();
      } else if (arg == "--strategy") {
        options.strategy = next();
      } else if (arg == "--precision") {
        options.precision = next();
      } else if (arg == "--num-nodes") {
        const std::string v = next();
        const auto n = volt::numbers::parse_int(v, 1, kMaxNodes);
        if (!n)
          throw volt::ConfigError("--num-nodes expects a whole number of nodes, got '" + v + "', which " + n.problem +
                                  ".");
        options.num_nodes = *n.value;
      } else if (arg == "--cluster-environment") {
        options.cluster_environment = next();
      } else if (arg == "--assume") {
        assume = next();
      } else if (arg == "--params") {
        params_text = next();
      } else if (arg == "--optimizer") {
        optimizer = next();
      } else if (arg == "--fsdp-sharding") {
        options.fsdp_sharding_strategy = next();
      } else if (arg == "--fsdp-cpu-offload") {
        const std::string v = next();
        if (v != "true" && v != "false") {
          throw volt::ConfigError("--fsdp-cpu-offload takes true or false, not '" + volt::printable(v) + "'.");
        }
        options.fsdp_cpu_offload = v == "true";
      } else {
        throw volt::ConfigError("unknown option '" + volt::printable(arg) + "'. " + std::string(kPlanUsage));
      }
    }
    const volt::Environ env = volt::Environ::current();
    const auto probe = assume.empty() ? volt::accelerators::HardwareProbe::detect(env)
                                      : volt::accelerators::HardwareProbe::assume(assume, env);
    const int64_t num_params = params_text.empty() ? 0 : parse_param_count(params_text);
    const int64_t state_tensors = optimizer_state_tensors(optimizer);
    volt::connectors::AcceleratorConnector connector(options, env, probe);
    const auto& plan = connector.plan();
    if (json) {
      nlohmann::json out = nlohmann::json::parse(plan.to_json());
      if (num_params > 0) out["memory_per_rank"] = memory_json(plan, num_params, state_tensors, options);
      std::cout << dump(out) << "\n";
    } else {
      std::cout << plan.describe();
      if (num_params > 0) std::cout << describe_memory(plan, num_params, optimizer, state_tensors, options);
    }
    return 0;
  } catch (const std::exception& e) {
    // A volt::Error is the rule; anything else (a parser below that lets std::out_of_range through) is still
    // a refusal with its message, never an abort.
    const auto* volt_error = dynamic_cast<const volt::Error*>(&e);
    if (json) {
      std::cout << dump({{"error", e.what()}, {"kind", volt_error ? error_kind(*volt_error) : "Error"}}) << "\n";
    } else {
      std::cerr << "volt plan: " << e.what() << "\n";
    }
    return 2;
  }
}

constexpr const char* kInspectUsage =
    "usage: volt inspect FILE [--json]\n"
    "Says which format FILE is, from its contents: a Volt checkpoint, a Lightning checkpoint, a torch.save\n"
    "state_dict or a .safetensors file, and describes it: versions, epoch, step, metrics, one row per tensor\n"
    "(name, dtype, shape, numel), totals and optimizer state. Every zip record's CRC-32 is checked first.\n"
    "Exit status 2 when the file is missing, damaged or of no format Volt reads.\n";

struct TensorRow {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  int64_t bytes = 0;
};

std::vector<TensorRow> tensor_rows(const std::map<std::string, at::Tensor>& tensors) {
  std::vector<TensorRow> rows;
  for (const auto& [name, t] : tensors) {
    std::string dtype = volt::checkpoint_io::safetensors_dtype_name(t.scalar_type());
    if (dtype.empty()) dtype = c10::toString(t.scalar_type());
    rows.push_back({name, dtype, t.sizes().vec(), t.numel(), t.numel() * static_cast<int64_t>(t.element_size())});
  }
  return rows;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// A header that declares a length fitting the file and starts with '{' is safetensors;
// LibTorch archives start with a zip signature, whose first 8 bytes read as a huge length.
bool looks_like_safetensors(const std::string& path) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec || size < 10) return false;
  std::ifstream in(path, std::ios::binary);
  unsigned char head[9];
  if (!in.read(reinterpret_cast<char*>(head), sizeof(head))) return false;
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | head[i];
  return n >= 2 && n <= size - 8 && head[8] == '{';
}

bool has_suffix(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string number_string(const nlohmann::json& j) {
  if (!j.is_number_float()) return dump(j);
  std::ostringstream out;
  out << j.get<double>();
  return out.str();
}

void print_tensor_table(const std::vector<TensorRow>& rows, int64_t parameters, const char* parameters_note) {
  size_t name_w = 4, dtype_w = 5, shape_w = 5;
  for (const auto& r : rows) {
    name_w = std::max(name_w, r.name.size());
    dtype_w = std::max(dtype_w, r.dtype.size());
    shape_w = std::max(shape_w, shape_string(r.shape).size());
  }
  auto cell = [](const std::string& s, size_t w) { return s + std::string(w - s.size() + 2, ' '); };
  std::cout << "\n" << cell("name", name_w) << cell("dtype", dtype_w) << cell("shape", shape_w) << "numel\n";
  int64_t bytes = 0;
  for (const auto& r : rows) {
    std::cout << cell(r.name, name_w) << cell(r.dtype, dtype_w) << cell(shape_string(r.shape), shape_w) << r.numel
              << "\n";
    bytes += r.bytes;
  }
  std::cout << "\ntotal: " << rows.size() << " tensors, " << parameters << " parameters" << parameters_note << ", "
            << bytes << " bytes of tensor data\n";
}

nlohmann::json rows_json(const std::vector<TensorRow>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : rows) {
    out.push_back({{"name", r.name}, {"dtype", r.dtype}, {"shape", r.shape}, {"numel", r.numel}});
  }
  return out;
}

nlohmann::json totals_json(const std::vector<TensorRow>& rows, int64_t parameters) {
  int64_t bytes = 0;
  for (const auto& r : rows) bytes += r.bytes;
  return {{"tensors", rows.size()}, {"parameters", parameters}, {"bytes", bytes}};
}

void inspect_safetensors(const std::string& path, bool json) {
  const auto file = volt::checkpoint_io::load_safetensors(path);
  const auto rows = tensor_rows(file.tensors);
  int64_t parameters = 0;
  for (const auto& r : rows) parameters += r.numel;
  if (json) {
    std::cout << dump({{"kind", "safetensors"},
                       {"format", "safetensors"},
                       {"path", volt::printable(path)},
                       {"metadata", file.metadata},
                       {"tensors", rows_json(rows)},
                       {"totals", totals_json(rows, parameters)}})
              << "\n";
    return;
  }
  std::cout << volt::printable(path) << ": safetensors weights\n";
  for (const auto& [key, value] : file.metadata) std::cout << "  " << key << ": " << value << "\n";
  print_tensor_table(rows, parameters, "");
}

void inspect_checkpoint(const std::string& path, bool json) {
  const volt::Checkpoint ckpt = volt::checkpoint_io::TorchCheckpointIO().load_checkpoint(path);
  // The checks resume makes before restoring anything, with its messages.
  volt::connectors::CheckpointConnector::validate_progress(ckpt, path);
  const auto rows = tensor_rows(ckpt.tensors);
  // Parameters are the module's tensors (its parameters and buffers), not RNG states.
  int64_t parameters = 0;
  for (const auto& r : rows) {
    if (r.name.rfind("state_dict.", 0) == 0) parameters += r.numel;
  }
  const auto& meta = ckpt.meta;
  if (json) {
    nlohmann::json blobs = nlohmann::json::array();
    for (const auto& [name, bytes] : ckpt.blobs) blobs.push_back({{"name", name}, {"bytes", bytes.size()}});
    std::cout << dump({{"kind", "checkpoint"},
                       {"format", "Volt checkpoint"},
                       {"path", volt::printable(path)},
                       {"meta", meta},
                       {"tensors", rows_json(rows)},
                       {"blobs", blobs},
                       {"totals", totals_json(rows, parameters)}})
              << "\n";
    return;
  }
  const auto& volt = volt::connectors::CheckpointConnector::volt_section(ckpt);
  auto field_of = [&](const nlohmann::json& j, const char* key) {
    return j.is_object() && j.contains(key) ? number_string(j[key]) : std::string("?");
  };
  auto text_of = [&](const nlohmann::json& j, const char* key) {
    return j.is_object() && j.contains(key) && j[key].is_string() ? volt::printable(j[key].get<std::string>())
                                                                  : std::string("?");
  };
  std::cout << volt::printable(path) << ": Volt checkpoint (format " << field_of(volt, "format_version");
  if (volt.is_object() && volt.contains("converted_from_format")) {
    std::cout << ", converted on read from format " << field_of(volt, "converted_from_format");
  }
  std::cout << ", Lightning layout " << text_of(meta, "pytorch-lightning_version") << ", Volt "
            << text_of(meta, "volt_version") << ", LibTorch " << text_of(volt, "torch_version") << ")\n";
  std::cout << "  epoch " << field_of(meta, "epoch") << ", global step " << field_of(meta, "global_step")
            << (volt.is_object() && volt.value("weights_only", false) ? ", weights only" : "") << "\n";
  if (volt.is_object() && volt.contains("loops") && volt["loops"].is_object()) {
    const auto& l = volt["loops"];
    std::cout << "  position: " << field_of(l, "batches_done") << " of " << field_of(l, "num_training_batches")
              << " batches of the epoch done, " << field_of(l, "batches_seen") << " in all\n";
  }
  const auto metrics = volt.is_object() ? volt.value("metrics", nlohmann::json::object()) : nlohmann::json::object();
  if (metrics.is_object() && !metrics.empty()) {
    std::cout << "  metrics:";
    for (const auto& [name, value] : metrics.items()) std::cout << " " << name << "=" << number_string(value);
    std::cout << "\n";
  }
  const auto hparams = meta.value("hyper_parameters", nlohmann::json::object());
  if (!hparams.is_null() && !hparams.empty()) std::cout << "  hyper_parameters: " << dump(hparams) << "\n";
  const auto optimizers = meta.value("optimizer_states", nlohmann::json::array());
  for (size_t i = 0; optimizers.is_array() && i < optimizers.size(); ++i) {
    const auto& o = optimizers[i];
    const auto groups = o.is_object() ? o.value("param_groups", nlohmann::json::array()) : nlohmann::json::array();
    std::cout << "  optimizer_states[" << i << "]: " << groups.size() << " param group(s)";
    for (const auto& g : groups) {
      if (g.is_object())
        std::cout << ", lr " << field_of(g, "lr") << " over " << g.value("params", nlohmann::json::array()).size()
                  << " parameters";
    }
    const std::string prefix = "optimizer_states." + std::to_string(i) + ".state.";
    std::set<std::string> entries;
    for (const auto& [name, t] : ckpt.tensors) {
      if (name.rfind(prefix, 0) != 0) continue;
      const std::string rest = name.substr(prefix.size());
      const auto dot = rest.find('.');
      if (dot != std::string::npos) entries.insert(rest.substr(dot + 1));
    }
    std::cout << "; state";
    if (entries.empty()) std::cout << " none in PyTorch's layout";
    for (const auto& e : entries) std::cout << " " << e;
    std::cout << "\n";
  }
  const auto scheds = meta.value("lr_schedulers", nlohmann::json::array());
  for (size_t i = 0; scheds.is_array() && i < scheds.size(); ++i) {
    std::cout << "  lr_schedulers[" << i << "]: last_epoch " << field_of(scheds[i], "last_epoch") << "\n";
  }
  const auto callbacks = meta.value("callbacks", nlohmann::json::object());
  for (const auto& [key, value] : callbacks.items()) std::cout << "  callbacks: " << volt::printable(key) << "\n";
  print_tensor_table(rows, parameters, " (state_dict)");
  if (!ckpt.blobs.empty()) {
    std::cout << "\nLibTorch optimizer archives (volt_blobs):\n";
    for (const auto& [name, bytes] : ckpt.blobs) std::cout << "  " << name << "  " << bytes.size() << " bytes\n";
  }
}

// A Lightning checkpoint or a torch.save state_dict, read by the weights-only reader.
void inspect_weights_file(const std::string& path, const volt::checkpoint_io::WeightsFile& file, bool json) {
  using volt::checkpoint_io::FileFormat;
  const bool lightning = file.format == FileFormat::kLightningCheckpoint;
  const auto rows = tensor_rows(file.state_dict);
  int64_t parameters = 0;
  for (const auto& r : rows) parameters += r.numel;
  if (json) {
    std::cout << dump({{"kind", lightning ? "lightning_checkpoint" : "state_dict"},
                       {"format", volt::checkpoint_io::format_name(file.format)},
                       {"path", volt::printable(path)},
                       {"info", file.info},
                       {"tensors", rows_json(rows)},
                       {"totals", totals_json(rows, parameters)}})
              << "\n";
    return;
  }
  const auto& info = file.info;
  auto field = [&](const char* key) { return info.contains(key) ? number_string(info[key]) : std::string("?"); };
  std::cout << volt::printable(path) << ": " << volt::checkpoint_io::format_name(file.format);
  if (lightning) {
    const auto version = info.value("pytorch-lightning_version", nlohmann::json("?"));
    std::cout << " (Lightning " << (version.is_string() ? version.get<std::string>() : dump(version)) << ")\n";
    std::cout << "  epoch " << field("epoch") << ", global step " << field("global_step") << "\n";
    for (const auto& [key, value] : info.items()) {
      if (key == "epoch" || key == "global_step" || key == "pytorch-lightning_version") continue;
      std::string text = dump(value);
      if (text.size() > 160) text = text.substr(0, 157) + "...";
      std::cout << "  " << key << ": " << text << "\n";
    }
  } else {
    std::cout << "\n";
  }
  print_tensor_table(rows, parameters, lightning ? " (state_dict)" : "");
}

int cmd_inspect(int argc, char** argv) {
  // --json is known before any error, so that every error comes out as JSON with it.
  const bool json = std::any_of(argv + 1, argv + argc, [](const char* a) { return std::strcmp(a, "--json") == 0; });
  std::string path;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "--json") {
        continue;
      } else if (arg == "--help" || arg == "-h") {
        std::cout << kInspectUsage;
        return 0;
      } else if (arg.rfind("--", 0) == 0 || !path.empty()) {
        throw volt::ConfigError("unexpected argument '" + volt::printable(arg) + "'. " + std::string(kInspectUsage));
      } else {
        path = arg;
      }
    }
    if (path.empty()) throw volt::ConfigError(std::string("volt inspect needs a FILE. ") + kInspectUsage);
    // Before anything opens it: a FIFO would block the reader, a device never end.
    if (const std::string problem = volt::input_file_problem(path); !problem.empty()) {
      throw volt::CheckpointError("'" + volt::printable(path) + "' " + problem +
                                  "; volt inspect reads one checkpoint or .safetensors file.");
    }
    if (has_suffix(path, ".safetensors") || looks_like_safetensors(path)) {
      inspect_safetensors(path, json);
    } else {
      // The format from the contents (integrity checked); a Volt checkpoint is then read as resume reads it.
      const auto file = volt::checkpoint_io::read_weights_file(path);
      if (file.format == volt::checkpoint_io::FileFormat::kVoltCheckpoint) {
        inspect_checkpoint(path, json);
      } else {
        inspect_weights_file(path, file, json);
      }
    }
    return 0;
  } catch (const std::exception& e) {
    // LibTorch's own errors (c10::Error) reach here from a damaged archive too.
    const auto* volt_error = dynamic_cast<const volt::Error*>(&e);
    const char* kind = volt_error ? error_kind(*volt_error) : "CheckpointError";
    if (json) {
      std::cout << dump({{"error", e.what()}, {"kind", kind}}) << "\n";
    } else {
      std::cerr << "volt inspect: " << e.what() << "\n";
    }
    return 2;
  }
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
    if (cmd == "inspect") return cmd_inspect(argc - 1, argv + 1);
    if (cmd == "launch") return cmd_launch(argc - 1, argv + 1);
    if (cmd == "flags") return cmd_flags(argc - 1, argv + 1);
    if (cmd == "new" || cmd == "ui" || cmd == "plot") {
      std::cerr << "volt-core: run `volt " << cmd << "` (the front end runs it without LibTorch).\n";
      return 2;
    }
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
