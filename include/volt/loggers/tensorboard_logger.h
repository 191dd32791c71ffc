#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "volt/core/types.h"
#include "volt/loggers/delayed_buffer.h"
#include "volt/loggers/logger.h"

namespace volt::loggers {

/// Writes a TensorBoard event file into `save_dir/name/version_N/` (Lightning's
/// TensorBoardLogger layout), named as TensorBoard names them:
/// `events.out.tfevents.<seconds>.<host>.<pid>.<n>` (n counts the files this process
/// opened). Records are TFRecords (length, masked CRC-32C of the length, an Event
/// protocol buffer, masked CRC-32C of the data); the first is the file_version event
/// "brain.Event:2". Called on rank 0 only (the Trainer's LoggerConnector sees to it).
///
/// - log_metrics: one Event per call, a simple_value per metric (SCALARS tab).
/// - log_hyperparams: the HParams plugin's session_start_info (values that read as
///   numbers or booleans keep that type); at the first finalize the experiment summary
///   (the hyperparameters and, as metrics, every scalar tag logged so far) and
///   session_end_info with the status: the HPARAMS tab lists the run with its final
///   metrics. TensorBoard keeps the first summary of each tag, so a later fit of the same
///   logger does not change them.
/// - log_text: the text plugin (a string tensor); log_histogram: a HistogramProto of 30
///   linear buckets (non-finite values left out); log_image: Summary.Image with a PNG
///   (libpng).
///
/// Events are buffered in memory and appended to the file at the latest
/// `max_flush_delay_s` (default 2 s) after the oldest was logged (a background thread,
/// started with the first event), when 4 MiB are pending, on save() and on finalize()
/// (the Trainer calls it at every stage end, after an exception, and after a SIGTERM or
/// SIGINT stop), which also fsyncs the file. A process killed with SIGKILL loses at most
/// the last 2 s. A write that fails on the background thread is raised by the next call.
///
/// The version folder is chosen on first use (log_dir(), version()) and created by the
/// first write; two TensorBoardLoggers of one process never choose the same N; a logger
/// following another (follow_version) takes its N.
class TensorBoardLogger : public Logger {
 public:
  /// `version`: N of version_N; without it, one more than the highest existing
  /// version_K under save_dir/name (0 if none). `max_flush_delay_s` in (0, 3600].
  explicit TensorBoardLogger(std::string save_dir, std::string name = "lightning_logs",
                             std::optional<int64_t> version = std::nullopt, double max_flush_delay_s = 2.0);
  /// Stops the background writer and writes what is buffered (errors are printed).
  ~TensorBoardLogger() override;
  TensorBoardLogger(const TensorBoardLogger&) = delete;
  TensorBoardLogger& operator=(const TensorBoardLogger&) = delete;

  std::string name() const override { return name_; }
  /// "version_N"; chooses N on first use.
  std::string version() override;
  /// save_dir/name/version_N; chooses N on first use.
  std::string log_dir() override;
  const std::string& save_dir() const { return save_dir_; }
  /// The event file's path; empty until the first write creates it.
  std::string event_file_path() const;

  void log_hyperparams(const std::map<std::string, std::string>& params) override;
  /// Lightning's log_hyperparams(params, metrics): the metrics are logged as scalars at
  /// step 0, so the HPARAMS tab shows them for this run.
  void log_hyperparams(const std::map<std::string, std::string>& params, const MetricMap& metrics);
  void log_metrics(const MetricMap& metrics, int64_t step) override;
  void log_text(const std::string& tag, const std::string& text, int64_t step) override;
  /// Throws ConfigError for an undefined tensor. A tensor without any finite value logs
  /// nothing (a warning once per tag).
  void log_histogram(const std::string& tag, const at::Tensor& values, int64_t step) override;
  /// `image`: float or double [C,H,W] in [0,1] (clipped), or uint8 [C,H,W]; C is 1, 3 or 4;
  /// a [H,W] tensor is one grey channel. Anything else, or NaN pixels: ConfigError.
  void log_image(const std::string& tag, const at::Tensor& image, int64_t step) override;
  /// Appends buffered events to the event file.
  void save() override;
  /// Writes the hparams experiment and session end (first call only), the buffered
  /// events, and fsyncs the file.
  void finalize(const std::string& status) override;
  void follow_version(const std::string& version) override;

 private:
  const std::string& choose_log_dir();
  void add_record(const std::string& event);
  void write_pending();
  void open_file();

  std::string save_dir_;
  std::string name_;
  std::optional<int64_t> version_;
  mutable std::mutex dir_mutex_;  // version_, log_dir_, file_path_, log_dir_created_
  std::string log_dir_;
  std::string file_path_;
  bool log_dir_created_ = false;

  std::mutex io_mutex_;  // fd_
  int fd_ = -1;

  std::mutex state_mutex_;  // the hparams state below (calls come from one thread, the flusher does not touch it)
  std::map<std::string, std::string> hparams_;
  bool session_started_ = false;
  bool session_ended_ = false;
  std::set<std::string> scalar_tags_;
  std::set<std::string> warned_tags_;

  DelayedBuffer<std::string> pending_{[this] { write_pending(); }};  // framed records
};

}  // namespace volt::loggers
