#include "volt/connectors/checkpoint_connector.h"

#include <sstream>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <c10/util/irange.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <iostream>

#include "volt/checkpoint_io/lightning_layout.h"
#include "volt/checkpoint_io/optimizer_state.h"
#include "volt/checkpoint_io/state_dict.h"
#include "volt/core/compat.h"
#include "volt/core/error.h"
#include "volt/core/error_boundary.h"
#include "volt/core/file_check.h"
#include "volt/core/version.h"

namespace volt::connectors {
namespace {

const std::string kStateDictPrefix = "state_dict.";
const std::string kCpuRngKey = "rng.cpu";

const std::string kCudaRngPrefix = "rng.cuda.";

/// One generator state per visible GPU ("rng.cuda.<index>"); nothing on a CPU-only build
/// or machine. at::Context's generator lookup works the same in LibTorch 1.13 and 2.x.
void dump_cuda_rng(Checkpoint& ckpt) {
  if (!at::hasCUDA()) return;
  const auto n = static_cast<c10::DeviceIndex>(at::getNumGPUs());
  for (c10::DeviceIndex i = 0; i < n; ++i) {
    auto gen = at::globalContext().defaultGenerator(c10::Device(c10::DeviceType::CUDA, i));
    std::lock_guard<std::mutex> lock(gen.mutex());
    ckpt.tensors[kCudaRngPrefix + std::to_string(i)] = gen.get_state();
  }
}

/// Restores the states of the GPUs this process sees; states of GPUs it does not see (a
/// CPU resume of a GPU run, fewer GPUs) are left out: those generators do not exist here.
void restore_cuda_rng(const Checkpoint& ckpt) {
  if (!at::hasCUDA()) return;
  const auto n = static_cast<int64_t>(at::getNumGPUs());
  for (const auto& [key, state] : ckpt.tensors) {
    if (key.compare(0, kCudaRngPrefix.size(), kCudaRngPrefix) != 0) continue;
    const int64_t index = std::stoll(key.substr(kCudaRngPrefix.size()));
    if (index < 0 || index >= n) continue;
    auto gen =
        at::globalContext().defaultGenerator(c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(index)));
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(state);
  }
}

std::string optimizer_key(size_t i) {
  return "optimizer." + std::to_string(i);
}

}  // namespace

