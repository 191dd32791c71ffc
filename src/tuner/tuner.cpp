#include "volt/tuner/tuner.h"

#include <cmath>
#include <cstdio>
#include <iostream>

#include "tuner/detail/module_snapshot.h"
#include "volt/callbacks/batch_size_finder.h"
#include "volt/callbacks/learning_rate_finder.h"
#include "volt/core/error.h"

namespace volt::tuner {
namespace {

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

bool is_rank_zero(Trainer& trainer) {
  return trainer.strategy().global_rank() == 0;
}

/// Spawned workers keep what a fit recorded in their callbacks: the parent would get nothing back. A
/// process that starts its own ranks (ddp's subprocess launcher) would start them again for every
/// short fit, while the ranks started first run the program, tuner included, from the top.
void refuse_launchers(Trainer& trainer, const char* what) {
  const auto& plan = trainer.plan();
  if (plan.launcher == "spawn") {
    throw NotSupportedError(std::string(what) + " with strategy=" + plan.strategy +
                            ": its short fits would run in spawned worker processes, and what they record stays "
                            "there. Start every rank with volt launch (or torchrun, srun, mpirun) and "
                            "strategy=ddp, or tune on one device.");
  }
  if (plan.launcher == "subprocess") {
    throw NotSupportedError(std::string(what) + " with strategy=" + plan.strategy +
                            " in a process that starts its own ranks: every short fit of the tuner would start "
                            "them again. Start every rank with volt launch --nproc-per-node " +
                            std::to_string(plan.world_size) + " (or torchrun, srun, mpirun), or tune on one device.");
  }
}

/// Lightning's is_oom_error: the messages of CUDA's and the CPU allocator's out-of-memory errors.
bool is_out_of_memory(const std::exception& e) {
  const std::string what = e.what();
  return what.find("CUDA out of memory") != std::string::npos ||
         what.find("CUDA error: out of memory") != std::string::npos ||
         what.find("CUDNN_STATUS_NOT_SUPPORTED") != std::string::npos ||
         what.find("DefaultCPUAllocator: can't allocate memory") != std::string::npos ||
         what.find("DefaultCPUAllocator: not enough memory") != std::string::npos;
}

}  // namespace

TrainerOptions Tuner::trial_options(int64_t max_steps) const {
  TrainerOptions o = trainer_.options();
  o.max_steps = max_steps;
  o.max_epochs = -1;
  o.min_steps = 0;
  o.min_epochs = 0;
  // Validation does not change what a sweep or trial measures: skip it.
  o.limit_val_batches = BatchLimit::count(0);
  o.num_sanity_val_steps = 0;
  o.enable_checkpointing = false;
  o.async_checkpoint = false;
  o.logger = false;
  o.enable_progress_bar = false;
  o.enable_model_summary = false;
  o.profiler.clear();
  o.tuner_lr_find = false;
  o.tuner_scale_batch_size.clear();
  return o;
}

LRFinderResult Tuner::lr_find(Module& module, data::DataModule& datamodule, const LRFindOptions& options) {
  return run_lr_find(module, options, [&](Trainer& sweep) { sweep.fit(module, datamodule); });
}

LRFinderResult Tuner::lr_find(Module& module, std::shared_ptr<data::DataLoader> train, const LRFindOptions& options) {
  if (!train) throw ConfigError("lr_find was given no train loader (nullptr). Give the loader fit would train on.");
  return run_lr_find(module, options, [&](Trainer& sweep) { sweep.fit(module, train); });
}

namespace {

/// update_attr's key: attr_name, or the first of lr, learning_rate that the hyperparameters hold.
std::string lr_attr_name(const Module& module, const std::string& attr_name) {
  const auto& hp = module.hparams();
  if (!attr_name.empty()) {
    if (hp.count(attr_name) == 0) {
      throw ConfigError("lr_find(update_attr=true, attr_name=\"" + attr_name + "\"): the hyperparameters of " +
                        module.name() + " have no \"" + attr_name +
                        "\". Record it with save_hyperparameters and read it in configure_optimizers.");
    }
    return attr_name;
  }
  for (const char* name : {"lr", "learning_rate"}) {
    if (hp.count(name) != 0) return name;
  }
  throw ConfigError("lr_find(update_attr=true): the hyperparameters of " + module.name() +
                    " hold neither \"lr\" nor \"learning_rate\", so the suggestion has nowhere to go. Call "
                    "save_hyperparameters({{\"lr\", ...}}) in the constructor and read hparams().at(\"lr\") in "
                    "configure_optimizers, or name the key with attr_name.");
}

}  // namespace

LRFinderResult Tuner::run_lr_find(Module& module, const LRFindOptions& options,
                                  const std::function<void(Trainer&)>& fit) {
  callbacks::LearningRateFinderOptions sweep;
  sweep.min_lr = options.min_lr;
  sweep.max_lr = options.max_lr;
  sweep.num_training_steps = options.num_training;
  sweep.mode = callbacks::parse_lr_finder_mode(options.mode, "lr_find mode");
  sweep.early_stop_threshold = options.early_stop_threshold;
  callbacks::check_lr_finder_options(sweep);
  const std::string attr = options.update_attr ? lr_attr_name(module, options.attr_name) : std::string();
  refuse_launchers(trainer_, "lr_find");
  if (trainer_.options().fast_dev_run > 0) {
    if (is_rank_zero(trainer_)) std::cerr << "volt: skipping the learning-rate finder: fast_dev_run is on" << std::endl;
    return LRFinderResult(sweep, {}, {}, false);
  }

  auto finder = std::make_shared<callbacks::LearningRateFinder>(sweep);
  detail::ModuleSnapshot snapshot(module);
  try {
    Trainer sweep_trainer(trial_options(sweep.num_training_steps), {finder});
    fit(sweep_trainer);
  } catch (...) {
    snapshot.restore();
    throw;
  }
  snapshot.restore();
  LRFinderResult result(sweep, finder->lrs(), finder->losses(), finder->stopped_early());
  if (options.update_attr) {
    if (const auto lr = result.suggestion()) {
      auto hp = module.hparams();
      hp[attr] = num(*lr);
      module.save_hyperparameters(std::move(hp));
    }
  }
  return result;
}

int64_t Tuner::scale_batch_size(Module& module, data::DataModule& datamodule, const ScaleBatchSizeOptions& o) {
  if (o.mode != "power" && o.mode != "binsearch") {
    throw ConfigError("scale_batch_size mode='" + o.mode + "' is not known. Use power or binsearch.");
  }
  if (o.steps_per_trial < 1) {
    throw ConfigError("scale_batch_size steps_per_trial=" + std::to_string(o.steps_per_trial) +
                      " must be at least 1 (default 3).");
  }
  if (o.init_val < 1) {
    throw ConfigError("scale_batch_size init_val=" + std::to_string(o.init_val) +
                      " is not a batch size. Use 1 or more (default 2).");
  }
  if (o.max_trials < 1) {
    throw ConfigError("scale_batch_size max_trials=" + std::to_string(o.max_trials) +
                      " must be at least 1 (default 25).");
  }
  if (o.batch_arg_name != "batch_size") {
    throw ConfigError("scale_batch_size batch_arg_name=\"" + o.batch_arg_name +
                      "\": Volt changes the batch size through the DataModule's batch_size()/set_batch_size(), "
                      "so only \"batch_size\" is known.");
  }
  if (o.memory_budget_bytes < 0) {
    throw ConfigError("scale_batch_size memory_budget_bytes=" + std::to_string(o.memory_budget_bytes) +
                      " is negative. Give bytes, or 0 to use memory_fraction of the available memory.");
  }
  if (!(o.memory_fraction > 0.0 && o.memory_fraction <= 1.0)) {
    throw ConfigError("scale_batch_size memory_fraction=" + num(o.memory_fraction) +
                      " is not a fraction in (0, 1]. Use e.g. 0.9 (the default).");
  }
  const std::optional<int64_t> original = datamodule.batch_size();
  if (!original) {
    throw ConfigError(
        "scale_batch_size: the DataModule has no batch size to change (batch_size() returns "
        "nullopt). Override batch_size() and set_batch_size(), as MnistDataModule does.");
  }
  refuse_launchers(trainer_, "scale_batch_size");
  if (trainer_.options().fast_dev_run > 0) {
    if (is_rank_zero(trainer_)) std::cerr << "volt: skipping the batch-size finder: fast_dev_run is on" << std::endl;
    return *original;
  }
  int64_t budget = o.memory_budget_bytes;
  if (budget == 0)
    budget = static_cast<int64_t>(o.memory_fraction * static_cast<double>(callbacks::available_system_memory()));

  detail::ModuleSnapshot snapshot(module);
  // One trial: a short fit at `size`; true when it fit (within the budget, no out-of-memory error).
  const auto trial = [&](int64_t size) {
    datamodule.set_batch_size(size);
    auto finder = std::make_shared<callbacks::BatchSizeFinder>(budget);
    bool fits = true;
    try {
      Trainer t(trial_options(o.steps_per_trial), {finder});
      t.fit(module, datamodule);
      fits = !finder->over_budget();
    } catch (const std::exception& e) {
      snapshot.restore();
      if (!is_out_of_memory(e)) {
        datamodule.set_batch_size(*original);
        throw;
      }
      fits = false;
    }
    snapshot.restore();
    if (is_rank_zero(trainer_)) {
      std::cout << "volt: batch size " << size << (fits ? " fits" : " does not fit") << " (" << finder->peak_bytes()
                << " bytes of CPU memory at most, budget " << budget << ")" << std::endl;
    }
    return fits;
  };
  // Lightning stops growing once the batch holds the whole training set.
  const auto whole_set = [&] {
    const auto loader = datamodule.train_dataloader();
    return !loader || loader->num_batches() <= 1;
  };

  int64_t largest = 0;
  int64_t size = o.init_val;
  if (o.mode == "power") {
    bool any_success = false;
    for (int64_t t = 0; t < o.max_trials && size >= 1; ++t) {
      if (trial(size)) {
        largest = std::max(largest, size);
        any_success = true;
        if (whole_set()) break;
        size *= 2;
      } else {
        size /= 2;
        if (any_success) break;
      }
    }
  } else {
    int64_t low = 1, high = 0, count = 0;
    while (size >= 1) {
      if (trial(size)) {
        largest = std::max(largest, size);
        if (++count > o.max_trials) break;
        low = size;
        if (high > 0) {
          if (high - low <= 1) break;
          size = (high + low) / 2;
        } else {
          if (whole_set()) break;
          size *= 2;
        }
      } else {
        high = size;
        size = (high + low) / 2;
        if (high - low <= 1) break;
      }
    }
  }
  if (largest == 0) {
    datamodule.set_batch_size(*original);
    throw Error("scale_batch_size: no batch size fits (init_val=" + std::to_string(o.init_val) + ", CPU budget " +
                std::to_string(budget) +
                " bytes): even the smallest trial ran out of memory. Give a larger memory budget or a smaller model.");
  }
  datamodule.set_batch_size(largest);
  if (is_rank_zero(trainer_)) std::cout << "volt: scale_batch_size chose batch size " << largest << std::endl;
  return largest;
}

std::optional<double> Tuner::tune(Module& module, data::DataModule& datamodule, std::ostream& out) {
  const TrainerOptions& t = trainer_.options();
  if (!t.tuner_scale_batch_size.empty()) {
    ScaleBatchSizeOptions s;
    s.mode = t.tuner_scale_batch_size;
    s.steps_per_trial = t.tuner_batch_size_steps_per_trial;
    s.init_val = t.tuner_batch_size_init_val;
    s.max_trials = t.tuner_batch_size_max_trials;
    s.memory_budget_bytes = t.tuner_batch_size_memory_budget;
    scale_batch_size(module, datamodule, s);
  }
  if (!t.tuner_lr_find) return std::nullopt;
  LRFindOptions l;
  l.min_lr = t.tuner_lr_find_min_lr;
  l.max_lr = t.tuner_lr_find_max_lr;
  l.num_training = t.tuner_lr_find_num_training;
  l.mode = t.tuner_lr_find_mode;
  if (t.tuner_lr_find_early_stop_threshold > 0.0) {
    l.early_stop_threshold = t.tuner_lr_find_early_stop_threshold;
  } else {
    l.early_stop_threshold = std::nullopt;
  }
  l.update_attr = true;
  const LRFinderResult result = lr_find(module, datamodule, l);
  const std::optional<double> lr = result.suggestion();
  if (is_rank_zero(trainer_)) {
    if (lr) {
      out << "volt: lr_find suggests a learning rate of " << num(*lr) << " (" << result.lrs().size() << " steps"
          << (result.stopped_early() ? ", stopped when the loss diverged" : "") << "); it is set for fit" << std::endl;
    } else {
      out << "volt: lr_find made no suggestion; fit keeps the learning rate it has" << std::endl;
    }
  }
  return lr;
}

}  // namespace volt::tuner
