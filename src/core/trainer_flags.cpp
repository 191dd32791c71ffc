#include "volt/core/trainer_flags.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <type_traits>

#include "volt/core/duration.h"
#include "volt/core/error.h"
#include "volt/core/file_check.h"

namespace volt {
namespace {

using O = TrainerOptions;

void check(bool ok, const std::string& message) {
  if (!ok) throw ConfigError(message);
}

std::string n(int64_t v) {
  return std::to_string(v);
}

std::string num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s = std::to_string(v);
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

// --- the data-free checks, one per flag (a combination sits on the flag named last) ---

void check_num_nodes(const O& o) {
  check(o.num_nodes >= 1, "num_nodes=" + n(o.num_nodes) + " must be at least 1.");
}

int64_t max_num_threads() {
  const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  return 4 * cores;
}

void check_num_threads(const O& o) {
  check(o.num_threads >= 0, "num_threads=" + n(o.num_threads) + " is negative. Use 0 (all cores) or a count.");
  check(o.num_threads <= max_num_threads(),
        "num_threads=" + n(o.num_threads) + " is more than 4 threads per core of this machine (" +
            n(max_num_threads() / 4) + " cores, so at most " + n(max_num_threads()) +
            "). Use 0 (all cores) or a count up to " + n(max_num_threads()) + ".");
}

// The signal's name is checked by validate_trainer_options (SignalConnector's parser).
void check_slurm_requeue_command(const O& o) {
  check(!o.slurm_auto_requeue || o.slurm_requeue_command.find_first_not_of(" \t") != std::string::npos,
        "slurm_requeue_command is empty while slurm_auto_requeue=true. Give the command that requeues a job "
        "(default \"scontrol requeue\"), or set slurm_auto_requeue=false.");
}

// Whether nccl can run depends on the accelerator and this LibTorch: the accelerator connector checks that.
void check_process_group_backend(const O& o) {
  const std::string& b = o.process_group_backend;
  check(b == "auto" || b == "gloo" || b == "nccl",
        "process_group_backend='" + b + "' is not known. Use auto, gloo or nccl.");
}

// Seconds converted to milliseconds for c10d must stay far inside int64.
constexpr double kMaxTimeoutS = 7 * 24 * 3600.0;

void check_seconds(double v, const std::string& flag, const std::string& example) {
  check(std::isfinite(v) && v > 0.0 && v <= kMaxTimeoutS,
        flag + "=" + num(v) + " is not a number of seconds in (0, 604800] (one week). Use seconds, e.g. " + example +
            ".");
}

void check_process_group_timeout(const O& o) {
  check_seconds(o.process_group_timeout_s, "process_group_timeout_s", "1800 (the default)");
}

void check_rendezvous_timeout(const O& o) {
  check_seconds(o.rendezvous_timeout_s, "rendezvous_timeout_s", "300 (the default)");
}

void check_bucket_caps(const O& o) {
  constexpr double kMaxBucketMb = 65536.0;
  const auto ok = [&](double mb) { return std::isfinite(mb) && mb > 0.0 && mb <= kMaxBucketMb; };
  check(ok(o.ddp_bucket_cap_mb) && ok(o.ddp_first_bucket_cap_mb),
        "ddp_bucket_cap_mb=" + num(o.ddp_bucket_cap_mb) + " and ddp_first_bucket_cap_mb=" +
            num(o.ddp_first_bucket_cap_mb) + " must both be positive and at most 65536 MB (defaults 25 and 1).");
}

void check_max_epochs(const O& o) {
  check(o.max_epochs >= -1, "max_epochs=" + n(o.max_epochs) +
                                " is not valid. Use a positive number of epochs, or -1 for the default (1000, or "
                                "unlimited when max_steps is set).");
}

void check_min_epochs(const O& o) {
  check(o.min_epochs >= 0, "min_epochs=" + n(o.min_epochs) + " is negative. Use 0 or more.");
  check(o.max_epochs < 0 || o.min_epochs <= o.max_epochs, "min_epochs=" + n(o.min_epochs) +
                                                              " is larger than max_epochs=" + n(o.max_epochs) +
                                                              ". Lower min_epochs or raise max_epochs.");
}

void check_max_steps(const O& o) {
  check(o.max_steps >= -1, "max_steps=" + n(o.max_steps) + " is not valid. Use a positive count, or -1 for no limit.");
}

void check_max_time(const O& o) {
  if (!o.max_time.empty()) parse_duration(o.max_time, "max_time");
}

void check_min_steps(const O& o) {
  check(o.min_steps >= 0, "min_steps=" + n(o.min_steps) + " is negative. Use 0 or more.");
  check(o.max_steps < 0 || o.min_steps <= o.max_steps, "min_steps=" + n(o.min_steps) + " is larger than max_steps=" +
                                                           n(o.max_steps) + ". Lower min_steps or raise max_steps.");
}

void check_limit(const BatchLimit& limit, const std::string& flag) {
  if (limit.is_fraction) {
    check(limit.value >= 0.0 && limit.value <= 1.0,
          flag + "=" + limit.to_string() +
              " is a fraction outside [0, 1]. Use a fraction such as 0.25 (a quarter of "
              "the batches), 1.0 (all), 0 (none), or an integer count of batches.");
  } else {
    check(limit.value >= 0, flag + "=" + limit.to_string() +
                                " is a negative count. Use 0 (none), a positive count, or a fraction such as 0.5.");
  }
}

void check_limit_train(const O& o) {
  check_limit(o.limit_train_batches, "limit_train_batches");
}
void check_limit_val(const O& o) {
  check_limit(o.limit_val_batches, "limit_val_batches");
}
void check_limit_test(const O& o) {
  check_limit(o.limit_test_batches, "limit_test_batches");
}
void check_limit_predict(const O& o) {
  check_limit(o.limit_predict_batches, "limit_predict_batches");
}

// Whether a count fits the epoch needs the loader: fit checks that.
void check_val_check_interval(const O& o) {
  const BatchLimit& v = o.val_check_interval;
  if (!v.is_fraction) {
    check(v.value >= 1, "val_check_interval=" + v.to_string() +
                            " is not a positive count of training batches. Use 1 or more, or a fraction such as 0.5.");
    return;
  }
  check(std::isfinite(v.value),
        "val_check_interval=" + v.to_string() + " is not a finite number. Use a fraction such as 0.5 or a count.");
  check(v.value > 0.0 && v.value <= 1.0, "val_check_interval=" + v.to_string() +
                                             " is a fraction outside (0, 1]. Use e.g. 0.25 to validate four times an "
                                             "epoch, 1.0 for once, or an integer count of training batches.");
}

void check_check_val_every_n_epoch(const O& o) {
  check(!o.check_val_every_n_epoch || *o.check_val_every_n_epoch >= 1,
        "check_val_every_n_epoch=" + (o.check_val_every_n_epoch ? n(*o.check_val_every_n_epoch) : "") +
            " is not valid. Use 1 or more, or null to validate only by val_check_interval.");
  check(o.check_val_every_n_epoch.has_value() || !o.val_check_interval.is_fraction,
        "check_val_every_n_epoch=null needs an integer val_check_interval (a count of training batches); got "
        "val_check_interval=" +
            o.val_check_interval.to_string() + ".");
}

void check_num_sanity_val_steps(const O& o) {
  check(o.num_sanity_val_steps >= -1, "num_sanity_val_steps=" + n(o.num_sanity_val_steps) +
                                          " is not valid. Use 0 (off), a count, or -1 (every validation batch).");
}

void check_fast_dev_run(const O& o) {
  check(o.fast_dev_run >= 0,
        "fast_dev_run=" + n(o.fast_dev_run) + " is negative. Use 0 (off), 1 (true) or a number of batches.");
}

// With manual optimization accumulation is refused at fit, where the module is known.
void check_accumulate_grad_batches(const O& o) {
  check(o.accumulate_grad_batches >= 1,
        "accumulate_grad_batches=" + n(o.accumulate_grad_batches) + " is not valid. Use 1 (no accumulation) or more.");
}

void check_gradient_clip_val(const O& o) {
  check(std::isfinite(o.gradient_clip_val) && o.gradient_clip_val >= 0.0,
        "gradient_clip_val=" + num(o.gradient_clip_val) +
            " is not a finite, non-negative number. Use 0 (no clipping) or a positive threshold such as 1.0.");
}

void check_gradient_clip_algorithm(const O& o) {
  check(o.gradient_clip_algorithm == "norm" || o.gradient_clip_algorithm == "value",
        "gradient_clip_algorithm='" + o.gradient_clip_algorithm + "' is not known. Use \"norm\" or \"value\".");
}

void check_default_root_dir(const O& o) {
  check(!o.default_root_dir.empty(), "default_root_dir is empty. Use a folder path such as \".\" or \"runs\".");
  const std::string why =
      folder_problem(o.default_root_dir, "default_root_dir", "Give a folder (it is created if it does not exist).");
  check(why.empty(), why);
}

void check_log_every_n_steps(const O& o) {
  check(o.log_every_n_steps >= 1, "log_every_n_steps=" + n(o.log_every_n_steps) + " is not valid. Use 1 or more.");
}

// --- rows ---

template <typename T>
constexpr FlagType type_of() {
  if constexpr (std::is_same_v<T, bool>) {
    return FlagType::kBool;
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return FlagType::kInt;
  } else if constexpr (std::is_same_v<T, double>) {
    return FlagType::kDouble;
  } else if constexpr (std::is_same_v<T, std::string>) {
    return FlagType::kString;
  } else if constexpr (std::is_same_v<T, std::optional<int64_t>>) {
    return FlagType::kOptionalInt;
  } else if constexpr (std::is_same_v<T, std::optional<uint64_t>>) {
    return FlagType::kOptionalUint;
  } else if constexpr (std::is_same_v<T, BatchLimit>) {
    return FlagType::kBatchLimit;
  } else {
    static_assert(std::is_same_v<T, LoggerOption>, "a TrainerOptions field of a type FlagValue does not hold");
    return FlagType::kLogger;
  }
}

// --- the tuner's rows (volt::Tuner re-checks the same values when called from code) ---

// Learning rates span decades: "1e-09", not num()'s fixed-point "0".
std::string rate(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

void check_tuner_lr_range(const O& o) {
  const double lo = o.tuner_lr_find_min_lr, hi = o.tuner_lr_find_max_lr;
  check(std::isfinite(lo) && lo > 0.0, "tuner.lr_find_min_lr=" + rate(lo) +
                                           " is not a positive learning rate. Use e.g. 1e-8 (the default).");
  check(std::isfinite(hi) && hi > lo, "tuner.lr_find_max_lr=" + rate(hi) +
                                          " must be finite and larger than tuner.lr_find_min_lr=" + rate(lo) +
                                          ". Use e.g. 1 (the default).");
}

void check_tuner_num_training(const O& o) {
  check(o.tuner_lr_find_num_training >= 1, "tuner.lr_find_num_training=" + n(o.tuner_lr_find_num_training) +
                                               " is not a number of sweep steps. Use 1 or more (default 100).");
}

void check_tuner_lr_find_mode(const O& o) {
  check(o.tuner_lr_find_mode == "exponential" || o.tuner_lr_find_mode == "linear",
        "tuner.lr_find_mode='" + o.tuner_lr_find_mode + "' is not known. Use exponential or linear.");
}

void check_tuner_early_stop_threshold(const O& o) {
  const double t = o.tuner_lr_find_early_stop_threshold;
  check(std::isfinite(t) && t >= 0.0, "tuner.lr_find_early_stop_threshold=" + rate(t) +
                                          " is not a factor. Use e.g. 4 (the default), or 0 to never stop early.");
}

void check_tuner_scale_batch_size(const O& o) {
  const std::string& m = o.tuner_scale_batch_size;
  check(m.empty() || m == "power" || m == "binsearch",
        "tuner.scale_batch_size='" + m + "' is not known. Use power, binsearch, or leave it empty (off).");
}

void check_tuner_batch_size_counts(const O& o) {
  check(o.tuner_batch_size_steps_per_trial >= 1, "tuner.batch_size_steps_per_trial=" +
                                                     n(o.tuner_batch_size_steps_per_trial) +
                                                     " must be at least 1 (default 3).");
  check(o.tuner_batch_size_init_val >= 1 && o.tuner_batch_size_init_val <= (int64_t{1} << 24),
        "tuner.batch_size_init_val=" + n(o.tuner_batch_size_init_val) + " is not a batch size in 1 .. 16777216.");
  check(o.tuner_batch_size_max_trials >= 1, "tuner.batch_size_max_trials=" + n(o.tuner_batch_size_max_trials) +
                                                " must be at least 1 (default 25).");
  check(o.tuner_batch_size_memory_budget >= 0, "tuner.batch_size_memory_budget=" +
                                                   n(o.tuner_batch_size_memory_budget) +
                                                   " is negative. Give bytes, or 0 for 90% of the available memory.");
}

template <typename T, T O::*Member>
FlagValue get_field(const O& o) {
  return FlagValue(std::in_place_type<T>, o.*Member);
}

template <typename T, T O::*Member>
void set_field(O& o, const FlagValue& v) {
  o.*Member = std::get<T>(v);
}

template <typename T, T O::*Member>
TrainerFlag row(const char* name, const char* default_text, const char* help, void (*check_fn)(const O&) = nullptr,
                FlagType type = type_of<T>()) {
  return {name, type, default_text, help, &get_field<T, Member>, &set_field<T, Member>, check_fn};
}

#define VOLT_FLAG(field, ...) row<decltype(O::field), &O::field>(#field, __VA_ARGS__)
// A row whose command-line name is not the field's ("tuner.lr_find" for tuner_lr_find).
#define VOLT_NAMED_FLAG(name, field, ...) row<decltype(O::field), &O::field>(name, __VA_ARGS__)

}  // namespace

const std::vector<TrainerFlag>& trainer_flags() {
  static const std::vector<TrainerFlag> flags = {
      // hardware (resolved by the accelerator connector against the registries and the machine)
      VOLT_FLAG(accelerator, "auto", "hardware: auto, cpu, gpu, cuda, tpu"),
      VOLT_FLAG(devices, "auto", "devices per node: a count, -1 for all, auto, or ids like 0,1", nullptr,
                FlagType::kDevices),
      VOLT_FLAG(strategy, "auto", "auto, single_device, ddp, ddp_spawn, fsdp, dp, xla, ..."),
      VOLT_FLAG(precision, "32-true", "32-true, 16-mixed, bf16-mixed, 64-true, 16-true, ..."),
      VOLT_FLAG(num_nodes, "1", "number of machines", check_num_nodes),
      VOLT_FLAG(num_threads, "0", "intra-op threads per process on CPU; 0: all cores", check_num_threads),
      VOLT_FLAG(allow_cpu_oversubscription, "false", "allow devices above the core count on CPU"),
      VOLT_FLAG(cluster_environment, "auto", "auto, slurm, torchelastic, kubeflow, lsf, mpi, tpu or default"),
      VOLT_FLAG(slurm_auto_detect, "true", "treat srun jobs as SLURM jobs"),
      VOLT_FLAG(slurm_auto_requeue, "true", "on the requeue signal, checkpoint and requeue the SLURM job"),
      VOLT_FLAG(slurm_requeue_signal, "SIGUSR1", "the signal SLURM sends before the time limit"),
      VOLT_FLAG(slurm_requeue_command, "scontrol requeue", "the command that requeues the job",
                check_slurm_requeue_command),
      // distributed
      VOLT_FLAG(process_group_backend, "auto", "ddp's collectives: auto, gloo, nccl", check_process_group_backend),
      VOLT_FLAG(process_group_timeout_s, "1800.0", "seconds a collective waits for the other ranks before failing",
                check_process_group_timeout),
      VOLT_FLAG(rendezvous_timeout_s, "300.0", "seconds all ranks may take to join", check_rendezvous_timeout),
      VOLT_FLAG(ddp_bucket_cap_mb, "25.0", "gradient bucket size (MiB) of the DDP reducer", check_bucket_caps),
      VOLT_FLAG(ddp_first_bucket_cap_mb, "1.0", "size (MiB) of the first gradient bucket", check_bucket_caps),
      VOLT_FLAG(ddp_gradient_as_bucket_view, "false", "gradients as views into the reducer's buckets"),
      // how long
      VOLT_FLAG(max_epochs, "-1",
                "stop after this many epochs; -1: 1000 if max_steps is -1 and no max_time, else no limit",
                check_max_epochs),
      VOLT_FLAG(min_epochs, "0", "train at least this many epochs", check_min_epochs),
      VOLT_FLAG(max_steps, "-1", "stop after this many optimizer steps; -1: no limit", check_max_steps),
      VOLT_FLAG(max_time, "", "stop training after this long: DD:HH:MM:SS or seconds; empty: no limit", check_max_time),
      VOLT_FLAG(min_steps, "0", "train at least this many optimizer steps", check_min_steps),
      VOLT_FLAG(limit_train_batches, "1.0", "training batches per epoch: a count, or a fraction of the loader",
                check_limit_train),
      VOLT_FLAG(limit_val_batches, "1.0", "validation batches: count or fraction", check_limit_val),
      VOLT_FLAG(limit_test_batches, "1.0", "test batches: count or fraction", check_limit_test),
      VOLT_FLAG(limit_predict_batches, "1.0", "prediction batches: count or fraction", check_limit_predict),
      VOLT_FLAG(val_check_interval, "1.0", "validate every fraction of a training epoch, or every n training batches",
                check_val_check_interval),
      VOLT_FLAG(check_val_every_n_epoch, "1", "validate every n epochs; null: only by val_check_interval",
                check_check_val_every_n_epoch),
      VOLT_FLAG(num_sanity_val_steps, "2", "validation batches run before training to catch bugs early; -1: all",
                check_num_sanity_val_steps),
      VOLT_FLAG(fast_dev_run, "0", "0: off; n: run n batches of each stage once, no checkpoints or loggers",
                check_fast_dev_run),
      // optimization
      VOLT_FLAG(accumulate_grad_batches, "1", "batches whose gradients are summed before each optimizer step",
                check_accumulate_grad_batches),
      VOLT_FLAG(gradient_clip_val, "0.0", "clip gradients at this value; 0: off", check_gradient_clip_val),
      VOLT_FLAG(gradient_clip_algorithm, "norm", "norm or value", check_gradient_clip_algorithm),
      // reproducibility
      VOLT_FLAG(seed, "null", "seed LibTorch's generators and the data order; null: not seeded"),
      VOLT_FLAG(deterministic, "false", "use deterministic algorithms only"),
      // outputs
      VOLT_FLAG(default_root_dir, ".", "where logs and checkpoints are written", check_default_root_dir),
      VOLT_FLAG(enable_progress_bar, "true", "show a progress bar"),
      VOLT_FLAG(enable_checkpointing, "true", "save checkpoints with the default checkpoint callback"),
      VOLT_FLAG(async_checkpoint, "false", "write checkpoints in a background thread"),
      VOLT_FLAG(checkpoint_io, "torch",
                "how checkpoints are written and read: torch, async, or a name registered with "
                "checkpoint_io::register_checkpoint_io"),
      VOLT_FLAG(enable_model_summary, "true", "print a model summary at start"),
      VOLT_FLAG(logger, "true",
                "true: the CSV logger; false: none; or logger names, e.g. tensorboard or csv,tensorboard (one "
                "version_N folder)"),
      VOLT_FLAG(log_every_n_steps, "50", "log metrics every n training steps", check_log_every_n_steps),
      VOLT_FLAG(profiler, "", "time every hook and step: simple, advanced or pytorch; empty: off"),
      // tuner (volt::Tuner::tune, before fit)
      VOLT_NAMED_FLAG("tuner.lr_find", tuner_lr_find, "false",
                      "find the learning rate before fit and set the module's lr hyperparameter to the suggestion"),
      VOLT_NAMED_FLAG("tuner.lr_find_min_lr", tuner_lr_find_min_lr, "1e-08", "lowest learning rate of the sweep",
                      check_tuner_lr_range),
      VOLT_NAMED_FLAG("tuner.lr_find_max_lr", tuner_lr_find_max_lr, "1.0", "highest learning rate of the sweep",
                      check_tuner_lr_range),
      VOLT_NAMED_FLAG("tuner.lr_find_num_training", tuner_lr_find_num_training, "100",
                      "optimizer steps of the sweep", check_tuner_num_training),
      VOLT_NAMED_FLAG("tuner.lr_find_mode", tuner_lr_find_mode, "exponential", "exponential or linear",
                      check_tuner_lr_find_mode),
      VOLT_NAMED_FLAG("tuner.lr_find_early_stop_threshold", tuner_lr_find_early_stop_threshold, "4.0",
                      "stop the sweep when the loss exceeds this times the best; 0: never",
                      check_tuner_early_stop_threshold),
      VOLT_NAMED_FLAG("tuner.scale_batch_size", tuner_scale_batch_size, "",
                      "find the largest batch size that fits before fit: power or binsearch; empty: off",
                      check_tuner_scale_batch_size),
      VOLT_NAMED_FLAG("tuner.batch_size_steps_per_trial", tuner_batch_size_steps_per_trial, "3",
                      "optimizer steps per batch-size trial", check_tuner_batch_size_counts),
      VOLT_NAMED_FLAG("tuner.batch_size_init_val", tuner_batch_size_init_val, "2", "first batch size tried",
                      check_tuner_batch_size_counts),
      VOLT_NAMED_FLAG("tuner.batch_size_max_trials", tuner_batch_size_max_trials, "25",
                      "most batch-size trials", check_tuner_batch_size_counts),
      VOLT_NAMED_FLAG("tuner.batch_size_memory_budget", tuner_batch_size_memory_budget, "0",
                      "CPU memory in bytes a trial may allocate; 0: 90% of the available memory",
                      check_tuner_batch_size_counts),
      // DDP communication hooks (checked against the hooks by the accelerator connector)
      VOLT_NAMED_FLAG("ddp.comm_hook", ddp_comm_hook, "",
                      "DDP gradient communication hook: allreduce, fp16, bf16 or powersgd; empty: c10d's allreduce"),
      VOLT_NAMED_FLAG("ddp.powersgd_matrix_approximation_rank", ddp_powersgd_matrix_approximation_rank, "1",
                      "PowerSGD: rank of the low-rank gradient factors"),
      VOLT_NAMED_FLAG("ddp.powersgd_start_powerSGD_iter", ddp_powersgd_start_powerSGD_iter, "1000",
                      "PowerSGD: plain allreduce steps before compression starts"),
      VOLT_NAMED_FLAG("ddp.powersgd_min_compression_rate", ddp_powersgd_min_compression_rate, "2.0",
                      "PowerSGD: compress a matrix only when it shrinks at least this many times"),
      VOLT_NAMED_FLAG("ddp.powersgd_use_error_feedback", ddp_powersgd_use_error_feedback, "true",
                      "PowerSGD: add each rank's compression error to its next gradient"),
      VOLT_NAMED_FLAG("ddp.powersgd_warm_start", ddp_powersgd_warm_start, "true",
                      "PowerSGD: start each power iteration from the previous step's Q"),
      VOLT_NAMED_FLAG("ddp.powersgd_orthogonalization_epsilon", ddp_powersgd_orthogonalization_epsilon, "0.0",
                      "PowerSGD: added to column norms when orthogonalizing"),
      // strategy="fsdp" (checked by the accelerator connector)
      VOLT_NAMED_FLAG("fsdp.sharding_strategy", fsdp_sharding_strategy, "FULL_SHARD",
                      "what fsdp shards: FULL_SHARD, SHARD_GRAD_OP or NO_SHARD"),
      VOLT_NAMED_FLAG("fsdp.auto_wrap_policy", fsdp_auto_wrap_policy, "",
                      "fsdp units: empty (one), size:N (submodules of N+ parameters), class:A,B; modules wrapped in volt::Sharded always"),
      VOLT_NAMED_FLAG("fsdp.state_dict_type", fsdp_state_dict_type, "full",
                      "fsdp checkpoints: full (one file, rank 0) or sharded (a folder, a file per rank)"),
      VOLT_NAMED_FLAG("fsdp.limit_all_gathers", fsdp_limit_all_gathers, "true",
                      "at most two fsdp units' all-gathers in flight; false: every unit's at once"),
      VOLT_NAMED_FLAG("fsdp.cpu_offload", fsdp_cpu_offload, "false",
                      "fsdp: parameter and gradient pieces and optimizer state in host memory between steps"),
  };
  return flags;
}

#undef VOLT_FLAG
#undef VOLT_NAMED_FLAG

std::string flag_cli_key(const TrainerFlag& flag) {
  const std::string name = flag.name;
  return name.find('.') == std::string::npos ? "trainer." + name : name;
}

const TrainerFlag* find_trainer_flag(const std::string& name) {
  for (const auto& flag : trainer_flags()) {
    if (name == flag.name) return &flag;
  }
  return nullptr;
}

void check_trainer_flags(const TrainerOptions& options) {
  for (const auto& flag : trainer_flags()) {
    if (flag.check != nullptr) flag.check(options);
  }
}

void check_trainer_flag(const TrainerOptions& options, const std::string& name) {
  const TrainerFlag* flag = find_trainer_flag(name);
  if (flag == nullptr) throw std::logic_error("check_trainer_flag: '" + name + "' is not a Trainer flag");
  if (flag->check != nullptr) flag->check(options);
}

namespace {

std::string format_double(double d) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), d);
  std::string text(buf, ec == std::errc() ? end : buf);
  // A reader should see a float, as Lightning prints 0.0 and not 0.
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}

}  // namespace

