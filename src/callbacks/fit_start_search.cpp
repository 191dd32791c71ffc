#include "volt/callbacks/fit_start_search.h"

#include <string>

#include <c10/util/Exception.h>

#include "volt/core/error.h"
#include "volt/core/out_of_memory_error.h"

namespace volt::callbacks {

TrainerOptions search_trial_options(const TrainerOptions& options, int64_t max_steps) {
  TrainerOptions o = options;
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

bool is_out_of_memory(const std::exception& error) {
  if (dynamic_cast<const OutOfMemoryError*>(&error) != nullptr) return true;
  if (dynamic_cast<const c10::OutOfMemoryError*>(&error) != nullptr) return true;
  const std::string what = error.what();
  for (const char* text : {"CUDA out of memory", "CUDA error: out of memory", "CUDNN_STATUS_NOT_SUPPORTED",
                           "DefaultCPUAllocator: can't allocate memory", "DefaultCPUAllocator: not enough memory"}) {
    if (what.find(text) != std::string::npos) return true;
  }
  return false;
}

}  // namespace volt::callbacks
