#include "volt/connectors/checkpoint_connector.h"

#include <sstream>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <c10/util/irange.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

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
  auto& meta = ckpt.meta;
  meta["format_version"] = kCheckpointFormatVersion;
  meta["volt_version"] = VOLT_VERSION_STRING;
  meta["torch_version"] = compat::torch_version();
  meta["epoch"] = parts.state.current_epoch;
  meta["global_step"] = parts.state.global_step;
  meta["weights_only"] = weights_only;
  meta["hyper_parameters"] = parts.module.hparams();
  meta["metrics"] = parts.view.callback_metrics();
  if (!weights_only) {
    for (size_t i = 0; i < parts.optimizers.size(); ++i) {
      ckpt.blobs[optimizer_key(i)] = strategy_.save_optimizer_state(*parts.optimizers[i]);
    }
    auto scheds = nlohmann::json::array();
    for (const auto& cfg : parts.lr_schedulers) {
      scheds.push_back({{"last_epoch", cfg.scheduler ? cfg.scheduler->last_epoch() : 0}});
    }
    meta["lr_schedulers"] = scheds;
    meta["precision"] = {{"name", strategy_.precision().name()}, {"state", strategy_.precision().state_dict()}};
    meta["loops"] = {{"epoch", parts.state.current_epoch},
                     {"global_step", parts.state.global_step},
                     {"batches_done", parts.state.batches_done},
                     {"batches_seen", parts.state.batches_seen},
                     {"num_training_batches", parts.state.num_training_batches}};
    auto cb_state = nlohmann::json::object();
    for (const auto& cb : parts.callbacks) {
      auto s = cb->state_dict();
      if (!s.empty()) cb_state[cb->state_key()] = std::move(s);
    }
    meta["callbacks"] = cb_state;
    meta["logger_version"] = logger_version;
    {
      auto gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      ckpt.tensors[kCpuRngKey] = gen.get_state();
    }
    dump_cuda_rng(ckpt);
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
  const nlohmann::json version =
      ckpt.meta.is_object() ? ckpt.meta.value("format_version", nlohmann::json(-1)) : nlohmann::json(-1);
  if (version != kCheckpointFormatVersion) {
    throw CheckpointError("checkpoint '" + path + "' has format version " + version.dump() +
                          "; this Volt (" VOLT_VERSION_STRING ") reads version " +
                          std::to_string(kCheckpointFormatVersion) + ".");
  }
  validate_progress(ckpt, path);
  return ckpt;
}

void CheckpointConnector::validate_progress(const Checkpoint& checkpoint, const std::string& path) {
  std::vector<std::string> problems;
  const auto& meta = checkpoint.meta;
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
  const bool weights_only = meta.is_object() && meta.value("weights_only", nlohmann::json(false)) == true;
  if (meta.contains("loops") || !weights_only) {
    const nlohmann::json& loops = meta.contains("loops") ? meta.at("loops") : nlohmann::json();
    if (!loops.is_object()) {
      problems.push_back(std::string("loops is ") + (loops.is_null() ? "missing" : "not an object"));
    } else {
      for (const char* key : {"epoch", "global_step", "batches_done", "batches_seen", "num_training_batches"}) {
        counter(loops, key, std::string("loops.") + key, true);
      }
    }
  }
  if (meta.contains("lr_schedulers")) {
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
  if (meta.value("weights_only", false)) {
    throw CheckpointError("checkpoint '" + path +
                          "' holds only weights (save_weights_only); it cannot resume training. Load it with "
                          "validate/test/predict, or resume from a full checkpoint.");
  }
  for (size_t i = 0; i < parts.optimizers.size(); ++i) {
    auto it = checkpoint.blobs.find(optimizer_key(i));
    if (it == checkpoint.blobs.end()) {
      throw CheckpointError("checkpoint '" + path + "' has no state for optimizer " + std::to_string(i) + " of " +
                            std::to_string(parts.optimizers.size()) +
                            "; configure_optimizers returns a different set than when it was written.");
    }
    strategy_.load_optimizer_state(*parts.optimizers[i], it->second);
  }
  const auto scheds = meta.value("lr_schedulers", nlohmann::json::array());
  for (size_t i = 0; i < parts.lr_schedulers.size() && i < scheds.size(); ++i) {
    if (parts.lr_schedulers[i].scheduler) {
      parts.lr_schedulers[i].scheduler->set_last_epoch(scheds[i].value("last_epoch", int64_t{0}));
    }
  }
  if (meta.contains("precision"))
    strategy_.precision().load_state_dict(meta["precision"].value("state", nlohmann::json::object()));
  const auto loops = meta.value("loops", nlohmann::json::object());
  parts.state.current_epoch = loops.value("epoch", int64_t{0});
  parts.state.global_step = loops.value("global_step", int64_t{0});
  parts.state.batches_done = loops.value("batches_done", int64_t{0});
  parts.state.batches_seen = loops.value("batches_seen", int64_t{0});
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
