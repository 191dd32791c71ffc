#pragma once
// What `volt plot` draws, apart from where it came from: one series per (run, metric), each a
// list of (step, value) points. Loading (metrics.csv today; event files can be a second source of
// the same Series) is separate from drawing (figure.h).
#include <cstdint>
#include <string>
#include <vector>

namespace volt::plot {

/// One logged value. Non-finite values are kept (they become gaps when drawn).
struct Point {
  int64_t step = 0;
  double value = 0.0;
  /// Logged at validation: the metric is named val_* or its row holds a val_* metric.
  bool validation = false;
};

/// The values of one metric in one run, in file order.
struct Series {
  std::string run;     ///< the run's label (its folder as given)
  std::string metric;  ///< the column / tag name
  std::vector<Point> points;
  /// True when at least one value is finite.
  bool has_finite() const;
};

/// Everything read from one run.
struct Run {
  std::string label;           ///< shown in the legend
  std::string source;          ///< the file the values came from
  int64_t rows = 0;            ///< records read
  std::vector<Series> series;  ///< one per metric column except step (file's column order)
};

/// Parses a metrics.csv in Volt's (and Lightning's) CSVLogger layout: a header with a "step"
/// column and metric columns, one row per log call, empty cells where a metric was not logged,
/// "nan"/"inf" for non-finite values. `source` names the file in errors. Throws volt::DataError
/// naming the file, line and column for a malformed record (ragged row, a cell that is not a
/// number, a missing step column).
Run parse_metrics_csv(const std::string& text, const std::string& source, const std::string& label);

/// The metrics.csv a RUN_DIR argument stands for: RUN_DIR/metrics.csv, or RUN_DIR itself when it
/// is a .csv file. A folder without one but with runs below it (lightning_logs/version_N) gives
/// each of them, in version order. Throws volt::ConfigError saying what was found instead.
std::vector<std::string> metrics_files_of(const std::string& run_dir);

/// Reads every RUN_DIR (see metrics_files_of) into runs, checking all of them before returning.
std::vector<Run> load_runs(const std::vector<std::string>& run_dirs);

}  // namespace volt::plot