Checkpoint CheckpointConnector::dump(const CheckpointParts& parts, bool weights_only,
                                     const std::string& logger_version) const {
  Checkpoint ckpt;
  for (const auto& [name, tensor] : checkpoint_io::module_state_dict(parts.module)) {
    ckpt.tensors[kStateDictPrefix + name] = tensor;
  }
  // Lightning 2.x's dictionary (docs/checkpoints.md); what only Volt needs goes under "volt".
  auto& meta = ckpt.meta;
  const checkpoint_io::LoopProgress progress{parts.state.current_epoch, parts.state.global_step,
                                             parts.state.batches_done, parts.state.batches_seen,
                                             parts.state.num_training_batches};
  meta["epoch"] = parts.state.current_epoch;
  meta["global_step"] = parts.state.global_step;
  meta["pytorch-lightning_version"] = checkpoint_io::kLightningLayoutVersion;
  meta["volt_version"] = VOLT_VERSION_STRING;
  meta["hyper_parameters"] = parts.module.hparams();
  nlohmann::json volt = {{"format_version", kCheckpointFormatVersion},
                         {"torch_version", compat::torch_version()},
                         {"weights_only", weights_only},
                         {"metrics", parts.view.callback_metrics()}};
  int64_t scheduler_steps = 0;
  for (const auto& cfg : parts.lr_schedulers) {
    if (cfg.scheduler) scheduler_steps += cfg.scheduler->last_epoch();
  }
  meta["loops"] = checkpoint_io::lightning_loops(progress, scheduler_steps);
  if (!weights_only) {
    for (size_t i = 0; i < parts.optimizers.size(); ++i) {
      if (!checkpoint_io::dump_pytorch_optimizer_state(*parts.optimizers[i], i, ckpt)) {
        // An optimizer PyTorch's layout does not cover: its LibTorch archive, and the groups' rates.
        ckpt.blobs[optimizer_key(i)] = strategy_.save_optimizer_state(*parts.optimizers[i]);
        nlohmann::json groups = nlohmann::json::array();
        int64_t p = 0;
        for (const auto& group : parts.optimizers[i]->param_groups()) {
          nlohmann::json params = nlohmann::json::array();
          for (size_t k = 0; k < group.params().size(); ++k) params.push_back(p++);
          groups.push_back({{"lr", group.options().get_lr()}, {"params", params}});
        }
        auto& list = meta["optimizer_states"];
        if (!list.is_array()) list = nlohmann::json::array();
        while (list.size() <= i) list.push_back(nullptr);
        list[i] = {{"state", nlohmann::json::object()}, {"param_groups", groups}};
      }
    }
    if (!meta.contains("optimizer_states")) meta["optimizer_states"] = nlohmann::json::array();
    auto scheds = nlohmann::json::array();
    for (const auto& cfg : parts.lr_schedulers) {
      // What PyTorch's scheduler of the same name holds (torch.optim.lr_scheduler's class loads it).
      if (cfg.scheduler) {
        scheds.push_back(checkpoint_io::pytorch_scheduler_state(*cfg.scheduler));
      } else {
        scheds.push_back(
            {{"last_epoch", 0}, {"_step_count", 1}, {"verbose", false}, {"_get_lr_called_within_step", false}});
      }
    }
    meta["lr_schedulers"] = scheds;
    const auto precision_state = strategy_.precision().state_dict();
    volt["precision"] = strategy_.precision().name();
    if (precision_state.is_object() && !precision_state.empty()) {
      meta[checkpoint_io::lightning_precision_key(strategy_.precision().name())] = precision_state;
    }
    volt["loops"] = checkpoint_io::progress_json(progress);
    // A train loader without a length: how far each worker's stream got (Volt's own key; Lightning
    // ignores "volt"). Under ddp "ranks" holds every rank's position, each rank resuming from its
    // own; "examples" and "next_worker" are the writing rank's (docs/data.md).
    if (!parts.state.stream_examples.empty()) {
      volt["stream"] = {{"examples", parts.state.stream_examples}, {"next_worker", parts.state.stream_next_worker}};
      if (!parts.state.stream_rank_examples.empty()) {
        auto ranks = nlohmann::json::array();
        for (size_t r = 0; r < parts.state.stream_rank_examples.size(); ++r) {
          ranks.push_back({{"examples", parts.state.stream_rank_examples[r]},
                           {"next_worker", parts.state.stream_rank_next_worker[r]}});
        }
        volt["stream"]["ranks"] = std::move(ranks);
      }
    }
    auto cb_state = nlohmann::json::object();
    for (const auto& cb : parts.callbacks) {
      auto s = cb->state_dict();
      if (!s.empty()) cb_state[cb->state_key()] = std::move(s);
    }
    meta["callbacks"] = cb_state;
    volt["logger_version"] = logger_version;
    {
      auto gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      ckpt.tensors[kCpuRngKey] = gen.get_state();
    }
    dump_cuda_rng(ckpt);
  }
  meta["volt"] = volt;
  if (!weights_only) {
    for (const auto& cb : parts.callbacks) cb->on_save_checkpoint(parts.view, ckpt);
  }
  const_cast<Module&>(parts.module).on_save_checkpoint(ckpt);
  return ckpt;
}

void CheckpointConnector::save(const CheckpointParts& parts, const std::string& path, bool weights_only,
                               const std::string& logger_version) const {
  strategy_.save_checkpoint(dump(parts, weights_only, logger_version), path);
}

Checkpoint CheckpointConnector::load(const std::string& path) const {
  Checkpoint ckpt = strategy_.load_checkpoint(path);
  // Read as JSON: a damaged file may hold a string or nothing there.
  const nlohmann::json& volt = volt_section(ckpt);
  const nlohmann::json version =
      volt.is_object() ? volt.value("format_version", nlohmann::json(-1)) : nlohmann::json(-1);
  if (version != kCheckpointFormatVersion) {
    throw CheckpointError("checkpoint '" + path + "' has format version " + version.dump() +
                          "; this Volt (" VOLT_VERSION_STRING ") reads version " +
                          std::to_string(kCheckpointFormatVersion) + " (and converts version 1).");
  }
  validate_progress(ckpt, path);
  if (volt.contains("converted_from_format") && strategy_.is_global_zero()) {
    std::cerr << "[volt] note: checkpoint " << quote_path(path) << " is in Volt's format "
              << volt["converted_from_format"].dump()
              << " (tensors/blobs/meta); it was converted on read, and checkpoints saved from now on use Lightning's "
                 "layout.\n";
  }
  return ckpt;
}

const nlohmann::json& CheckpointConnector::volt_section(const Checkpoint& checkpoint) {
  static const nlohmann::json kNone;
  const auto& meta = checkpoint.meta;
  if (!meta.is_object() || !meta.contains("volt")) return kNone;
  return meta.at("volt");
}

