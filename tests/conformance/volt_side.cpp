// The Volt side of the conformance harness: runs every configuration of configs.json
// through volt::Trainer in this one process, each in its own folder, and writes one result
// JSON per configuration, in the schema lightning_side.py writes (README.md).
//
//   volt_conformance CONFIGS WORKDIR OUTDIR [NAME ...]
//
// The module, the data and the defaults mirror lightning_side.py and conformance_common.py.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/mse_loss.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/scalar_tensor.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "volt/callbacks/early_stopping.h"
#include "volt/callbacks/lr_monitor.h"
#include "volt/callbacks/model_checkpoint.h"
#include "volt/core/error.h"
#include "volt/core/lr_scheduler.h"
#include "volt/data/dataloader.h"
#include "volt/data/dataset.h"
#include "volt/trainer/trainer.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int64_t kFeatures = 4;  // conformance_common.FEATURES

/// A configuration the harness itself cannot read (not a refusal by Volt).
class HarnessError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A schedule entry: a number or "nan", "inf", "-inf" (conformance_common.to_float).
double to_double(const json& v, const std::string& where) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const auto s = v.get<std::string>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
  }
  throw HarnessError(where + ": " + v.dump() + " is neither a number nor one of \"nan\", \"inf\", \"-inf\"");
}

/// The index-th entry, the last one repeated past the end.
double schedule_value(const std::vector<double>& schedule, size_t index) {
  return schedule[std::min(index, schedule.size() - 1)];
}

json with_defaults(const json& given, const json& defaults) {
  json out = defaults;
  if (given.is_object()) {
    for (auto it = given.begin(); it != given.end(); ++it) out[it.key()] = it.value();
  }
  return out;
}

struct ModelConfig {
  double lr = 0.1;
  std::vector<double> val_schedule;
  double sanity_value = 64.0;
  std::vector<double> train_schedule;
  bool log_train_epoch = false;
  json scheduler;  // null or {"type": "StepLR", ...}
};

ModelConfig model_config(const json& cfg) {
  const json defaults = {{"lr", 0.1},
                         {"val_schedule", {1.0, 0.875, 0.75, 0.625, 0.5, 0.375, 0.25, 0.125}},
                         {"sanity_value", 64.0},
                         {"train_schedule", json::array()},
                         {"log_train_epoch", false},
                         {"scheduler", nullptr}};
  const json m = with_defaults(cfg.value("model", json::object()), defaults);
  ModelConfig out;
  out.lr = m.at("lr").get<double>();
  for (const auto& v : m.at("val_schedule")) out.val_schedule.push_back(to_double(v, "model.val_schedule"));
  if (out.val_schedule.empty()) throw HarnessError("model.val_schedule must not be empty");
  out.sanity_value = to_double(m.at("sanity_value"), "model.sanity_value");
  for (const auto& v : m.at("train_schedule")) out.train_schedule.push_back(to_double(v, "model.train_schedule"));
  out.log_train_epoch = m.at("log_train_epoch").get<bool>();
  out.scheduler = m.at("scheduler");
  return out;
}

/// A Linear(4, 1) regression whose logged validation metric follows a fixed schedule
/// (lightning_side.ConformanceModule).
class ConformanceModule : public volt::Module {
 public:
  explicit ConformanceModule(ModelConfig cfg) : cfg_(std::move(cfg)) {
    layer_ = register_module("layer", torch::nn::Linear(kFeatures, 1));
  }

  std::map<int64_t, int64_t> train_batches;  // epoch -> training_step calls
  int64_t sanity_batches = 0;
  json val_runs = json::array();  // [epoch, batches into the epoch, global_step, val batches]

  void on_train_epoch_start() override { batches_this_epoch_ = 0; }

