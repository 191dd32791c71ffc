#pragma once
#include <memory>
#include <vector>

#include "volt/callbacks/callback.h"
#include "volt/core/trainer_options.h"

namespace volt::callbacks {
class ModelCheckpoint;
}

namespace volt::connectors {

/// Owns the run's callbacks: the user's, plus the defaults the flags ask for (progress
/// bar, model summary, a ModelCheckpoint), checkpoint callbacks last as in Lightning so
/// they see every other callback's metrics. Dispatches hooks in that order.
class CallbackConnector {
 public:
  CallbackConnector(std::vector<std::shared_ptr<callbacks::Callback>> user_callbacks, const TrainerOptions& options);

  /// Calls f(callback) for every callback, in order.
  template <typename F>
  void call(F&& f) const {
    for (const auto& cb : callbacks_) f(*cb);
  }
  /// Calls f for the monitoring callbacks (ModelCheckpoint, EarlyStopping) when
  /// `monitoring`, else for the others; order kept.
  template <typename F>
  void call_monitoring(bool monitoring, F&& f) const {
    for (size_t i = 0; i < callbacks_.size(); ++i) {
      if (monitoring_[i] == monitoring) f(*callbacks_[i]);
    }
  }
  const std::vector<std::shared_ptr<callbacks::Callback>>& callbacks() const { return callbacks_; }
  /// The ModelCheckpoint callbacks, in order (the first is Lightning's checkpoint_callback).
  std::vector<callbacks::ModelCheckpoint*> checkpoint_callbacks() const;

 private:
  std::vector<std::shared_ptr<callbacks::Callback>> callbacks_;
  std::vector<bool> monitoring_;
};

}  // namespace volt::connectors