void CheckpointConnector::validate_progress(const Checkpoint& checkpoint, const std::string& path) {
  std::vector<std::string> problems;
  const auto& meta = checkpoint.meta;
  const auto& volt = volt_section(checkpoint);
  auto counter = [&](const nlohmann::json& where, const char* key, const std::string& label, bool required) {
    if (!where.is_object() || !where.contains(key)) {
      if (required) problems.push_back(label + " is missing");
      return;
    }
    const auto& v = where.at(key);
    if (!v.is_number_integer()) {
      problems.push_back(label + " is " + v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                         ", not a whole number");
    } else if (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0) {
      problems.push_back(label + " is " + v.dump() + ", below 0");
    }
  };
  counter(meta, "epoch", "epoch", true);
  counter(meta, "global_step", "global_step", true);
  if (volt.is_object() && volt.contains("weights_only") && !volt.at("weights_only").is_boolean()) {
    problems.push_back("volt.weights_only is " + volt.at("weights_only").dump() + ", not true or false");
  }
  const bool weights_only = volt.is_object() && volt.value("weights_only", nlohmann::json(false)) == true;
  if ((volt.is_object() && volt.contains("loops")) || !weights_only) {
    const nlohmann::json& loops = volt.is_object() && volt.contains("loops") ? volt.at("loops") : nlohmann::json();
    if (!loops.is_object()) {
      problems.push_back(std::string("volt.loops is ") + (loops.is_null() ? "missing" : "not an object"));
    } else {
      for (const char* key : {"epoch", "global_step", "batches_done", "batches_seen", "num_training_batches"}) {
        counter(loops, key, std::string("volt.loops.") + key, true);
      }
    }
  }
  if (volt.is_object() && volt.contains("stream")) {
    // One position: "examples" (a count per loader worker) and "next_worker", at `where`.
    auto check_position = [&](const nlohmann::json& position, const std::string& where) {
      if (!position.is_object() || !position.contains("examples") || !position.at("examples").is_array() ||
          position.at("examples").empty()) {
        problems.push_back(where + " needs \"examples\", a list with one count per loader worker");
        return;
      }
      const auto& examples = position.at("examples");
      for (size_t i = 0; i < examples.size(); ++i) {
        const auto& v = examples[i];
        if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0)) {
          problems.push_back(where + ".examples[" + std::to_string(i) + "] is " +
                             v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                             ", not a count of at least 0");
        }
      }
      const auto next = position.value("next_worker", nlohmann::json(0));
      if (!next.is_number_integer() || next.get<int64_t>() < 0 ||
          next.get<int64_t>() >= static_cast<int64_t>(examples.size())) {
        problems.push_back(where + ".next_worker is " +
                           next.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + ", not one of the " +
                           std::to_string(examples.size()) + " workers counted");
      }
    };
    const auto& stream = volt.at("stream");
    check_position(stream, "volt.stream");
    if (stream.is_object() && stream.contains("ranks")) {
      const auto& ranks = stream.at("ranks");
      if (!ranks.is_array() || ranks.empty()) {
        problems.push_back("volt.stream.ranks is not a list with one position per rank");
      } else {
        for (size_t r = 0; r < ranks.size(); ++r) {
          check_position(ranks[r], "volt.stream.ranks[" + std::to_string(r) + "]");
          if (ranks[r].is_object() && ranks[r].contains("examples") && stream.contains("examples") &&
              ranks[r].at("examples").size() != stream.at("examples").size()) {
            problems.push_back("volt.stream.ranks[" + std::to_string(r) + "] counts " +
                               std::to_string(ranks[r].at("examples").size()) + " workers, volt.stream " +
                               std::to_string(stream.at("examples").size()));
          }
        }
      }
    }
  }
  if (meta.is_object() && meta.contains("lr_schedulers")) {
    const auto& scheds = meta.at("lr_schedulers");
    if (!scheds.is_array()) {
      problems.push_back("lr_schedulers is not a list");
    } else {
      for (size_t i = 0; i < scheds.size(); ++i) {
        counter(scheds[i], "last_epoch", "lr_schedulers[" + std::to_string(i) + "].last_epoch", true);
      }
    }
  }
  if (problems.empty()) return;
  std::string msg = "checkpoint " + quote_path(path) + " has malformed metadata:";
  for (size_t i = 0; i < problems.size(); ++i) msg += (i ? "; " : " ") + problems[i];
  throw CheckpointError(msg +
                        ". Progress counters are whole numbers of at least 0; the file is damaged or was edited. "
                        "Resume from another checkpoint.");
}

void CheckpointConnector::restore_module(Module& module, const Checkpoint& checkpoint, const std::string& path) {
  checkpoint_io::load_state_dict_strict(module, checkpoint.state_dict(), "checkpoint '" + path + "'", "checkpoint",
                                        /*dtypes_must_match=*/true);
}

