#include "volt/core/types.h"

namespace volt {

const char* to_string(TrainerFn fn) {
  switch (fn) {
    case TrainerFn::kNone: return "none";
    case TrainerFn::kFitting: return "fit";
    case TrainerFn::kValidating: return "validate";
    case TrainerFn::kTesting: return "test";
    case TrainerFn::kPredicting: return "predict";
  }
  return "?";
}

const char* to_string(RunningStage stage) {
  switch (stage) {
    case RunningStage::kNone: return "none";
    case RunningStage::kTraining: return "train";
    case RunningStage::kSanityChecking: return "sanity_check";
    case RunningStage::kValidating: return "validate";
    case RunningStage::kTesting: return "test";
    case RunningStage::kPredicting: return "predict";
  }
  return "?";
}

const char* to_string(Stage stage) {
  switch (stage) {
    case Stage::kFit: return "fit";
    case Stage::kValidate: return "validate";
    case Stage::kTest: return "test";
    case Stage::kPredict: return "predict";
  }
  return "?";
}

}  // namespace volt
