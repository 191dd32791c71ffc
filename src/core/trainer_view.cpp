#include "volt/core/trainer_view.h"

#include "volt/core/error.h"

namespace volt {

void TrainerView::save_weights_safetensors(const std::string& path) {
  throw NotSupportedError("this TrainerView cannot write '" + path +
                          "': saving .safetensors weights needs the Trainer's view (run the callback under a Trainer).");
}

void TrainerView::log_text(const std::string& tag, const std::string&, int64_t) {
  throw NotSupportedError("this TrainerView has no loggers to send the text \"" + tag +
                          "\" to; log from a module or callback run by a Trainer.");
}

void TrainerView::log_histogram(const std::string& tag, const at::Tensor&, int64_t) {
  throw NotSupportedError("this TrainerView has no loggers to send the histogram \"" + tag +
                          "\" to; log from a module or callback run by a Trainer.");
}

void TrainerView::log_image(const std::string& tag, const at::Tensor&, int64_t) {
  throw NotSupportedError("this TrainerView has no loggers to send the image \"" + tag +
                          "\" to; log from a module or callback run by a Trainer.");
}

}  // namespace volt
