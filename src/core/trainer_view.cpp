#include "volt/core/trainer_view.h"

#include "volt/core/error.h"

namespace volt {

void TrainerView::save_weights_safetensors(const std::string& path) {
  throw NotSupportedError("this TrainerView cannot write '" + path +
                          "': saving .safetensors weights needs the Trainer's view (run the callback under a Trainer).");
}

}  // namespace volt
