#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "volt/core/batch_limit.h"
#include "volt/core/logger_option.h"

namespace volt {

/// Every Trainer flag, with Lightning 2.x's names, meanings and defaults.
/// Trainer's constructor validates all of them before anything runs.
struct TrainerOptions {
  // --- hardware (resolved by the accelerator connector) ---
  std::string accelerator = "auto";  ///< auto, cpu, gpu, cuda, tpu
  std::string devices = "auto";      ///< n, -1, "auto", "0,1", "2,"
  std::string strategy = "auto";     ///< auto, single_device, ddp, ddp_spawn, dp, ...
  std::string precision = "32-true";  ///< 32-true, 16-mixed, bf16-mixed, 64-true, ...
  int64_t num_nodes = 1;
  /// Intra-op threads per process on CPU; 0: all cores of this machine. At most 4 per core.
  int64_t num_threads = 0;
  /// On CPU, allow Volt to start more processes per node (devices) than the machine has
  /// cores; without it such a devices value is a ConfigError (the ranks would compete for
  /// cores). Processes started by a launcher (torchrun, srun, mpirun) are not counted.
  bool allow_cpu_oversubscription = false;
  /// auto (detect), or one of slurm, torchelastic, kubeflow, lsf, mpi, tpu, default.
  std::string cluster_environment = "auto";
  /// Treat srun jobs as SLURM jobs (false: ignore SLURM's variables).
  bool slurm_auto_detect = true;
  /// On the requeue signal, save a checkpoint and requeue the job.
  bool slurm_auto_requeue = true;
  std::string slurm_requeue_signal = "SIGUSR1";
  std::string slurm_requeue_command = "scontrol requeue";

  // --- distributed (the ddp family) ---
  /// Process-group backend: auto (nccl for CUDA when this LibTorch has it, else gloo), gloo, nccl.
  std::string process_group_backend = "auto";
  /// Seconds a collective waits for the other ranks before failing with a DistributedError.
  double process_group_timeout_s = 1800.0;
  /// Seconds the rendezvous at MASTER_ADDR:MASTER_PORT may take (all ranks joining).
  double rendezvous_timeout_s = 300.0;
  /// Gradient bucket size of c10d's Reducer, and the (smaller) first bucket.
  double ddp_bucket_cap_mb = 25.0;
  double ddp_first_bucket_cap_mb = 1.0;
  /// Gradients as views into the Reducer's buckets (one copy fewer per step).
  bool ddp_gradient_as_bucket_view = false;
  /// DDP communication hook (flag ddp.comm_hook): empty (c10d's averaging allreduce), allreduce, fp16,
  /// bf16 or powersgd; PowerSGD's settings as PyTorch's PowerSGDState names them.
  std::string ddp_comm_hook;
  int64_t ddp_powersgd_matrix_approximation_rank = 1;
  int64_t ddp_powersgd_start_powerSGD_iter = 1000;
  double ddp_powersgd_min_compression_rate = 2.0;
  bool ddp_powersgd_use_error_feedback = true;
  bool ddp_powersgd_warm_start = true;
  double ddp_powersgd_orthogonalization_epsilon = 0.0;
  /// strategy="fsdp" (flags fsdp.*): FULL_SHARD, SHARD_GRAD_OP or NO_SHARD (any case), and which
  /// submodules are units of their own: "" (one unit), "size:N", "class:A,B"; a module wrapped in
  /// volt::Sharded is always a unit (docs/distributed.md "Sharded training: `fsdp`").
  std::string fsdp_sharding_strategy = "FULL_SHARD";
  std::string fsdp_auto_wrap_policy;
  /// full (one file in the ordinary layout, written by rank 0) or sharded (a folder: one file per rank).
  std::string fsdp_state_dict_type = "full";
  /// At most two fsdp units' collectives in flight (their buffers bounded to two units); false: all at once.
  bool fsdp_limit_all_gathers = true;
  /// Parameter pieces, gradient pieces and optimizer state in host memory between steps (the optimizer
  /// steps on the CPU); FULL_SHARD and SHARD_GRAD_OP.
  bool fsdp_cpu_offload = false;

