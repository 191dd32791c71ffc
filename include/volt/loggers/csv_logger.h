#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "volt/core/types.h"
#include "volt/loggers/delayed_buffer.h"
#include "volt/loggers/logger.h"

namespace volt::loggers {

/// Writes metrics to `save_dir/name/version_N/metrics.csv` and hyperparameters to
/// `hparams.yaml` beside it (Lightning's CSVLogger). Called on rank 0 only.
///
/// metrics.csv has one row per log_metrics call: the column "step" first, then every
/// metric name in the order it first appeared (names within one call in std::map
/// order). New names are appended as new columns, so existing columns never move; a
/// row lacks a metric as an empty cell. Values are printed as the shortest decimal that
/// reads back as the same double (a metric that was a float32 therefore shows all the
/// digits of its double value, as Lightning's CSV does); NaN and infinities as "nan",
/// "inf", "-inf".
///
/// Rows are buffered in memory and written when `flush_logs_every_n_steps` rows are
/// pending, when the oldest pending row is `max_flush_delay_s` old (default 2 s: a
/// background thread, started on the first row, writes them then, so a process killed
/// with SIGKILL loses at most the last 2 s of rows), and on save() and finalize() (the
/// Trainer calls finalize at the end of every stage, after an exception too, and after a
/// SIGTERM/SIGINT stop). log_metrics itself never writes unless flush_logs_every_n_steps
/// rows are pending: it appends to the buffer under a mutex. A write that fails on the
/// background thread is raised by the next log_metrics, save or finalize.
///
/// The folder version_N is chosen on first use (log_dir(), version()) but created only when
/// the first file is written, so a run refused before it logs anything leaves no folder.
/// Two loggers of one process never choose the same N.
///
/// When no column was added since the last write the rows
/// are appended; otherwise the whole file is rewritten with the wider header through a
/// temporary file in the same folder (fsync, rename), so a reader never sees a file
/// whose rows disagree with its header. An existing metrics.csv in the folder (a
/// resumed run with an explicit version) is continued, with its header kept.
///
/// Call it from one thread (the background writer is internal).
class CSVLogger : public Logger {
 public:
  /// `version`: N of the folder version_N. Without it, N is chosen on first use as one
  /// more than the highest existing save_dir/name/version_K (0 if there is none), and
  /// the folder is created at that moment, so two loggers in one save_dir get two
  /// versions. `flush_logs_every_n_steps` must be at least 1.
  /// `max_flush_delay_s`: longest time a row waits in memory, in (0, 3600].
  explicit CSVLogger(std::string save_dir, std::string name = "lightning_logs",
                     std::optional<int64_t> version = std::nullopt,
                     int64_t flush_logs_every_n_steps = 100, double max_flush_delay_s = 2.0);
  /// Stops the background writer and writes rows still buffered (errors are printed, not
  /// thrown).
  ~CSVLogger() override;

  CSVLogger(const CSVLogger&) = delete;
  CSVLogger& operator=(const CSVLogger&) = delete;

  /// The experiment name given at construction ("lightning_logs").
  std::string name() const override { return name_; }
  /// "version_N"; chooses N on first use (the folder is created by the first write).
  std::string version() override;
  /// save_dir/name/version_N; chooses N on first use (the folder is created by the first
  /// write).
  std::string log_dir() override;
  /// The root folder given at construction.
  const std::string& save_dir() const { return save_dir_; }
  /// log_dir()/metrics.csv (the file may not exist yet).
  std::string metrics_file_path();
  /// log_dir()/hparams.yaml (the file may not exist yet).
  std::string hparams_file_path();

  /// Merges `params` into the hyperparameters seen so far and rewrites hparams.yaml
  /// atomically: one `key: value` line each, in key order, quoted where YAML needs it
  /// (a value such as "0.001" or "true" stays plain, so YAML readers see its type).
  void log_hyperparams(const std::map<std::string, std::string>& params) override;
  /// Buffers the row {step, metrics...}; writes when flush_logs_every_n_steps rows are
  /// pending (the background writer writes older rows after max_flush_delay_s).
  /// A metric named "step" is ignored (the step column holds `step`).
  void log_metrics(const MetricMap& metrics, int64_t step) override;
  /// Writes buffered rows to metrics.csv. Throws volt::Error naming the path and the
  /// OS error when the folder or file cannot be written.
  void save() override;
  /// Writes buffered rows; `status` is not recorded.
  void finalize(const std::string& status) override;
  /// Takes `version` ("version_N") when this logger was given none and has not chosen one.
  void follow_version(const std::string& version) override;

 private:
  using Rows = std::vector<std::pair<int64_t, MetricMap>>;
  const std::string& choose_log_dir();
  void create_log_dir();
  int64_t next_version() const;
  void register_columns(const Rows& rows);
  std::string format_rows(const Rows& rows) const;
  void write_rows(const Rows& rows);
  void write_pending();

  std::string save_dir_;
  std::string name_;
  std::optional<int64_t> version_;
  int64_t flush_every_;
  std::string log_dir_;  // empty until first use
  bool log_dir_created_ = false;
  std::mutex dir_mutex_;  // log_dir_, version_, log_dir_created_

  std::vector<std::string> columns_;  // sorted by name, as Lightning's; file order
  std::unordered_map<std::string, size_t> column_index_;
  std::vector<std::string> disk_columns_;  // the header of metrics.csv as last written or read
  bool existing_file_checked_ = false;
  std::mutex io_mutex_;  // the file and the column state above
  std::map<std::string, std::string> hparams_;

  DelayedBuffer<Rows> pending_{[this] { write_pending(); }};
};

}  // namespace volt::loggers
