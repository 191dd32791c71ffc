#pragma once
#include <csignal>
#include <string>
#include <vector>

#include "volt/core/environ.h"
#include "volt/core/trainer_options.h"

namespace volt::connectors {

/// What to do on SLURM's requeue signal: save a checkpoint, then run `command job_id`.
struct RequeueSettings {
  /// The signal (SIGUSR1 by default); 0: no requeue handling.
  int signal = 0;
  /// Run through /bin/sh with the job id appended, e.g. "scontrol requeue".
  std::string command;
  /// SLURM_JOB_ID, or SLURM_ARRAY_JOB_ID_SLURM_ARRAY_TASK_ID for an array task.
  std::string job_id;
};

/// Catches termination signals (SIGTERM, SIGINT) for a fit so that the training loop can
/// finish the current step, save a checkpoint and stop, instead of dying mid-write. A
/// second signal of the same kind is not caught: it terminates as usual (the same signal
/// again within 2 s is the same request delivered twice, and is absorbed). The previous
/// handlers come back when the connector is destroyed, except for the signal that stopped
/// the fit: its copy may still be on its way to this rank (a scheduler signals a job's tasks
/// one after another, and the ranks stopped as soon as one had it), so one late copy within
/// 10 s (duplicates within 2 s if this rank had its own) is absorbed, and anything after
/// that gets the previous action.
class SignalConnector {
 public:
  /// `requeue.signal` (when not 0) is caught too and marks the stop as a requeue.
  explicit SignalConnector(std::vector<int> signals, RequeueSettings requeue = {});
  ~SignalConnector();
  SignalConnector(const SignalConnector&) = delete;
  SignalConnector& operator=(const SignalConnector&) = delete;

  /// The first signal this process received since construction, or 0.
  int received() const;
  /// The signal every rank agreed stops the fit (the loop's vote, which may have been
  /// decided by another rank's signal); its late copy is absorbed after the fit.
  void stopped_by(int signal);
  /// "SIGTERM", "SIGINT", ... for messages.
  static std::string name(int signal);
  /// "SIGUSR1", "USR1" or a number -> the signal; ConfigError naming `flag` otherwise.
  static int parse_signal(const std::string& text, const std::string& flag);

  /// True when `signal` is the requeue signal (then the checkpoint goes to
  /// requeue_checkpoint_path and requeue() runs).
  bool is_requeue(int signal) const { return signal != 0 && signal == requeue_.signal; }
  /// Runs the requeue command for this job (rank 0 calls it, after the checkpoint is
  /// written) and returns a sentence for the stop message. Never throws: a failed
  /// requeue is reported in the sentence; the checkpoint is there either way.
  std::string requeue() const;
  const RequeueSettings& requeue_settings() const { return requeue_; }

  /// The requeue settings for a fit: a signal only when slurm_auto_requeue is on and the
  /// job runs under SLURM (`cluster_env` "slurm"); the job id from `env`.
  static RequeueSettings slurm_requeue(const TrainerOptions& options, const std::string& cluster_env,
                                       const Environ& env);
  /// Where a requeue checkpoint is saved: `<root>/hpc_ckpt_<n>.ckpt`, n one above the
  /// highest there (Lightning's names).
  static std::string requeue_checkpoint_path(const std::string& root);
  /// The highest-numbered `<root>/hpc_ckpt_<n>.ckpt`, or "" when there is none. A fit
  /// without ckpt_path resumes from it: that is how a requeued job continues.
  static std::string latest_requeue_checkpoint(const std::string& root);

 private:
  RequeueSettings requeue_;
  std::vector<int> signals_;
  std::vector<struct sigaction*> previous_;
  int stopped_by_ = 0;
};

}  // namespace volt::connectors
