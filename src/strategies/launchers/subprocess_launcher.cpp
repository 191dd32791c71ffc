#include "volt/strategies/launchers/subprocess_launcher.h"

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <thread>

#include <unistd.h>

#include "volt/core/error.h"
#include "volt/strategies/launchers/worker_group.h"

namespace volt::strategies::launchers {

namespace {

/// How long this rank may stay in its stage after another local rank failed before the
/// monitor ends the process (see launch()).
constexpr auto kStuckGrace = std::chrono::seconds(5);

std::string line(std::string text) {
  if (text.empty() || text.back() != '\n') text += '\n';
  return text;
}

}  // namespace

struct SubprocessLauncher::State {
  std::shared_ptr<environments::ClusterEnvironment> environment;
  int64_t local_world_size = 1;
  std::unique_ptr<WorkerGroup> workers;
  /// Set by the monitor thread when a local rank failed (the others are stopped by then).
  std::atomic<bool> rank_failed{false};
  mutable std::mutex report_mutex;
  std::string rank_report;
  /// A stage failed on this rank: the others are stopped, not waited for.
  bool stage_failed = false;
  /// This rank is inside a stage (launch() runs it).
  std::atomic<bool> in_stage{false};
  /// This rank took notice of the failed rank (raised its report, or its stage failed).
  std::atomic<bool> failure_handled{false};
};

SubprocessLauncher::SubprocessLauncher(std::shared_ptr<environments::ClusterEnvironment> environment,
                                       int64_t local_world_size)
    : state_(std::make_unique<State>()) {
  if (!environment) throw ConfigError("the subprocess launcher needs a cluster environment; it was given none.");
  state_->environment = std::move(environment);
  state_->local_world_size = local_world_size;
}

SubprocessLauncher::~SubprocessLauncher() {
  try {
    if (!state_->workers) return;
    if (state_->stage_failed) {
      state_->workers->stop_all();
    } else if (auto failure = state_->workers->wait()) {
      // The monitor usually reports first; this covers a failure after it stopped.
      std::cerr << "volt: " << line(failure->describe()) << std::flush;
    }
    state_->workers.reset();
  } catch (...) {
    // A destructor must not throw; the job's ranks are gone either way.
  }
}

void SubprocessLauncher::launch(LaunchedStage& stage) {
  if (!state_->workers) {
    const auto& env = *state_->environment;
    const std::vector<std::string> args = this_program_argv();
    state_->workers = std::make_unique<WorkerGroup>();
    for (int64_t local = 1; local < state_->local_world_size; ++local) {
      const WorkerSpec spec = torchrun_worker(args, env.node_rank(), local, state_->local_world_size, env.world_size(),
                                              env.main_address(), env.main_port(), name());
      state_->workers->start(spec);
    }
    // Rank 0 trains in this process; a failed rank must not leave it waiting in a
    // collective until the timeout. The monitor keeps the report and stops the other
    // ranks; their sockets close, so rank 0's pending collective fails at once, and the
    // strategy's next step or collective raises the report (raise_if_a_rank_failed).
    // One wait cannot be cut short that way: inside c10d's set-up of the process group
    // (Gloo connecting to a peer that died after the rendezvous) rank 0 waits for a
    // connection that never comes, up to process_group_timeout_s. So when this rank has
    // not taken notice kStuckGrace after the report, the monitor ends the process, as
    // Lightning's child-process observer ends its main process, rather than leave it behind.
    State* state = state_.get();
    state_->workers->monitor([state](const WorkerExit& e) {
      {
        std::lock_guard<std::mutex> lock(state->report_mutex);
        state->rank_report = e.describe();
      }
      state->rank_failed.store(true);
      std::cerr << "\nvolt: " << line(e.describe()) << "volt: stopping the job (the other ranks were stopped).\n"
                << std::flush;
      const auto deadline = std::chrono::steady_clock::now() + kStuckGrace;
      while (state->in_stage.load() && !state->failure_handled.load() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (state->in_stage.load() && !state->failure_handled.load()) {
        std::cerr << "volt: rank 0 (pid " << ::getpid() << ") on host " << WorkerGroup::host_name()
                  << " is still inside its stage " << kStuckGrace.count()
                  << " s after that failure (blocked in a wait that cannot be interrupted, such as c10d's set-up "
                     "of the process group waiting for the dead rank); ending it with exit code 1 so that no "
                     "process of the job is left behind.\n"
                  << std::flush;
        std::_Exit(1);
      }
    });
  }
  struct InStage {
    std::atomic<bool>& flag;
    explicit InStage(std::atomic<bool>& f) : flag(f) { flag.store(true); }
    ~InStage() { flag.store(false); }
  } in_stage(state_->in_stage);
  stage.run("");
}

void SubprocessLauncher::kill(int signal) {
  if (state_->workers) state_->workers->stop_all(signal);
}

bool SubprocessLauncher::started() const {
  return state_->workers != nullptr;
}

bool SubprocessLauncher::rank_failed() const {
  return state_->rank_failed.load(std::memory_order_relaxed);
}

void SubprocessLauncher::raise_if_a_rank_failed() const {
  if (!rank_failed()) return;
  std::string report;
  {
    std::lock_guard<std::mutex> lock(state_->report_mutex);
    report = state_->rank_report;
  }
  while (!report.empty() && report.back() == '\n') report.pop_back();
  state_->failure_handled.store(true);
  throw DistributedError("a rank of this job failed, so the job was stopped: " + report);
}

bool SubprocessLauncher::wait_for_failure(std::chrono::milliseconds wait) const {
  if (!state_->workers) return false;
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (!rank_failed() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return rank_failed();
}

void SubprocessLauncher::on_stage_failure() {
  state_->stage_failed = true;
  state_->failure_handled.store(true);
  if (!state_->workers) return;
  if (!rank_failed()) {
    // This rank's error is often the echo of another rank's death: name that one too.
    if (auto f = state_->workers->failure(std::chrono::seconds(1)))
      std::cerr << "\nvolt: " << line(f->describe()) << std::flush;
  }
  kill(SIGTERM);
}

}  // namespace volt::strategies::launchers