  at::Tensor training_step(volt::Batch& batch, volt::StepContext& ctx) override {
    at::Tensor loss = at::mse_loss(layer_->forward(batch[0]), batch[1]);
    const int64_t epoch = ctx.current_epoch();
    ++train_batches[epoch];
    ++batches_this_epoch_;
    volt::LogOptions step_opts;
    step_opts.on_step = true;
    step_opts.on_epoch = cfg_.log_train_epoch;
    ctx.log("train_loss", loss, step_opts);
    if (!cfg_.train_schedule.empty()) {
      volt::LogOptions epoch_opts;
      epoch_opts.on_step = false;
      epoch_opts.on_epoch = true;
      ctx.log("train_metric", scalar(schedule_value(cfg_.train_schedule, static_cast<size_t>(epoch))), epoch_opts);
    }
    return loss;
  }

  void validation_step(volt::Batch& batch, volt::StepContext& ctx) override {
    layer_->forward(batch[0]);
    double value = 0;
    if (ctx.stage() == volt::RunningStage::kSanityChecking) {
      ++sanity_batches;
      value = cfg_.sanity_value;
    } else {
      if (ctx.batch_idx() == 0) {
        val_runs.push_back({ctx.current_epoch(), batches_this_epoch_, ctx.global_step(), 0});
      }
      auto& run = val_runs.back();
      run[3] = run[3].get<int64_t>() + 1;
      value = schedule_value(cfg_.val_schedule, val_runs.size() - 1);
    }
    volt::LogOptions opts;
    opts.on_step = false;
    opts.on_epoch = true;
    ctx.log("val_loss", scalar(value), opts);
  }

  volt::OptimizerConfig configure_optimizers() override {
    auto opt = std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(cfg_.lr));
    const json& s = cfg_.scheduler;
    if (s.is_null()) return opt;
    if (s.value("type", "") != "StepLR") {
      throw HarnessError("scheduler type " + s.value("type", "") + " is not one the harness knows (StepLR)");
    }
    volt::LRSchedulerConfig conf;
    conf.scheduler =
        std::make_shared<volt::StepLR>(*opt, s.at("step_size").get<int64_t>(), s.at("gamma").get<double>());
    const std::string interval = s.value("interval", "epoch");
    if (interval != "epoch" && interval != "step") throw HarnessError("scheduler interval " + interval);
    conf.interval = interval == "step" ? volt::Interval::kStep : volt::Interval::kEpoch;
    conf.frequency = s.value("frequency", 1);
    conf.name = s.value("name", "");
    return volt::OptimizerConfig(opt, conf);
  }

 private:
  // Logged as float32, as torch.tensor(value) is on the Lightning side.
  static at::Tensor scalar(double v) { return at::scalar_tensor(v, at::TensorOptions().dtype(at::kFloat)); }

  ModelConfig cfg_;
  torch::nn::Linear layer_{nullptr};
  int64_t batches_this_epoch_ = 0;
};

std::shared_ptr<volt::data::DataLoader> make_loader(int64_t n, int64_t batch, uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  at::Tensor x = at::randn({n, kFeatures}, gen);
  at::Tensor y = at::randn({n, 1}, gen);
  volt::data::DataLoaderOptions o;
  o.batch_size = batch;
  return std::make_shared<volt::data::DataLoader>(
      std::make_shared<volt::data::TensorDataset>(std::vector<at::Tensor>{x, y}), o);
}

volt::BatchLimit batch_limit(const json& v, const std::string& flag) {
  if (v.is_number_integer()) return volt::BatchLimit::count(v.get<int64_t>());
  if (v.is_number_float()) return volt::BatchLimit::fraction(v.get<double>());
  throw HarnessError("trainer." + flag + ": " + v.dump() + " is neither an int nor a float");
}

