#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "volt/callbacks/callback.h"

namespace volt::callbacks {

/// Saves checkpoints during fit, as Lightning's ModelCheckpoint does: periodically (every
/// n epochs or every n optimizer steps), keeping the `save_top_k` best by a monitored
/// metric, and optionally a rolling "last.ckpt".
///
/// When it saves (Lightning's rules):
/// - every_n_train_steps > 0: at on_train_batch_end when global_step is a multiple of it.
/// - every_n_epochs > 0: at the end of every n-th epoch; at on_train_epoch_end when
///   save_on_train_epoch_end is true, else at on_validation_end. Unset, as in Lightning:
///   after validation when check_val_every_n_epoch is not 1; at train epoch end when the
///   run has no validation batches or validates once per epoch (val_check_interval 1.0
///   or 1); after each validation otherwise.
/// - save_last: at every epoch-end save point and every step save, whatever the interval.
/// Never during the sanity check, never under fast_dev_run, never outside fit (validate/test/predict), never twice for
/// the same global step, and never before the first optimizer step.
///
/// Ranks: every rank runs the same bookkeeping and calls TrainerView::save_checkpoint (a
/// collective). Decisions that could differ between ranks (is the new score better, is a
/// file name taken on disk) are made by rank 0 and shared with
/// TrainerView::reduce_boolean_decision, so all ranks agree; only rank 0 removes files.
///
/// Version counter: a name counts as taken when rank 0 finds the file on disk or when this
/// callback saved it earlier in the process and has not removed it since; the new
/// checkpoint then gets "-v1", "-v2", ... ("epoch=3-step=1200-v1.ckpt").
class ModelCheckpoint : public Callback {
 public:
  /// Lightning's ModelCheckpoint arguments, with its defaults.
  struct Options {
    /// Directory for checkpoints. Empty: `<log_dir()>/checkpoints` when loggers are
    /// attached, else `<default_root_dir>/checkpoints` (resolved at setup).
    std::string dirpath;
    /// File name template without ".ckpt". "{key}" and "{key:spec}" insert the epoch, the
    /// global step or any logged metric; spec is a subset of Python's format spec: "d",
    /// "0Nd", "Nd", ".Nf", "0W.Nf", ".Ne", ".Ng" (a double with no spec prints like
    /// Python's repr). Empty means "{epoch}-{step}".
    std::string filename = "{epoch}-{step}";
    /// Metric that ranks checkpoints; empty: none (keep the latest save_top_k).
    std::string monitor;
    /// "min" (lower is better) or "max".
    std::string mode = "min";
    /// How many checkpoints to keep: -1 all, 0 none (save_last still works), k > 1 needs
    /// a monitor.
    int64_t save_top_k = 1;
    /// Also keep a rolling "last.ckpt".
    bool save_last = false;
    /// Save only the module's weights (no optimizer, loop or callback state).
    bool save_weights_only = false;
    /// Epochs between saves; unset: 1 unless every_n_train_steps is set, then 0 (off).
    std::optional<int64_t> every_n_epochs;
    /// Optimizer steps between saves; 0: off.
    int64_t every_n_train_steps = 0;
    /// Save at on_train_epoch_end (true) or at on_validation_end (false); unset: Lightning's
    /// rule (see the class comment).
    std::optional<bool> save_on_train_epoch_end;
    /// "{val_loss:.2f}" renders as "val_loss=0.12" (true) or "0.12" (false).
    bool auto_insert_metric_name = true;
    /// Append "-v1", "-v2", ... instead of overwriting a file that exists.
    bool enable_version_counter = true;
    /// Next to every checkpoint it writes, also write the module's weights as a
    /// .safetensors file of the same name ("epoch=1-step=20.safetensors" beside
    /// "epoch=1-step=20.ckpt"), readable by Hugging Face's safetensors and PyTorch users;
    /// it is removed together with its checkpoint.
    bool save_safetensors = false;
  };

  /// Lightning's defaults: save the latest checkpoint at every epoch end, keep one.
  ModelCheckpoint();
  /// Validates `options`; throws ConfigError (what, given, fix) when they are inconsistent.
  explicit ModelCheckpoint(Options options);

  /// "ModelCheckpoint{'monitor': 'val_loss', 'mode': 'min', 'every_n_train_steps': 0,
  /// 'every_n_epochs': 1}" ('monitor': None without a monitor).
  std::string state_key() const override;
  /// best_model_path, best_model_score, best_k_models, kth_best_model_path,
  /// last_model_path, dirpath. Non-finite scores are stored as "inf", "-inf" or "nan".
  nlohmann::json state_dict() const override;
  /// Restores state_dict(). As in Lightning, only best_model_path is restored when the
  /// checkpoint was written for another dirpath. Before dirpath is resolved the state is
  /// kept and applied at setup.
  void load_state_dict(const nlohmann::json& state) override;

  /// Resolves dirpath; on rank 0 at fit, warns once when the directory is not empty.
  void setup(TrainerView& view, Stage stage) override;
  /// Resets per-fit bookkeeping (whether an epoch has ended yet).
  void on_fit_start(TrainerView& view) override;
  /// Step-based saving (every_n_train_steps).
  void on_train_batch_end(TrainerView& view, const at::Tensor& loss, const Batch& batch,
                          int64_t batch_idx) override;
  /// Epoch-based saving when saving at train epoch end.
  void on_train_epoch_end(TrainerView& view) override;
  /// Epoch-based saving after validation (skipped during the sanity check).
  void on_validation_end(TrainerView& view) override;

