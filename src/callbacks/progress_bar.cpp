#include "volt/callbacks/progress_bar.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "volt/core/error.h"

namespace volt::callbacks {
namespace {

constexpr int kBarWidth = 10;

int stream_fd(const std::ostream* out) {
  if (out == &std::cout) return STDOUT_FILENO;
  if (out == &std::cerr || out == &std::clog) return STDERR_FILENO;
  return -1;
}

int terminal_columns(const std::ostream* out) {
  const int fd = stream_fd(out);
  winsize ws{};
  if (fd < 0 || ::ioctl(fd, TIOCGWINSZ, &ws) != 0) return 0;
  return ws.ws_col;
}

double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0 || s > 360000.0 * 24) return "?";
  const auto total = static_cast<int64_t>(s);
  char buf[32];
  if (total >= 3600) {
    std::snprintf(buf, sizeof(buf), "%lld:%02d:%02d", static_cast<long long>(total / 3600),
                  static_cast<int>(total / 60 % 60), static_cast<int>(total % 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%02d:%02d", static_cast<int>(total / 60),
                  static_cast<int>(total % 60));
  }
  return buf;
}

// tqdm switches to seconds per iteration below one iteration per second.
std::string format_rate(int64_t seen, double elapsed, const char* space) {
  char buf[48];
  if (seen <= 0 || elapsed <= 0) {
    std::snprintf(buf, sizeof(buf), "?%sit/s", space);
  } else if (seen >= elapsed) {
    std::snprintf(buf, sizeof(buf), "%.1f%sit/s", static_cast<double>(seen) / elapsed, space);
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f%ss/it", elapsed / static_cast<double>(seen), space);
  }
  return buf;
}

std::string format_metrics(const MetricMap& metrics, const char* separator) {
  std::string out;
  char buf[48];
  for (const auto& [name, value] : metrics) {
    std::snprintf(buf, sizeof(buf), "%.3g", value);
    out += separator + name + "=" + buf;
  }
  return out;
}

// Eighths of a cell, as tqdm draws them.
std::string bar_cells(int64_t n, int64_t total) {
  static const char* const kPartial[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
  const int64_t eighths =
      std::min<int64_t>(kBarWidth * 8, n <= 0 ? 0 : n * kBarWidth * 8 / total);
  std::string out;
  for (int64_t i = 0; i < eighths / 8; ++i) out += "█";
  int cells = static_cast<int>(eighths / 8);
  if (eighths % 8 != 0) {
    out += kPartial[eighths % 8];
    ++cells;
  }
  out.append(static_cast<size_t>(kBarWidth - cells), ' ');
  return out;
}

// "Epoch 2/9  45%|████▌     | 423/938 [00:07<00:08, 58.3it/s, loss=0.412]"
std::string tty_text(const std::string& label, int64_t n, int64_t total, int64_t seen,
                     double elapsed, const MetricMap* metrics) {
  char buf[96];
  std::string text = label;
  const std::string rate = format_rate(seen, elapsed, "");
  if (total > 0) {
    const int64_t shown = std::min(n, total);
    const double per_batch = seen > 0 ? elapsed / static_cast<double>(seen) : 0.0;
    const double eta = per_batch > 0 ? static_cast<double>(total - shown) * per_batch : -1.0;
    std::snprintf(buf, sizeof(buf), " %3d%%|", static_cast<int>(shown * 100 / total));
    text += buf + bar_cells(shown, total) + "| ";
    text += std::to_string(n) + "/" + std::to_string(total) + " [" + format_duration(elapsed) +
            "<" + format_duration(eta) + ", " + rate;
  } else {
    text += " " + std::to_string(n) + "it [" + format_duration(elapsed) + ", " + rate;
  }
  if (metrics != nullptr) text += format_metrics(*metrics, ", ");
  return text + "]";
}

std::string epoch_label(const TrainerState& state, const char* word) {
  std::string label = std::string(word) + " " + std::to_string(state.current_epoch);
  if (state.max_epochs > 0) label += "/" + std::to_string(state.max_epochs - 1);
  return label;
}

// A loader without a length (kInfiniteBatches): the bar shows no total, as tqdm without len().
int64_t known_total(int64_t total) { return total == kInfiniteBatches ? 0 : total; }

std::string count_text(int64_t n, int64_t total) {
  return total > 0 ? std::to_string(n) + "/" + std::to_string(total) : std::to_string(n);
}

// Cuts to `columns` characters (UTF-8 code points) so a redraw never wraps, which
// would leave the '\r' on the wrong row.
void truncate_columns(std::string& text, int columns) {
  if (columns <= 0) return;
  int count = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) continue;
    if (++count > columns) {
      text.resize(i);
      return;
    }
  }
}

}  // namespace

