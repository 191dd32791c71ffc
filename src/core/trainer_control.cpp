#include "volt/core/trainer_control.h"

#include "volt/core/error.h"

namespace volt {

TrainerControl& TrainerControl::of(TrainerView& view, const std::string& who) {
  if (auto* control = dynamic_cast<TrainerControl*>(&view)) return *control;
  throw NotSupportedError(who +
                          " changes the training routine (LR schedulers, a pass over the training data), which only "
                          "a Trainer's view can do; run it as a callback of a volt::Trainer.");
}

}  // namespace volt
