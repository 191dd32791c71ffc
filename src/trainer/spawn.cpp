// The spawn launcher's Trainer side (ddp_spawn; the xla strategy later): the parent hands its
// state to N workers through a private folder, they run the stage as one DDP job, rank 0
// hands the result back through the same folder, and the parent takes it over.
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <ATen/core/ivalue.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include "trainer/detail/trainer_impl.h"
#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/strategies/worker_group.h"

namespace volt {
namespace {

namespace fs = std::filesystem;

constexpr const char* kStartFile = "start.ckpt";
constexpr const char* kResultFile = "result.ckpt";
constexpr const char* kPredictionsFile = "predictions.pt";

/// A folder only this user can read, removed when the guard goes.
class PrivateDir {
 public:
  PrivateDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/volt-spawn-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw Error("ddp_spawn could not create its hand-over folder " + pattern + " (" + std::strerror(errno) +
                  "). Set TMPDIR to a writable folder.");
    }
    path_ = pattern;
  }
  ~PrivateDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string spawn_dir() {
  const char* d = std::getenv("VOLT_SPAWN_DIR");
  return d != nullptr ? d : "";
}

MetricMap metrics_of(const Checkpoint& ckpt) {
  MetricMap out;
  const auto it = ckpt.meta.find("metrics");
  if (it == ckpt.meta.end() || !it->is_object()) return out;
  for (const auto& [k, v] : it->items()) {
    if (v.is_number()) out[k] = v.get<double>();
  }
  return out;
}

}  // namespace

void Trainer::run_spawned(Stage stage, Module& module, MetricMap* out_metrics,
                          std::vector<at::Tensor>* out_predictions) {
  auto& impl = *impl_;
  auto& strategy = *impl.strategy_;
  const int64_t call = Impl::next_spawn_call();
  PrivateDir dir;
  impl.module_ = &module;
  // What the workers start from: for a fit that continues an earlier one, everything
  // (weights, optimizers, progress, callbacks); otherwise the module's weights.
  const bool full = stage == Stage::kFit && impl.configured_module_ == &module;
  const Checkpoint start = impl.checkpoint_connector_.dump(impl.parts(), !full, impl.logger_connector_.version());
  strategy.checkpoint_io().save_checkpoint(start, dir.path() + "/" + kStartFile);

  strategies::run_spawn_workers(strategy.cluster_environment(), impl.accelerator_connector_.plan().num_processes,
                                {{"VOLT_SPAWN_DIR", dir.path()}, {"VOLT_SPAWN_CALL", std::to_string(call)}});

  if (stage == Stage::kPredict) {
    const std::string path = dir.path() + "/" + kPredictionsFile;
    std::ifstream in(path, std::ios::binary);
    if (!in) throw DistributedError("ddp_spawn: the workers finished but left no predictions (" + path + ").");
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto list = torch::jit::pickle_load(bytes).toTensorList();
    out_predictions->clear();
    for (const at::Tensor& t : list) out_predictions->push_back(t);
    return;
  }
  const std::string path = dir.path() + "/" + kResultFile;
  const Checkpoint result = strategy.checkpoint_io().load_checkpoint(path);
  const MetricMap metrics = metrics_of(result);
  if (stage == Stage::kFit) {
    configure_optimizers_once(module);
    module.on_load_checkpoint(result);
    connectors::CheckpointConnector::restore_module(module, result, path);
    impl.checkpoint_connector_.restore_training_state(impl.parts(), result, path);
  }
  impl.logger_connector_.set_callback_metrics(metrics);
  if (out_metrics != nullptr) *out_metrics = metrics;
}

bool Trainer::spawn_worker_runs_this_call() {
  const int64_t call = Impl::next_spawn_call();
  const char* target = std::getenv("VOLT_SPAWN_CALL");
  return target != nullptr && std::to_string(call) == target;
}

void Trainer::spawn_worker_restore_start(Module& module, bool full) {
  auto& impl = *impl_;
  const std::string path = spawn_dir() + "/" + kStartFile;
  const Checkpoint start = impl.strategy_->checkpoint_io().load_checkpoint(path);
  connectors::CheckpointConnector::restore_module(module, start, path);
  if (full && !start.meta.value("weights_only", false)) {
    impl.checkpoint_connector_.restore_training_state(impl.parts(), start, path);
  }
}

void Trainer::spawn_worker_finish(Stage stage, const MetricMap* metrics, const std::vector<at::Tensor>* predictions) {
  auto& impl = *impl_;
  auto& strategy = *impl.strategy_;
  const std::string dir = spawn_dir();
  int code = 0;
  try {
    if (stage == Stage::kPredict) {
      if (strategy.is_global_zero()) {
        c10::List<at::Tensor> list;
        for (const auto& t : *predictions) list.push_back(t.cpu());
        const std::vector<char> bytes = torch::jit::pickle_save(list);
        checkpoint_io::atomic_write(dir + "/" + kPredictionsFile, bytes.data(), bytes.size());
      }
    } else {
      if (metrics != nullptr) impl.logger_connector_.set_callback_metrics(*metrics);
      // Rank 0 writes; every rank takes part (the strategy decides who writes).
      impl.checkpoint_connector_.save(impl.parts(), dir + "/" + kResultFile, /*weights_only=*/stage != Stage::kFit,
                                      impl.logger_connector_.version());
    }
    strategy.barrier("spawn_handback");
  } catch (const std::exception& e) {
    std::cerr << "volt: spawned rank " << strategy.global_rank() << " could not hand its result back: " << e.what()
              << std::endl;
    code = 1;
  }
  // The worker existed for this one stage call: the rest of the program is the parent's.
  std::fflush(nullptr);
  ::_exit(code);
}

}  // namespace volt
