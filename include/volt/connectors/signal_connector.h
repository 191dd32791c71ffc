#pragma once
#include <csignal>
#include <string>
#include <vector>

namespace volt::connectors {

/// Catches termination signals (SIGTERM, SIGINT) for a fit so that the training loop can
/// finish the current step, save a checkpoint and stop, instead of dying mid-write. A
/// second signal of the same kind is not caught: it terminates as usual. The previous
/// handlers come back when the connector is destroyed.
class SignalConnector {
 public:
  explicit SignalConnector(std::vector<int> signals);
  ~SignalConnector();
  SignalConnector(const SignalConnector&) = delete;
  SignalConnector& operator=(const SignalConnector&) = delete;

  /// The first signal received since construction, or 0.
  int received() const;
  /// "SIGTERM", "SIGINT", ... for messages.
  static std::string name(int signal);

 private:
  std::vector<int> signals_;
  std::vector<struct sigaction*> previous_;
};

}  // namespace volt::connectors