std::string flag_value_text(const FlagValue& value) {
  struct Visitor {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return format_double(d); }
    std::string operator()(const std::string& s) const { return s; }
    std::string operator()(const std::optional<int64_t>& i) const { return i ? std::to_string(*i) : "null"; }
    std::string operator()(const std::optional<uint64_t>& i) const { return i ? std::to_string(*i) : "null"; }
    std::string operator()(const BatchLimit& limit) const { return limit.to_string(); }
    std::string operator()(const LoggerOption& logger) const { return logger.to_string(); }
  };
  return std::visit(Visitor{}, value);
}

const char* flag_type_metavar(FlagType type) {
  switch (type) {
    case FlagType::kBool:
      return "[true|false]";
    case FlagType::kInt:
      return "INT";
    case FlagType::kDouble:
      return "FLOAT";
    case FlagType::kString:
      return "STR";
    case FlagType::kOptionalInt:
      return "INT|null";
    case FlagType::kOptionalUint:
      return "UINT|null";
    case FlagType::kBatchLimit:
      return "N|FRACTION";
    case FlagType::kDevices:
      return "N|-1|auto|IDS";
    case FlagType::kLogger:
      return "true|false|NAMES";
  }
  return "";
}

const char* flag_type_expects(FlagType type) {
  switch (type) {
    case FlagType::kBool:
      return "a boolean (true or false)";
    case FlagType::kInt:
      return "an integer";
    case FlagType::kDouble:
      return "a number";
    case FlagType::kString:
      return "a string";
    case FlagType::kOptionalInt:
      return "an integer or null";
    case FlagType::kOptionalUint:
      return "a non-negative integer or null";
    case FlagType::kBatchLimit:
      return "a number of batches like 10 or a fraction like 0.25";
    case FlagType::kDevices:
      return "a device count (2, or -1 for all), auto, or device ids (0,1)";
    case FlagType::kLogger:
      return "true, false, or logger names (csv,tensorboard)";
  }
  return "";
}

std::string trainer_flags_markdown() {
  // A '|' in a cell would end it: escape it (the metavariables hold some).
  const auto cell = [](const std::string& text) {
    std::string out;
    for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
    return out;
  };
  std::string out = "| flag | type | default | description |\n|---|---|---|---|\n";
  for (const auto& flag : trainer_flags()) {
    const std::string default_text = *flag.default_text == '\0' ? "\"\"" : flag.default_text;
    out += "| `" + std::string(flag.name) + "` | " + cell(flag_type_metavar(flag.type)) + " | `" + default_text +
           "` | " + cell(flag.help) + " |\n";
  }
  return out;
}

}  // namespace volt