/// Lightning-named flags onto TrainerOptions; the fixed ones match lightning_side.run_one.
volt::TrainerOptions trainer_options(const json& flags, const std::string& root) {
  volt::TrainerOptions o;
  o.accelerator = "cpu";
  o.devices = "1";
  o.num_threads = 1;
  o.enable_progress_bar = false;
  o.enable_model_summary = false;
  o.default_root_dir = root;
  for (auto it = flags.begin(); it != flags.end(); ++it) {
    const std::string& k = it.key();
    const json& v = it.value();
    if (k == "max_epochs") {
      o.max_epochs = v.is_null() ? -1 : v.get<int64_t>();
    } else if (k == "min_epochs") {
      o.min_epochs = v.get<int64_t>();
    } else if (k == "max_steps") {
      o.max_steps = v.get<int64_t>();
    } else if (k == "min_steps") {
      o.min_steps = v.get<int64_t>();
    } else if (k == "limit_train_batches") {
      o.limit_train_batches = batch_limit(v, k);
    } else if (k == "limit_val_batches") {
      o.limit_val_batches = batch_limit(v, k);
    } else if (k == "val_check_interval") {
      o.val_check_interval = batch_limit(v, k);
    } else if (k == "check_val_every_n_epoch") {
      o.check_val_every_n_epoch = v.is_null() ? std::nullopt : std::optional<int64_t>(v.get<int64_t>());
    } else if (k == "num_sanity_val_steps") {
      o.num_sanity_val_steps = v.get<int64_t>();
    } else if (k == "log_every_n_steps") {
      o.log_every_n_steps = v.get<int64_t>();
    } else if (k == "fast_dev_run") {
      o.fast_dev_run = v.is_boolean() ? (v.get<bool>() ? 1 : 0) : v.get<int64_t>();
    } else if (k == "accumulate_grad_batches") {
      o.accumulate_grad_batches = v.get<int64_t>();
    } else if (k == "enable_checkpointing") {
      o.enable_checkpointing = v.get<bool>();
    } else if (k == "logger") {
      o.logger = v.get<bool>();
    } else {
      throw HarnessError("unknown trainer flag '" + k + "'");
    }
  }
  return o;
}

std::shared_ptr<volt::callbacks::Callback> make_callback(const json& c) {
  const std::string type = c.at("type").get<std::string>();
  if (type == "ModelCheckpoint") {
    volt::callbacks::ModelCheckpoint::Options o;
    for (auto it = c.begin(); it != c.end(); ++it) {
      const std::string& k = it.key();
      const json& v = it.value();
      if (k == "type") continue;
      if (k == "filename") {
        o.filename = v.is_null() ? "{epoch}-{step}" : v.get<std::string>();
      } else if (k == "monitor") {
        o.monitor = v.is_null() ? "" : v.get<std::string>();
      } else if (k == "mode") {
        o.mode = v.get<std::string>();
      } else if (k == "save_top_k") {
        o.save_top_k = v.get<int64_t>();
      } else if (k == "save_last") {
        o.save_last = v.get<bool>();
      } else if (k == "every_n_train_steps") {
        o.every_n_train_steps = v.is_null() ? 0 : v.get<int64_t>();
      } else if (k == "every_n_epochs") {
        o.every_n_epochs = v.is_null() ? std::nullopt : std::optional<int64_t>(v.get<int64_t>());
      } else if (k == "save_on_train_epoch_end") {
        o.save_on_train_epoch_end = v.is_null() ? std::nullopt : std::optional<bool>(v.get<bool>());
      } else if (k == "auto_insert_metric_name") {
        o.auto_insert_metric_name = v.get<bool>();
      } else if (k == "dirpath") {
        o.dirpath = v.get<std::string>();
      } else {
        throw HarnessError("unknown ModelCheckpoint argument '" + k + "'");
      }
    }
    return std::make_shared<volt::callbacks::ModelCheckpoint>(o);
  }
  if (type == "EarlyStopping") {
    volt::callbacks::EarlyStopping::Options o;
    for (auto it = c.begin(); it != c.end(); ++it) {
      const std::string& k = it.key();
      const json& v = it.value();
      if (k == "type") continue;
      if (k == "monitor") {
        o.monitor = v.get<std::string>();
      } else if (k == "min_delta") {
        o.min_delta = to_double(v, "EarlyStopping.min_delta");
      } else if (k == "patience") {
        o.patience = v.get<int64_t>();
      } else if (k == "mode") {
        o.mode = v.get<std::string>();
      } else if (k == "strict") {
        o.strict = v.get<bool>();
      } else if (k == "check_finite") {
        o.check_finite = v.get<bool>();
      } else if (k == "stopping_threshold") {
        if (!v.is_null()) o.stopping_threshold = to_double(v, k);
      } else if (k == "divergence_threshold") {
        if (!v.is_null()) o.divergence_threshold = to_double(v, k);
      } else if (k == "check_on_train_epoch_end") {
        o.check_on_train_epoch_end = v.is_null() ? std::nullopt : std::optional<bool>(v.get<bool>());
      } else {
        throw HarnessError("unknown EarlyStopping argument '" + k + "'");
      }
    }
    return std::make_shared<volt::callbacks::EarlyStopping>(o);
  }
  if (type == "LearningRateMonitor") {
    std::optional<volt::Interval> interval;
    bool momentum = false;
    for (auto it = c.begin(); it != c.end(); ++it) {
      const std::string& k = it.key();
      const json& v = it.value();
      if (k == "type") continue;
      if (k == "logging_interval") {
        if (v.is_null()) continue;
        const auto s = v.get<std::string>();
        if (s == "step") {
          interval = volt::Interval::kStep;
        } else if (s == "epoch") {
          interval = volt::Interval::kEpoch;
        } else {
          // Volt's constructor takes an enum: other values cannot be expressed on this side.
          throw HarnessError("LearningRateMonitor logging_interval '" + s + "' (the harness knows step, epoch, null)");
        }
      } else if (k == "log_momentum") {
        momentum = v.get<bool>();
      } else {
        throw HarnessError("unknown LearningRateMonitor argument '" + k + "'");
      }
    }
    return std::make_shared<volt::callbacks::LearningRateMonitor>(interval, momentum);
  }
  throw HarnessError("unknown callback type '" + type + "'");
}