ProgressBar::ProgressBar(ProgressBarOptions options) : options_(std::move(options)) {
  if (options_.refresh_rate < 0) {
    throw ConfigError("ProgressBar got refresh_rate=" + std::to_string(options_.refresh_rate) +
                      "; use 0 to disable the bar or a positive number of batches.");
  }
  if (options_.line_every_n_steps < 1) {
    throw ConfigError("ProgressBar got line_every_n_steps=" +
                      std::to_string(options_.line_every_n_steps) +
                      "; it must be at least 1.");
  }
  if (!(options_.min_redraw_seconds >= 0)) {
    throw ConfigError("ProgressBar got min_redraw_seconds=" +
                      std::to_string(options_.min_redraw_seconds) + "; it must be >= 0.");
  }
  if (options_.out == nullptr) throw ConfigError("ProgressBar got a null output stream.");
  if (options_.force_tty) {
    tty_ = *options_.force_tty;
  } else {
    const int fd = stream_fd(options_.out);
    tty_ = fd >= 0 && ::isatty(fd);
  }
  min_redraw_ = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options_.min_redraw_seconds));
}

bool ProgressBar::due(Bar& bar, int64_t n, int64_t total, Clock::time_point* now) const {
  const bool last = n == total;
  if (n % options_.refresh_rate != 0 && !last) return false;
  *now = Clock::now();
  return last || *now - bar.last_draw >= min_redraw_;
}

void ProgressBar::write_in_place(const std::string& text) {
  std::string line = text;
  truncate_columns(line, columns_ - 1);
  *options_.out << '\r' << line << "\x1b[K" << std::flush;
}

// ---- training ----

void ProgressBar::on_train_epoch_start(TrainerView& view) {
  if (!is_enabled() || !view.state().is_global_zero) return;
  if (tty_ && train_.on_screen) *options_.out << '\n';  // an epoch that never ended
  train_ = Bar{};
  train_.start = Clock::now();
  if (tty_) {
    columns_ = terminal_columns(options_.out);
    draw_train(view, train_.start);
  }
}

void ProgressBar::on_train_batch_end(TrainerView& view, const at::Tensor& /*loss*/,
                                     const Batch& /*batch*/, int64_t batch_idx) {
  if (!is_enabled()) return;
  const TrainerState& state = view.state();
  if (!state.is_global_zero) return;
  const int64_t n = batch_idx + 1;
  train_.n = n;
  ++train_.seen;
  Clock::time_point now;
  if (tty_) {
    if (due(train_, n, state.num_training_batches, &now)) draw_train(view, now);
  } else if (n % options_.line_every_n_steps == 0 && n != state.num_training_batches) {
    print_train_line(view, Clock::now());
  }
}

void ProgressBar::on_train_epoch_end(TrainerView& view) {
  if (!is_enabled() || !view.state().is_global_zero) return;
  const auto now = Clock::now();
  if (tty_) {
    if (!train_.on_screen) return;
    draw_train(view, now);
    *options_.out << '\n' << std::flush;
    train_.on_screen = false;
  } else if (train_.seen > 0) {
    print_train_line(view, now);
  }
}

void ProgressBar::on_train_end(TrainerView& view) {
  if (!is_enabled() || !view.state().is_global_zero) return;
  if (tty_ && train_.on_screen) *options_.out << '\n' << std::flush;
  train_.on_screen = false;
}

void ProgressBar::draw_train(const TrainerView& view, Clock::time_point now) {
  const TrainerState& state = view.state();
  write_in_place(tty_text(epoch_label(state, "Epoch"), train_.n, known_total(state.num_training_batches),
                          train_.seen, seconds(now - train_.start),
                          &view.progress_bar_metrics()));
  train_.last_draw = now;
  train_.on_screen = true;
}

void ProgressBar::print_train_line(const TrainerView& view, Clock::time_point now) {
  const TrainerState& state = view.state();
  *options_.out << epoch_label(state, "epoch") << " step "
                << count_text(train_.n, known_total(state.num_training_batches)) << ' '
                << format_rate(train_.seen, seconds(now - train_.start), " ")
                << format_metrics(view.progress_bar_metrics(), " ") << '\n'
                << std::flush;
}

// ---- evaluation ----

int64_t ProgressBar::eval_total(const TrainerView& view) const {
  const TrainerState& state = view.state();
  if (state.num_eval_batches > 0) return known_total(state.num_eval_batches);
  return eval_validation_ ? known_total(state.num_val_batches) : 0;
}