// A function-try-block: metadata of the wrong JSON type (a damaged or hand-edited file) is the file's error.
void CheckpointConnector::restore_training_state(const CheckpointParts& parts, const Checkpoint& checkpoint,
                                                 const std::string& path) const try {
  const auto& meta = checkpoint.meta;
  const auto& volt = volt_section(checkpoint);
  if (volt.value("weights_only", false)) {
    throw CheckpointError("checkpoint '" + path +
                          "' holds only weights (save_weights_only); it cannot resume training. Load it with "
                          "validate/test/predict, or resume from a full checkpoint.");
  }
  // Every optimizer is checked and built before the first is changed: a refused resume changes nothing.
  for (size_t i = 0; i < parts.optimizers.size(); ++i) {
    if (checkpoint.blobs.count(optimizer_key(i)) == 0 && !checkpoint_io::has_pytorch_optimizer_state(checkpoint, i)) {
      throw CheckpointError("checkpoint '" + path + "' has no state for optimizer " + std::to_string(i) + " of " +
                            std::to_string(parts.optimizers.size()) +
                            "; configure_optimizers returns a different set than when it was written.");
    }
  }
  for (size_t i = 0; i < parts.optimizers.size(); ++i) {
    auto it = checkpoint.blobs.find(optimizer_key(i));
    if (it != checkpoint.blobs.end()) {
      strategy_.load_optimizer_state(*parts.optimizers[i], it->second);
    } else {
      checkpoint_io::load_pytorch_optimizer_state(*parts.optimizers[i], i, checkpoint, path);
    }
  }
  const auto scheds = meta.value("lr_schedulers", nlohmann::json::array());
  for (size_t i = 0; i < parts.lr_schedulers.size() && i < scheds.size(); ++i) {
    if (parts.lr_schedulers[i].scheduler) {
      parts.lr_schedulers[i].scheduler->set_last_epoch(scheds[i].value("last_epoch", int64_t{0}));
    }
  }
  const std::string precision_key = checkpoint_io::lightning_precision_key(strategy_.precision().name());
  if (meta.contains(precision_key)) strategy_.precision().load_state_dict(meta[precision_key]);
  const auto loops = volt.value("loops", nlohmann::json::object());
  parts.state.current_epoch = loops.value("epoch", int64_t{0});
  parts.state.global_step = loops.value("global_step", int64_t{0});
  parts.state.batches_done = loops.value("batches_done", int64_t{0});
  parts.state.batches_seen = loops.value("batches_seen", int64_t{0});
  parts.state.stream_examples.clear();
  parts.state.stream_next_worker = 0;
  parts.state.stream_rank_examples.clear();
  parts.state.stream_rank_next_worker.clear();
  if (volt.contains("stream")) {  // checked when the file was read (validate_progress)
    const auto& stream = volt.at("stream");
    for (const auto& count : stream.at("examples")) parts.state.stream_examples.push_back(count.get<int64_t>());
    parts.state.stream_next_worker = stream.value("next_worker", int64_t{0});
    if (stream.contains("ranks")) {
      for (const auto& position : stream.at("ranks")) {
        parts.state.stream_rank_examples.push_back(position.at("examples").get<std::vector<int64_t>>());
        parts.state.stream_rank_next_worker.push_back(position.value("next_worker", int64_t{0}));
      }
    }
  }
  parts.state.restarting = true;
  // A checkpoint taken after an epoch's last batch resumes at the start of the next epoch.
  if (parts.state.batches_done > 0 && parts.state.batches_done >= loops.value("num_training_batches", int64_t{-1})) {
    parts.state.current_epoch += 1;
    parts.state.batches_done = 0;
  }
  const auto cb_state = meta.value("callbacks", nlohmann::json::object());
  for (const auto& cb : parts.callbacks) {
    auto it = cb_state.find(cb->state_key());
    if (it != cb_state.end()) cb->load_state_dict(*it);
    cb->on_load_checkpoint(parts.view, checkpoint);
  }
  auto rng = checkpoint.tensors.find(kCpuRngKey);
  if (rng != checkpoint.tensors.end()) {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(rng->second);
  }
  restore_cuda_rng(checkpoint);
} catch (const nlohmann::json::exception& e) {
  throw CheckpointError("checkpoint '" + path +
                        "' has malformed metadata, so training cannot resume from it: " + e.what());
} catch (const c10::Error&) {
  // LibTorch's first line only (never its internal-assertion text), through the one error boundary.
  rethrow_as_volt_error("checkpoint " + quote_path(path) +
                            " holds training state (optimizer or RNG) that LibTorch cannot restore; was it written "
                            "for another model or optimizer?",
                        ErrorKind::kCheckpoint);
}

}  // namespace volt::connectors
