#include "volt/tuner/tuner.h"

#include <cmath>
#include <cstdio>
#include <iostream>

#include "callbacks/detail/module_snapshot.h"
#include "volt/callbacks/batch_size_finder.h"
#include "volt/callbacks/fit_start_search.h"
#include "volt/callbacks/learning_rate_finder.h"
#include "volt/core/error.h"
#include "volt/core/printable.h"

namespace volt::tuner {
namespace {

std::string num(double v) { return exact_number_text(v); }

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

}  // namespace

TrainerOptions Tuner::trial_options(int64_t max_steps) const {
  return callbacks::search_trial_options(trainer_.options(), max_steps);
}

LRFinderResult Tuner::lr_find(Module& module, data::DataModule& datamodule, const LRFindOptions& options) {
  return run_lr_find(module, options, [&](Trainer& sweep) { sweep.fit(module, datamodule); });
}

LRFinderResult Tuner::lr_find(Module& module, std::shared_ptr<data::DataLoader> train, const LRFindOptions& options) {
  if (!train) throw ConfigError("lr_find was given no train loader (nullptr). Give the loader fit would train on.");
  return run_lr_find(module, options, [&](Trainer& sweep) { sweep.fit(module, train); });
}

LRFinderResult Tuner::run_lr_find(Module& module, const LRFindOptions& options,
                                  const std::function<void(Trainer&)>& fit) {
  callbacks::LearningRateFinderOptions sweep;
  sweep.min_lr = options.min_lr;
  sweep.max_lr = options.max_lr;
  sweep.num_training_steps = options.num_training;
  sweep.mode = callbacks::parse_lr_finder_mode(options.mode, "lr_find mode");
  sweep.early_stop_threshold = options.early_stop_threshold;
  callbacks::check_lr_finder_options(sweep);
  const std::string attr =
      options.update_attr ? callbacks::lr_attr_name(module, options.attr_name, "lr_find") : std::string();
  refuse_launchers(trainer_, "lr_find");
  if (trainer_.options().fast_dev_run > 0) {
    if (is_rank_zero(trainer_)) std::cerr << "volt: skipping the learning-rate finder: fast_dev_run is on" << std::endl;
    return LRFinderResult(sweep, {}, {}, false);
  }

  auto finder = std::make_shared<callbacks::LearningRateSweep>(sweep);
  callbacks::detail::ModuleSnapshot snapshot(module);
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
  callbacks::BatchSizeFinderOptions search_options;
  search_options.mode = o.mode;
  search_options.steps_per_trial = o.steps_per_trial;
  search_options.init_val = o.init_val;
  search_options.max_trials = o.max_trials;
  search_options.memory_budget_bytes = o.memory_budget_bytes;
  search_options.memory_fraction = o.memory_fraction;
  callbacks::check_batch_size_finder_options(search_options, "scale_batch_size");
  if (o.batch_arg_name != "batch_size") {
    throw ConfigError("scale_batch_size batch_arg_name=\"" + o.batch_arg_name +
                      "\": Volt changes the batch size through the DataModule's batch_size()/set_batch_size(), "
                      "so only \"batch_size\" is known.");
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
  const int64_t budget = callbacks::batch_size_budget(search_options);

  callbacks::detail::ModuleSnapshot snapshot(module);
  // One trial: a short fit at `size`; true when it fit (within the budget, no out-of-memory error).
  const auto trial = [&](int64_t size) {
    datamodule.set_batch_size(size);
    auto finder = std::make_shared<callbacks::BatchSizeTrial>(budget);
    bool fits = true;
    try {
      Trainer t(trial_options(o.steps_per_trial), {finder});
      t.fit(module, datamodule);
      fits = !finder->over_budget();
    } catch (const std::exception& e) {
      snapshot.restore();
      if (!callbacks::is_out_of_memory(e)) {
        datamodule.set_batch_size(*original);
        throw;
      }
      fits = false;
    } catch (...) {
      snapshot.restore();
      datamodule.set_batch_size(*original);
      throw;
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
    return !loader || (loader->has_length() && loader->num_batches() <= 1);
  };

  callbacks::BatchSizeSearch search(search_options);
  while (const std::optional<int64_t> size = search.next()) {
    const bool fits = trial(*size);
    search.report(fits, fits && whole_set());
  }
  const int64_t largest = search.largest();
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