  /// The path a checkpoint would get for these metrics, epoch and step (a logged
  /// "epoch"/"step" metric wins, as in Lightning); version > 0 appends "-v<version>".
  /// Relative to nothing when dirpath is not resolved yet. Throws ConfigError when the
  /// template names a key that is not in `metrics`.
  std::string format_checkpoint_name(const MetricMap& metrics, int64_t epoch, int64_t step,
                                     int64_t version = 0) const;

  /// The options as given.
  const Options& options() const { return options_; }
  /// Epoch interval after resolving the default (0: off).
  int64_t every_n_epochs() const { return every_n_epochs_; }
  /// Step interval (0: off).
  int64_t every_n_train_steps() const { return options_.every_n_train_steps; }
  /// The checkpoint directory (empty until resolved at setup or the first save).
  const std::string& dirpath() const { return dirpath_; }
  /// Best checkpoint so far (with a monitor), or the latest top-k save without one.
  const std::string& best_model_path() const { return best_model_path_; }
  /// Score of best_model_path (none without a monitor or before the first save).
  std::optional<double> best_model_score() const { return best_model_score_; }
  /// The kept top-k checkpoints and their scores (NaN scores are stored as the worst
  /// value: +inf for "min", -inf for "max").
  std::map<std::string, double> best_k_models() const;
  /// The worst of the kept top-k once there are k of them (the next to be replaced).
  const std::string& kth_best_model_path() const { return kth_best_model_path_; }
  /// Score of kth_best_model_path.
  std::optional<double> kth_value() const { return kth_value_; }
  /// Score of the most recent monitored save.
  std::optional<double> current_score() const { return current_score_; }
  /// The rolling "last" checkpoint (empty without save_last or before the first save).
  const std::string& last_model_path() const { return last_model_path_; }
  /// The "last" checkpoints on disk, as Lightning looks for them for ckpt_path="last":
  /// last_model_path when the file exists, and every "last*.ckpt" in dirpath (once it is
  /// resolved, at setup).
  std::vector<std::string> find_last_checkpoints() const;

 private:
  /// One "{key:spec}" or literal run of the filename template.
  struct Piece {
    bool is_field = false;
    std::string text;  // literal text, or the key of a field
    bool zero_pad = false;
    int width = 0;
    int precision = -1;
    char type = 0;  // 0, 'd', 'f', 'e' or 'g'
  };
  /// A value a template field or the monitor can refer to.
  struct Candidate {
    double value = 0;
    bool is_int = false;
  };
  using Candidates = std::map<std::string, Candidate>;

  static std::vector<Piece> parse_template(const std::string& tmpl, const std::string& what);
  Candidates candidates(const MetricMap& metrics, int64_t epoch, int64_t step) const;
  Candidates candidates(const TrainerView& view) const;
  std::string render(const std::vector<Piece>& pieces, const std::string& tmpl,
                     const Candidates& values, int64_t version) const;
  std::string join_dir(const std::string& name) const;

  void resolve_dirpath(const TrainerView& view);
  void apply_state(const nlohmann::json& state);
  bool skip_saving(const TrainerView& view) const;
  bool save_at_train_epoch_end(const TrainerView& view) const;
  void save_epoch_checkpoints(TrainerView& view);
  void save_topk(TrainerView& view, const Candidates& values, bool at_epoch_boundary);
  void save_without_monitor(TrainerView& view, const Candidates& values);
  bool check_monitor_top_k(TrainerView& view, double current);
  void update_best_and_save(TrainerView& view, double current, const Candidates& values);
  void save_last(TrainerView& view, const Candidates& values);
  std::string free_path(TrainerView& view, const std::vector<Piece>& pieces,
                        const std::string& tmpl, const Candidates& values,
                        const std::string& replaceable);
  bool rank_zero_decides(TrainerView& view, bool decision) const;
  bool is_better(double a, double b) const;
  bool should_remove(const std::string& previous, const std::string& current) const;
  void save(TrainerView& view, const std::string& path);
  void remove(TrainerView& view, const std::string& path);
  std::string missing_monitor_message(const TrainerView& view) const;
  static std::string safetensors_path(const std::string& ckpt_path);

  Options options_;
  int64_t every_n_epochs_ = 1;
  std::string filename_template_;
  std::vector<Piece> filename_pieces_;
  std::vector<Piece> last_pieces_;

  std::string dirpath_;
  bool dirpath_resolved_ = false;
  std::optional<nlohmann::json> pending_state_;

  std::string best_model_path_;
  std::optional<double> best_model_score_;
  // Insertion order breaks ties between equal scores, as Lightning's dict does.
  std::vector<std::pair<std::string, double>> best_k_;
  std::string kth_best_model_path_;
  std::optional<double> kth_value_;
  std::optional<double> current_score_;
  std::string last_model_path_;

  // Saved by this callback and not removed since: these names count as taken.
  std::set<std::string> live_paths_;
  // Lightning starts at 0 so nothing is saved before the first optimizer step.
  int64_t last_global_step_saved_ = 0;
  bool seen_epoch_boundary_ = false;
  bool warned_missing_monitor_ = false;
};

}  // namespace volt::callbacks
