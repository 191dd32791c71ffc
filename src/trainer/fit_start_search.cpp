#include "trainer/detail/fit_start_search.h"

#include <iostream>
#include <optional>
#include <vector>

#include "callbacks/detail/module_snapshot.h"
#include "volt/callbacks/fit_start_search.h"
#include "volt/core/error.h"
#include "volt/strategies/strategy.h"

namespace volt::detail {
namespace {

/// As Tuner's refusal: spawned workers keep what a trial records, and a process that starts its own
/// ranks would start them again for every trial.
void refuse_launchers(const Trainer& trainer, const std::string& what) {
  const auto& plan = trainer.plan();
  if (plan.launcher == "spawn") {
    throw NotSupportedError(what + " with strategy=" + plan.strategy +
                            ": its short fits would run in spawned worker processes, and what they record stays "
                            "there. Start every rank with volt launch (or torchrun, srun, mpirun) and "
                            "strategy=ddp, or remove the callback.");
  }
  if (plan.launcher == "subprocess") {
    throw NotSupportedError(what + " with strategy=" + plan.strategy +
                            " in a process that starts its own ranks: every short fit of the search would start "
                            "them again. Start every rank with volt launch --nproc-per-node " +
                            std::to_string(plan.world_size) + " (or torchrun, srun, mpirun), or remove the callback.");
  }
}

}  // namespace

void run_fit_start_searches(Trainer& trainer, Module& module, data::DataModule* datamodule,
                            const std::shared_ptr<data::DataLoader>& train, const std::string& ckpt_path) {
  std::vector<std::pair<callbacks::FitStartSearch*, std::string>> searches;
  for (const auto& cb : trainer.callbacks()) {
    if (auto* search = dynamic_cast<callbacks::FitStartSearch*>(cb.get()))
      searches.emplace_back(search, cb->state_key());
  }
  if (searches.empty()) return;
  for (const auto& [search, name] : searches) {
    (void)search;
    refuse_launchers(trainer, name);
    if (!ckpt_path.empty()) {
      throw ConfigError(name + " with ckpt_path=\"" + ckpt_path +
                        "\": the search would run on the module before the checkpoint is loaded. Fit without "
                        "the callback to resume, or search with volt::Tuner on the loaded module first.");
    }
  }
  if (trainer.options().fast_dev_run > 0) {
    if (trainer.strategy().global_rank() == 0) {
      std::cerr << "volt: skipping the finder callbacks' search: fast_dev_run is on" << std::endl;
    }
    return;
  }
  for (const auto& [search, name] : searches) {
    const std::optional<int64_t> original = datamodule ? datamodule->batch_size() : std::nullopt;
    search->begin_search(module, original);
    callbacks::detail::ModuleSnapshot snapshot(module);
    try {
      while (const std::optional<callbacks::SearchTrial> trial = search->next_trial()) {
        if (trial->batch_size) datamodule->set_batch_size(*trial->batch_size);
        callbacks::SearchTrialOutcome outcome;
        try {
          Trainer short_fit(callbacks::search_trial_options(trainer.options(), trial->max_steps), {trial->callback});
          if (datamodule) {
            short_fit.fit(module, *datamodule);
          } else {
            short_fit.fit(module, train);
          }
        } catch (const std::exception& e) {
          // Out of memory is what a batch-size trial measures; anything else is the fit's failure.
          if (!trial->batch_size || !callbacks::is_out_of_memory(e)) throw;
          outcome.out_of_memory = true;
        }
        snapshot.restore();
        if (trial->batch_size && !outcome.out_of_memory) {
          const auto loader = datamodule->train_dataloader();
          outcome.whole_training_set = !loader || (loader->has_length() && loader->num_batches() <= 1);
        }
        search->end_trial(outcome);
      }
      search->end_search(module);
    } catch (...) {
      snapshot.restore();
      if (datamodule && original) datamodule->set_batch_size(*original);
      throw;
    }
    if (const std::optional<int64_t> size = search->chosen_batch_size()) {
      datamodule->set_batch_size(*size);
      if (trainer.strategy().global_rank() == 0) {
        std::cout << "volt: " << name << " chose batch size " << *size << std::endl;
      }
    } else if (datamodule && original) {
      datamodule->set_batch_size(*original);
    }
  }
}

}  // namespace volt::detail
