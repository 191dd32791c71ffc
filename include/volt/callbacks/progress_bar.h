#pragma once
#include <chrono>
#include <cstdint>
#include <iostream>
#include <optional>
#include <string>

#include "volt/callbacks/callback.h"

namespace volt::callbacks {

/// Settings of ProgressBar.
struct ProgressBarOptions {
  /// On a terminal, consider a redraw every `refresh_rate` batches (and always at the
  /// last batch); 0 disables the bar entirely. Not used when the output is not a terminal.
  int64_t refresh_rate = 1;
  /// Where to draw (Lightning draws on stdout). Must outlive the callback.
  std::ostream* out = &std::cout;
  /// Draw as on a terminal (true) or as plain lines (false). Default: whether `out` is
  /// std::cout / std::cerr / std::clog and that file descriptor is a terminal; any other
  /// stream counts as not a terminal.
  std::optional<bool> force_tty;
  /// Not a terminal: print a line every this many training batches (and at epoch end).
  int64_t line_every_n_steps = 50;
  /// On a terminal, redraw at most this often (seconds of wall time), except at the
  /// first and last batch of an epoch or evaluation run.
  double min_redraw_seconds = 0.1;
};

/// Lightning's TQDMProgressBar. Draws on rank 0 only (state().is_global_zero).
///
/// On a terminal one line per training epoch is redrawn in place ('\r', then clear to
/// end of line) and ends with a newline at epoch end:
///
///     Epoch 2/9  45%|████▌     | 423/938 [00:07<00:08, 58.3it/s, loss=0.412, val_acc=0.871]
///
/// The epoch is 0-based, shown over max_epochs - 1 as Lightning's RichProgressBar does
/// (the last of 10 epochs is "Epoch 9/9"); without max_epochs (-1) only "Epoch 2".
/// it/s is over the epoch so far, the ETA follows from it; metrics are
/// progress_bar_metrics() printed with 3 significant digits. Validation during fit
/// draws a "Validation" (or "Sanity Checking") line below it and removes it when done;
/// a standalone validate/test/predict run ("Validation", "Testing", "Predicting")
/// leaves its line.
///
/// Not a terminal (a log file, a pipe), plain lines instead:
///
///     epoch 2/9 step 423/938 58.3 it/s loss=0.412 val_acc=0.871
///
/// every line_every_n_steps training batches and at epoch end, and one line per
/// validation, test or predict run ("validation epoch 2 batch 10/10 120.1 it/s
/// val_acc=0.871"; sanity checks print nothing).
///
/// Per training batch the bar does an integer check and, at most, one steady_clock
/// read; text is formatted only when drawn.
class ProgressBar : public Callback {
 public:
  /// Throws volt::ConfigError for a negative refresh_rate, line_every_n_steps < 1,
  /// a negative min_redraw_seconds or a null `out`.
  explicit ProgressBar(ProgressBarOptions options = {});

  /// "ProgressBar".
  std::string state_key() const override { return "ProgressBar"; }
  /// Whether lines are redrawn in place (the resolved force_tty).
  bool is_tty() const { return tty_; }
  /// False when refresh_rate is 0.
  bool is_enabled() const { return options_.refresh_rate > 0; }

  /// Starts the epoch's clock; on a terminal draws the line at 0%.
  void on_train_epoch_start(TrainerView& view) override;
  /// Redraws (terminal) or prints a line (every line_every_n_steps) when due.
  void on_train_batch_end(TrainerView& view, const at::Tensor& loss, const Batch& batch,
                          int64_t batch_idx) override;
  /// Final redraw and newline (terminal) or the epoch's last line.
  void on_train_epoch_end(TrainerView& view) override;
  /// Ends a line left open when training stops mid-epoch.
  void on_train_end(TrainerView& view) override;

  void on_validation_start(TrainerView& view) override;
  void on_validation_batch_end(TrainerView& view, const Batch& batch, int64_t batch_idx) override;
  void on_validation_end(TrainerView& view) override;
  void on_test_start(TrainerView& view) override;
  void on_test_batch_end(TrainerView& view, const Batch& batch, int64_t batch_idx) override;
  void on_test_end(TrainerView& view) override;
  void on_predict_start(TrainerView& view) override;
  void on_predict_batch_end(TrainerView& view, const Batch& batch, int64_t batch_idx) override;
  void on_predict_end(TrainerView& view) override;
  /// Ends an open line so the error message starts on its own.
  void on_exception(TrainerView& view, const std::exception& error) override;

 private:
  using Clock = std::chrono::steady_clock;

  // Progress of one bar (the training epoch or the current evaluation run).
  struct Bar {
    int64_t n = 0;     // position: batch_idx + 1 of the last batch
    int64_t seen = 0;  // batches seen by this process (the rate's numerator)
    Clock::time_point start;
    Clock::time_point last_draw;
    bool on_screen = false;  // terminal: the line is drawn and not yet ended
  };

  bool due(Bar& bar, int64_t n, int64_t total, Clock::time_point* now) const;
  void draw_train(const TrainerView& view, Clock::time_point now);
  void print_train_line(const TrainerView& view, Clock::time_point now);
  void begin_eval(const TrainerView& view, const char* label, const char* plain_label,
                  bool transient, bool print_plain);
  void eval_batch(const TrainerView& view, int64_t batch_idx);
  void end_eval(const TrainerView& view);
  void draw_eval(const TrainerView& view, Clock::time_point now);
  int64_t eval_total(const TrainerView& view) const;
  void write_in_place(const std::string& text);

  ProgressBarOptions options_;
  bool tty_;
  Clock::duration min_redraw_;
  int columns_ = 0;  // terminal width, 0 when unknown

  Bar train_;
  Bar eval_;
  std::string eval_label_;
  std::string eval_plain_label_;
  bool eval_active_ = false;
  bool eval_transient_ = false;
  bool eval_print_plain_ = false;
  bool eval_validation_ = false;  // totals may come from num_val_batches
  bool eval_below_train_ = false;  // terminal: eval line was opened under the train line
};

}  // namespace volt::callbacks
