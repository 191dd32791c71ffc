#pragma once
#include <sys/types.h>

#include <csignal>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace volt::strategies::launchers {

/// One process of a job, as a launcher starts it.
struct WorkerSpec {
  int64_t rank = 0;                            ///< global rank, for reports
  std::vector<std::string> argv;               ///< argv[0] is the program (a path)
  std::map<std::string, std::string> env;      ///< added to (or replacing in) this process's environment
};

/// Rank `node_rank * local_world_size + local_rank` of a job of `world_size` processes with
/// torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,
/// NODE_RANK, MASTER_ADDR, MASTER_PORT) and VOLT_LAUNCHER=`launcher`.
WorkerSpec torchrun_worker(std::vector<std::string> argv, int64_t node_rank, int64_t local_rank,
                           int64_t local_world_size, int64_t world_size, const std::string& master_addr,
                           int master_port, const std::string& launcher);

/// How a worker ended.
struct WorkerExit {
  int64_t rank = 0;
  pid_t pid = 0;
  std::string host;
  int exit_code = 0;   ///< when it exited
  int signal = 0;      ///< when a signal killed it (then exit_code is 128 + signal)
  std::vector<std::string> stderr_tail;  ///< its last lines of stderr
  /// It had said it was done (WorkerGroup::wait's `finished`) and the group ended it: a
  /// success, whatever signal ended it.
  bool ended_by_launcher = false;
  bool failed() const { return !ended_by_launcher && (signal != 0 || exit_code != 0); }
  /// "rank 1 (pid 4242) on host h was killed by SIGKILL; its last lines of stderr: ..."
  std::string describe() const;
};

/// The processes of one job on this host, as a launcher starts them: public because
/// `volt launch` (tools/volt) uses it as well as the library's launchers (SubprocessLauncher,
/// SpawnLauncher, XLALauncher); a user's program has no need of it. Each worker gets its own process group (so
/// stopping it stops whatever it started) and dies with the launcher (PR_SET_PDEATHSIG).
/// Its stderr passes through this process and its last lines are kept for the failure
/// report. A failed worker stops the rest: SIGTERM, then SIGKILL after `grace`.
class WorkerGroup {
 public:
  explicit WorkerGroup(std::chrono::milliseconds grace = std::chrono::seconds(5), size_t tail_lines = 20);
  /// Stops (SIGTERM, grace, SIGKILL) and reaps every worker still running.
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  /// Starts one worker (fork + exec). Throws DistributedError when it cannot start.
  void start(const WorkerSpec& spec);
  /// Blocks until every worker exited successfully (nullopt) or one failed: then the
  /// others are stopped and reaped, and the first failure is returned.
  std::optional<WorkerExit> wait();
  /// As wait(), and a worker still running for which `finished(rank)` is true is done: it
  /// has flushed its output and blocks until it is ended (a spawned worker after its
  /// hand-back). The group ends it (SIGKILL to its process group) and reaps it; its exit
  /// counts as a success (WorkerExit::ended_by_launcher).
  std::optional<WorkerExit> wait(const std::function<bool(int64_t rank)>& finished);
  /// Watches the workers from a background thread; when one fails, stops the others and
  /// calls `on_failure` on that thread. For a launcher that trains itself (ddp's rank 0).
  void monitor(std::function<void(const WorkerExit&)> on_failure);
  /// The first failed worker's report, waiting up to `wait` for one (nullopt: none failed).
  /// Does not stop the others.
  std::optional<WorkerExit> failure(std::chrono::milliseconds wait);
  /// Waits for every worker to exit, however it ends (after a signal was forwarded, ranks
  /// finish their step and checkpoint); stops the rest after `timeout`. Returns the exits.
  std::vector<WorkerExit> wait_all(std::chrono::milliseconds timeout);
  /// Whether a worker is still running (reaps those that ended).
  bool any_running();
  /// `first_signal` (SIGTERM unless given) to every running worker, SIGKILL to those still
  /// alive after the grace period, then reaps them.
  void stop_all(int first_signal = SIGTERM);
  /// Sends `signal` to every running worker's process group.
  void signal_all(int signal);
  size_t size() const;
  /// Exit records of the workers that have ended so far.
  std::vector<WorkerExit> exits() const;
  /// The full report (with its last lines of stderr) of worker `rank` once it has ended;
  /// nullopt while it runs or when there is no such worker.
  std::optional<WorkerExit> report(int64_t rank);

  /// Sends `signal` to the workers of every WorkerGroup of this process. Async-signal-safe:
  /// meant for signal handlers (SIGINT or SIGTERM to a launcher reaches every rank).
  static void forward_signal(int signal) noexcept;

  /// This machine's host name.
  static std::string host_name();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// This program's executable and arguments (from /proc/self), for launchers that re-run it.
std::vector<std::string> this_program_argv();

}  // namespace volt::strategies::launchers
