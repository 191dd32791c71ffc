#pragma once
// The searches a fit's finder callbacks ask for (callbacks::FitStartSearch), run by the Trainer at
// the start of fit, before its first hook (src/trainer/fit_start_search.cpp).
#include <memory>
#include <string>

#include "volt/core/module.h"
#include "volt/data/dataloader.h"
#include "volt/data/datamodule.h"
#include "volt/trainer/trainer.h"

namespace volt::detail {

/// Runs, one after the other, the search of every callback of `trainer` that is a
/// callbacks::FitStartSearch: each trial a short fit of a Trainer of its own with the trial's callback
/// only, the module's parameters, buffers, gradients, train/eval mode and random generators put back
/// after each. Then the search writes its result; a batch size it chose is set on `datamodule`
/// (nullptr: the fit was given `train`). A failing search leaves the module and the batch size as
/// they were and throws. fast_dev_run: skipped (a warning on rank 0).
void run_fit_start_searches(Trainer& trainer, Module& module, data::DataModule* datamodule,
                            const std::shared_ptr<data::DataLoader>& train, const std::string& ckpt_path);

}  // namespace volt::detail
