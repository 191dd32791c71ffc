#include "volt/connectors/signal_connector.h"

#include <csignal>
#include <cstring>

#include <atomic>

#include "volt/core/error.h"
#include "volt/strategies/worker_group.h"

namespace volt::connectors {
namespace {

std::atomic<int> g_received{0};

extern "C" void on_signal(int signal) {
  // Ranks this process started (ddp's subprocess launcher) get the signal too, so every
  // rank finishes its step and they agree to stop.
  strategies::WorkerGroup::forward_signal(signal);
  int expected = 0;
  if (!g_received.compare_exchange_strong(expected, signal)) {
    // A second signal while the first is being handled: the default action (terminate).
    std::signal(signal, SIG_DFL);
    std::raise(signal);
  }
}

}  // namespace

SignalConnector::SignalConnector(std::vector<int> signals) : signals_(std::move(signals)) {
  g_received.store(0);
  for (int s : signals_) {
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    auto* old = new struct sigaction();
    if (sigaction(s, &action, old) != 0) {
      delete old;
      old = nullptr;
    }
    previous_.push_back(old);
  }
}

SignalConnector::~SignalConnector() {
  for (size_t i = 0; i < signals_.size(); ++i) {
    if (previous_[i] != nullptr) {
      sigaction(signals_[i], previous_[i], nullptr);
      delete previous_[i];
    }
  }
  g_received.store(0);
}

int SignalConnector::received() const {
  return g_received.load(std::memory_order_relaxed);
}

std::string SignalConnector::name(int signal) {
  switch (signal) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGHUP: return "SIGHUP";
    default: return "signal " + std::to_string(signal);
  }
}

}  // namespace volt::connectors