std::string relative_or_empty(const std::string& path, const std::string& root) {
  if (path.empty()) return "";
  return fs::absolute(path).lexically_normal().lexically_relative(fs::absolute(root).lexically_normal()).string();
}

/// The kind of a refusal: a volt::Error subclass by name, else what it is.
std::string error_kind(const std::exception& e) {
  if (dynamic_cast<const volt::ConfigError*>(&e)) return "volt::ConfigError";
  if (dynamic_cast<const volt::NotSupportedError*>(&e)) return "volt::NotSupportedError";
  if (dynamic_cast<const volt::CheckpointError*>(&e)) return "volt::CheckpointError";
  if (dynamic_cast<const volt::DataError*>(&e)) return "volt::DataError";
  if (dynamic_cast<const volt::DistributedError*>(&e)) return "volt::DistributedError";
  if (dynamic_cast<const volt::Error*>(&e)) return "volt::Error";
  return "not a volt::Error";
}

json empty_result(const std::string& name) {
  return {{"name", name},
          {"accepted", true},
          {"error", ""},
          {"train_batches_per_epoch", json::array()},
          {"global_step", nullptr},
          {"current_epoch", nullptr},
          {"should_stop", nullptr},
          {"sanity_batches", 0},
          {"val_runs", json::array()},
          {"early_stopping", nullptr},
          {"best_model_paths", json::array()}};
}

