#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace at {
class Tensor;
}

namespace volt {

/// What the user asked the Trainer to do (Lightning's TrainerFn).
enum class TrainerFn { kNone, kFitting, kValidating, kTesting, kPredicting };

/// What is running right now (Lightning's RunningStage).
enum class RunningStage { kNone, kTraining, kSanityChecking, kValidating, kTesting, kPredicting };

/// "fit", "validate", "test", "predict" — the argument of Module::setup / DataModule::setup.
enum class Stage { kFit, kValidate, kTest, kPredict };

const char* to_string(TrainerFn fn);
const char* to_string(RunningStage stage);
const char* to_string(Stage stage);

/// Scalar metrics by name, as loggers and callbacks see them.
using MetricMap = std::map<std::string, double>;

/// A batch: the tensors a DataLoader yields (for a classification set: {inputs, targets}).
using Batch = std::vector<at::Tensor>;

/// When an LR scheduler steps.
enum class Interval { kEpoch, kStep };

}  // namespace volt