void ProgressBar::begin_eval(const TrainerView& view, const char* label, const char* plain_label,
                             bool transient, bool print_plain) {
  eval_ = Bar{};
  eval_.start = Clock::now();
  eval_label_ = label;
  eval_plain_label_ = plain_label;
  eval_active_ = true;
  eval_transient_ = transient;
  eval_print_plain_ = print_plain;
  eval_below_train_ = false;
  if (!tty_) return;
  columns_ = terminal_columns(options_.out);
  if (train_.on_screen) {
    *options_.out << '\n';
    eval_below_train_ = true;
  }
  draw_eval(view, eval_.start);
}

void ProgressBar::eval_batch(const TrainerView& view, int64_t batch_idx) {
  if (!eval_active_) return;
  eval_.n = batch_idx + 1;
  ++eval_.seen;
  Clock::time_point now;
  if (tty_ && due(eval_, eval_.n, eval_total(view), &now)) draw_eval(view, now);
}

void ProgressBar::draw_eval(const TrainerView& view, Clock::time_point now) {
  write_in_place(tty_text(eval_label_, eval_.n, eval_total(view), eval_.seen,
                          seconds(now - eval_.start), nullptr));
  eval_.last_draw = now;
  eval_.on_screen = true;
}

void ProgressBar::end_eval(const TrainerView& view) {
  if (!eval_active_) return;
  eval_active_ = false;
  const auto now = Clock::now();
  if (tty_) {
    if (!eval_.on_screen) return;
    if (eval_transient_) {
      // Remove the line and go back up to the training line, as tqdm's leave=False.
      *options_.out << "\r\x1b[K" << (eval_below_train_ ? "\x1b[A" : "") << std::flush;
    } else {
      draw_eval(view, now);
      *options_.out << '\n' << std::flush;
    }
    eval_.on_screen = false;
    return;
  }
  if (!eval_print_plain_) return;
  const TrainerState& state = view.state();
  *options_.out << eval_plain_label_;
  if (state.fn == TrainerFn::kFitting) *options_.out << " epoch " << state.current_epoch;
  *options_.out << " batch " << count_text(eval_.n, eval_total(view)) << ' '
                << format_rate(eval_.seen, seconds(now - eval_.start), " ")
                << format_metrics(view.progress_bar_metrics(), " ") << '\n'
                << std::flush;
}

void ProgressBar::on_validation_start(TrainerView& view) {
  if (!is_enabled() || !view.state().is_global_zero) return;
  const TrainerState& state = view.state();
  const bool sanity = state.sanity_checking || state.stage == RunningStage::kSanityChecking;
  eval_validation_ = true;
  begin_eval(view, sanity ? "Sanity Checking" : "Validation", "validation",
             /*transient=*/state.fn == TrainerFn::kFitting, /*print_plain=*/!sanity);
}

void ProgressBar::on_validation_batch_end(TrainerView& view, const Batch& /*batch*/,
                                          int64_t batch_idx) {
  if (!is_enabled() || !view.state().is_global_zero) return;
  eval_batch(view, batch_idx);
}

void ProgressBar::on_validation_end(TrainerView& view) {
  if (!is_enabled() || !view.state().is_global_zero) return;
  end_eval(view);
}

void ProgressBar::on_test_start(TrainerView& view) {
  if (!is_enabled() || !view.state().is_global_zero) return;
  eval_validation_ = false;
  begin_eval(view, "Testing", "test", /*transient=*/false, /*print_plain=*/true);
}

void ProgressBar::on_test_batch_end(TrainerView& view, const Batch& /*batch*/,
                                    int64_t batch_idx) {
  if (!is_enabled() || !view.state().is_global_zero) return;
  eval_batch(view, batch_idx);
}

void ProgressBar::on_test_end(TrainerView& view) {
  if (!is_enabled() || !view.state().is_global_zero) return;
  end_eval(view);
}

void ProgressBar::on_predict_start(TrainerView& view) {
  if (!is_enabled() || !view.state().is_global_zero) return;
  eval_validation_ = false;
  begin_eval(view, "Predicting", "predict", /*transient=*/false, /*print_plain=*/true);
}

void ProgressBar::on_predict_batch_end(TrainerView& view, const Batch& /*batch*/,
                                       int64_t batch_idx) {
  if (!is_enabled() || !view.state().is_global_zero) return;
  eval_batch(view, batch_idx);
}

void ProgressBar::on_predict_end(TrainerView& view) {
  if (!is_enabled() || !view.state().is_global_zero) return;
  end_eval(view);
}

void ProgressBar::on_exception(TrainerView& view, const std::exception& /*error*/) {
  if (!is_enabled() || !view.state().is_global_zero) return;
  if (tty_ && (train_.on_screen || eval_.on_screen)) *options_.out << '\n' << std::flush;
  train_.on_screen = false;
  eval_.on_screen = false;
  eval_active_ = false;
}

}  // namespace volt::callbacks