json run_one(const json& cfg, const std::string& root) {
  json result = empty_result(cfg.at("name").get<std::string>());
  const json data = with_defaults(cfg.value("data", json::object()), {{"train", 40}, {"val", 16}, {"batch", 4}});
  // Reading the configuration: a failure here is the harness's, not a refusal.
  ModelConfig model_cfg = model_config(cfg);
  const volt::TrainerOptions options = trainer_options(cfg.value("trainer", json::object()), root);
  const std::string ckpt_path =
      cfg.contains("ckpt_path") && !cfg["ckpt_path"].is_null() ? cfg["ckpt_path"].get<std::string>() : std::string();
  auto module = std::make_unique<ConformanceModule>(model_cfg);
  std::unique_ptr<volt::Trainer> trainer;
  try {
    std::vector<std::shared_ptr<volt::callbacks::Callback>> callbacks;
    for (const auto& c : cfg.value("callbacks", json::array())) callbacks.push_back(make_callback(c));
    trainer = std::make_unique<volt::Trainer>(options, callbacks);
    const int64_t batch = data.at("batch").get<int64_t>();
    auto train = make_loader(data.at("train").get<int64_t>(), batch, 1);
    const int64_t n_val = data.at("val").get<int64_t>();
    auto val = n_val > 0 ? make_loader(n_val, batch, 2) : nullptr;
    trainer->fit(*module, train, val, ckpt_path);
  } catch (const HarnessError&) {
    throw;
  } catch (const std::exception& e) {
    result["accepted"] = false;
    std::string what = e.what();
    what = what.substr(0, what.find('\n')).substr(0, 300);
    result["error"] = error_kind(e) + ": " + what;
    result["error_kind"] = error_kind(e);
  }
  json per_epoch = json::array();
  if (!module->train_batches.empty()) {
    for (int64_t e = 0; e <= module->train_batches.rbegin()->first; ++e) {
      auto it = module->train_batches.find(e);
      per_epoch.push_back(it == module->train_batches.end() ? 0 : it->second);
    }
  }
  result["train_batches_per_epoch"] = per_epoch;
  result["sanity_batches"] = module->sanity_batches;
  result["val_runs"] = module->val_runs;
  if (trainer) {
    result["global_step"] = trainer->global_step();
    result["current_epoch"] = trainer->current_epoch();
    result["should_stop"] = trainer->should_stop();
    json best = json::array();
    for (const auto& cb : trainer->callbacks()) {
      if (auto es = std::dynamic_pointer_cast<volt::callbacks::EarlyStopping>(cb)) {
        result["early_stopping"] = {{"stopped_epoch", es->stopped_epoch()}, {"wait_count", es->wait_count()}};
      }
      auto mc = std::dynamic_pointer_cast<volt::callbacks::ModelCheckpoint>(cb);
      if (mc && !mc->best_model_path().empty()) best.push_back(relative_or_empty(mc->best_model_path(), root));
    }
    result["best_model_paths"] = best;
  }
  return result;
}

void write_json_atomic(const std::string& path, const json& value) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << value.dump(1) << "\n";
    out.flush();
    if (!out) throw std::runtime_error("cannot write " + tmp);
  }
  fs::rename(tmp, path);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: " << argv[0] << " CONFIGS WORKDIR OUTDIR [NAME ...]\n";
    return 2;
  }
  const std::string configs_path = argv[1], workdir = argv[2], outdir = argv[3];
  const std::set<std::string> only(argv + 4, argv + argc);
  json configs;
  {
    std::ifstream in(configs_path);
    if (!in) {
      std::cerr << "volt_conformance: cannot open " << configs_path << "\n";
      return 2;
    }
    try {
      in >> configs;
    } catch (const json::exception& e) {
      std::cerr << "volt_conformance: " << configs_path << " is not valid JSON: " << e.what() << "\n";
      return 2;
    }
  }
  fs::create_directories(outdir);
  const auto start = std::chrono::steady_clock::now();
  int count = 0;
  int harness_errors = 0;
  for (const auto& cfg : configs) {
    const std::string name = cfg.at("name").get<std::string>();
    if (!only.empty() && !only.count(name)) continue;
    const std::string root = (fs::path(workdir) / name).string();
    fs::remove_all(root);
    fs::create_directories(root);
    json result;
    try {
      result = run_one(cfg, root);
    } catch (const std::exception& e) {  // HarnessError or a JSON type error: the harness's fault
      std::cerr << "volt_conformance: " << name << ": harness error: " << e.what() << "\n";
      result = empty_result(name);
      result["harness_error"] = e.what();
      ++harness_errors;
    }
    write_json_atomic((fs::path(outdir) / (name + ".json")).string(), result);
    ++count;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("volt: %d configurations in %.1f s (%d harness errors)\n", count, secs, harness_errors);
  return harness_errors == 0 ? 0 : 1;
}