  // --- how long ---
  /// -1: 1000 when max_steps is -1 and no Timer (max_time) bounds the run, else unlimited (Lightning).
  int64_t max_epochs = -1;
  int64_t min_epochs = 0;
  int64_t max_steps = -1;
  /// Stop training after this long (Lightning's max_time): "DD:HH:MM:SS" or a number of
  /// seconds; empty: no limit. Adds a Timer callback (interval "step") unless one is given.
  std::string max_time;
  int64_t min_steps = 0;
  BatchLimit limit_train_batches;
  BatchLimit limit_val_batches;
  BatchLimit limit_test_batches;
  BatchLimit limit_predict_batches;
  /// Fraction of a training epoch, or a count of training batches, between validations.
  BatchLimit val_check_interval;
  /// Validate every n epochs; unset: only by val_check_interval (which must be a count).
  std::optional<int64_t> check_val_every_n_epoch = 1;
  /// Validation batches run before training to catch bugs early; -1: all.
  int64_t num_sanity_val_steps = 2;
  /// 0: off; n: run n batches of each stage, one epoch, no checkpoints or loggers.
  int64_t fast_dev_run = 0;

  // --- optimization ---
  int64_t accumulate_grad_batches = 1;
  /// 0: no clipping.
  double gradient_clip_val = 0.0;
  std::string gradient_clip_algorithm = "norm";  ///< norm, value

  // --- reproducibility ---
  /// Seeds LibTorch's generators and the data order; unset: not seeded.
  std::optional<uint64_t> seed;
  /// Deterministic algorithms (at::globalContext().setDeterministicAlgorithms).
  bool deterministic = false;

  // --- outputs ---
  std::string default_root_dir = ".";
  bool enable_progress_bar = true;
  bool enable_checkpointing = true;
  /// Write checkpoints in a background thread (checkpoint_io::AsyncCheckpointIO): the
  /// loop is blocked only while the tensors are copied; a failed write is raised at the
  /// next save or at the end of the stage.
  bool async_checkpoint = false;
  /// How checkpoint files are written and read: "torch" (TorchCheckpointIO), "async"
  /// (AsyncCheckpointIO), or a name added with checkpoint_io::register_checkpoint_io.
  /// async_checkpoint=true runs the chosen one in the background.
  std::string checkpoint_io = "torch";
  bool enable_model_summary = true;
  /// true: the CSV logger (when no logger objects are given); false: none; or logger
  /// names from the logger registry: "csv", "tensorboard", "csv,tensorboard",
  /// {"csv", "tensorboard"} (several write into one lightning_logs/version_N).
  LoggerOption logger = true;
  int64_t log_every_n_steps = 50;
  /// Times the run's actions (hooks, steps, backward, data fetching, checkpointing): "" (off),
  /// "simple", "advanced", "pytorch", or a name added with profilers::register_profiler. The
  /// report goes to `<log_dir>/<stage>-profile.txt` (and `<stage>-trace.json` for "pytorch").
  /// Trainer::set_profiler gives a profiler object instead.
  std::string profiler;

  // --- tuner (volt::Tuner::tune runs them before fit; `--tuner.<name>` on the command line) ---
  /// Run the learning-rate finder before fit and write its suggestion into the module's "lr" (or
  /// "learning_rate") hyperparameter, which configure_optimizers reads.
  bool tuner_lr_find = false;
  double tuner_lr_find_min_lr = 1e-8;
  double tuner_lr_find_max_lr = 1.0;
  int64_t tuner_lr_find_num_training = 100;
  std::string tuner_lr_find_mode = "exponential";  ///< exponential, linear
  /// Stop the sweep when the smoothed loss exceeds this times the best one; 0: never.
  double tuner_lr_find_early_stop_threshold = 4.0;
  /// Run the batch-size finder before fit: "" (off), power or binsearch.
  std::string tuner_scale_batch_size;
  int64_t tuner_batch_size_steps_per_trial = 3;
  int64_t tuner_batch_size_init_val = 2;
  int64_t tuner_batch_size_max_trials = 25;
  /// CPU memory (bytes) a trial may allocate; 0: 90% of the machine's available memory.
  int64_t tuner_batch_size_memory_budget = 0;
};

}  // namespace volt
