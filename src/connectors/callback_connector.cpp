#include "volt/connectors/callback_connector.h"

#include <cstdlib>
#include <iostream>
#include <set>

#include "volt/callbacks/early_stopping.h"
#include "volt/callbacks/gradient_accumulation_scheduler.h"
#include "volt/callbacks/model_checkpoint.h"
#include "volt/callbacks/model_summary.h"
#include "volt/callbacks/progress_bar.h"
#include "volt/callbacks/timer.h"
#include "volt/core/duration.h"
#include "volt/core/error.h"

namespace volt::connectors {

CallbackConnector::CallbackConnector(std::vector<std::shared_ptr<callbacks::Callback>> user_callbacks,
                                     const TrainerOptions& options) {
  bool has_progress_bar = false;
  bool has_summary = false;
  bool has_timer = false;
  std::vector<std::shared_ptr<callbacks::Callback>> checkpoints;
  std::set<std::string> keys;
  for (auto& cb : user_callbacks) {
    if (!cb) throw ConfigError("callbacks contains a null pointer; pass constructed callbacks only.");
    if (!keys.insert(cb->state_key()).second) {
      throw ConfigError("two callbacks share the state key " + cb->state_key() +
                        "; their checkpoint state would collide. Give them different settings or keep one.");
    }
    if (dynamic_cast<callbacks::ProgressBar*>(cb.get()) != nullptr) {
      if (!options.enable_progress_bar) {
        throw ConfigError("a ProgressBar callback was passed but enable_progress_bar=false. Remove one of them.");
      }
      has_progress_bar = true;
    }
    if (dynamic_cast<callbacks::ModelSummary*>(cb.get()) != nullptr) has_summary = true;
    if (dynamic_cast<callbacks::Timer*>(cb.get()) != nullptr) has_timer = true;
    if (dynamic_cast<callbacks::GradientAccumulationScheduler*>(cb.get()) != nullptr &&
        options.accumulate_grad_batches != 1) {
      throw ConfigError("accumulate_grad_batches=" + std::to_string(options.accumulate_grad_batches) +
                        " is set and a GradientAccumulationScheduler is passed; the scheduler sets the factor per "
                        "epoch. Remove accumulate_grad_batches (keep 1) or remove the callback.");
    }
    if (dynamic_cast<callbacks::ModelCheckpoint*>(cb.get()) != nullptr) {
      if (!options.enable_checkpointing) {
        throw ConfigError("a ModelCheckpoint callback was passed but enable_checkpointing=false. Remove the "
                          "callback or set enable_checkpointing=true.");
      }
      checkpoints.push_back(cb);
      continue;
    }
    callbacks_.push_back(cb);
  }
  // max_time: a Timer that stops training (Lightning's _configure_timer_callback).
  if (!options.max_time.empty()) {
    if (has_timer) {
      const char* rank = std::getenv("RANK");
      if (rank == nullptr || std::string(rank) == "0") {
        std::cout << "volt: ignoring max_time=" << options.max_time << ", the callbacks already hold a Timer."
                  << std::endl;
      }
    } else {
      callbacks_.push_back(std::make_shared<callbacks::Timer>(parse_duration(options.max_time, "max_time")));
    }
  }
  const bool dev_run = options.fast_dev_run > 0;
  if (options.enable_model_summary && !has_summary && !dev_run) {
    callbacks_.push_back(std::make_shared<callbacks::ModelSummary>());
  }
  if (options.enable_progress_bar && !has_progress_bar) {
    callbacks_.push_back(std::make_shared<callbacks::ProgressBar>());
  }
  if (options.enable_checkpointing && checkpoints.empty() && !dev_run) {
    checkpoints.push_back(std::make_shared<callbacks::ModelCheckpoint>());
  }
  for (auto& cb : checkpoints) callbacks_.push_back(cb);
  for (const auto& cb : callbacks_) {
    monitoring_.push_back(dynamic_cast<callbacks::ModelCheckpoint*>(cb.get()) != nullptr ||
                          dynamic_cast<callbacks::EarlyStopping*>(cb.get()) != nullptr);
  }
}

std::vector<callbacks::ModelCheckpoint*> CallbackConnector::checkpoint_callbacks() const {
  std::vector<callbacks::ModelCheckpoint*> out;
  for (const auto& cb : callbacks_) {
    if (auto* mc = dynamic_cast<callbacks::ModelCheckpoint*>(cb.get())) out.push_back(mc);
  }
  return out;
}

}  // namespace volt::connectors
