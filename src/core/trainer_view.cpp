#include "volt/core/trainer_view.h"

#include "volt/core/error.h"

namespace volt {

void TrainerView::save_weights_safetensors(const std::string& path) {
  throw NotSupportedError("this TrainerView cannot write '" + path +
                          "': saving .safetensors weights needs the Trainer's view (run the callback under a Trainer).");
}

void TrainerView::save_checkpoint_without_collective(const std::string& path) {
  throw NotSupportedError("this TrainerView cannot write '" + path +
                          "': saving a checkpoint needs the Trainer's view (run the callback under a Trainer).");
}

void TrainerView::set_accumulate_grad_batches(int64_t factor) {
  throw NotSupportedError("this TrainerView cannot set accumulate_grad_batches=" + std::to_string(factor) +
                          ": only the Trainer's view runs a training loop (run the callback under a Trainer).");
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
