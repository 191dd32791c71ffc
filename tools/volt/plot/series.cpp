#include "plot/series.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>
#include <system_error>
#include <utility>

#include "volt/core/error.h"
#include "volt/core/input_file.h"
#include "volt/core/printable.h"
#include "volt/loggers/csv_record.h"
#include "volt/loggers/event_file.h"

namespace fs = std::filesystem;

namespace volt::plot {
namespace {

// A training log of a few million rows is tens of MB; more is not a metrics.csv.
constexpr std::size_t kMaxCsvBytes = std::size_t{1} << 30;

bool is_event_file(const fs::path& path) {
  return path.filename().string().rfind("events.out.tfevents.", 0) == 0;
}

/// The event files directly in `dir`, in name order (TensorBoard's names start with the
/// seconds since 1970, so name order is time order).
std::vector<std::string> event_files_in(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (is_event_file(it->path()) && it->is_regular_file(ec)) out.push_back(it->path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool is_validation_metric(const std::string& name) {
  return name.rfind("val_", 0) == 0 || name.rfind("val/", 0) == 0 || name.rfind("validation", 0) == 0;
}

// One RFC 4180 record starting at pos; pos moves past its line break. `line` counts the
// physical lines consumed (a quoted field may span lines).
std::vector<std::string> next_record(const std::string& text, size_t& pos, int64_t& line, bool& unterminated) {
  loggers::CsvRecord record = loggers::next_csv_record(text, pos);
  line += record.extra_lines;
  unterminated = record.unterminated;
  return std::move(record.fields);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A cell as a double: Volt's writer uses shortest round-trip numbers and nan/inf/-inf; Python's
// writers use the same or NaN/Infinity. Returns false when the cell is not a number.
bool parse_value(const std::string& cell, double& out) {
  const std::string l = lower(cell);
  if (l == "nan" || l == "-nan" || l == "+nan") {
    out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (l == "inf" || l == "+inf" || l == "infinity" || l == "+infinity") {
    out = std::numeric_limits<double>::infinity();
    return true;
  }
  if (l == "-inf" || l == "-infinity") {
    out = -std::numeric_limits<double>::infinity();
    return true;
  }
  if (cell.empty() || std::isspace(static_cast<unsigned char>(cell.front())) ||
      std::isspace(static_cast<unsigned char>(cell.back()))) {
    return false;
  }
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(cell.c_str(), &end);
  if (end != cell.c_str() + cell.size()) return false;
  // Overflow reads as inf (ERANGE), which is what such a value means in a plot: a gap.
  out = v;
  return true;
}

}  // namespace

bool Series::has_finite() const {
  return std::any_of(points.begin(), points.end(), [](const Point& p) { return std::isfinite(p.value); });
}

Run parse_metrics_csv(const std::string& text, const std::string& source, const std::string& label) {
  Run run;
  run.label = label;
  run.source = source;
  const std::string where = in_quotes(source);
  size_t pos = 0;
  int64_t line = 1;
  bool unterminated = false;
  // Skip a UTF-8 byte order mark, which spreadsheet programs write.
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) pos = 3;
  if (pos >= text.size()) {
    throw DataError(where +
                    " is empty; a metrics.csv starts with a header line naming its columns (step, ...). "
                    "Give the folder of a run that has logged metrics.");
  }
  const std::vector<std::string> header = next_record(text, pos, line, unterminated);
  if (unterminated) throw DataError(where + " line 1: the header has an unterminated quoted field.");
  int step_col = -1;
  for (size_t c = 0; c < header.size(); ++c) {
    if (header[c] == "step") step_col = static_cast<int>(c);
  }
  if (step_col < 0) {
    std::string names;
    for (const auto& h : header) names += (names.empty() ? "" : ", ") + printable(h);
    throw DataError(where + " has no 'step' column (its header: " + names +
                    "); volt plot reads metrics.csv files written by Volt's or Lightning's CSVLogger.");
  }
  std::vector<int> series_of(header.size(), -1);
  for (size_t c = 0; c < header.size(); ++c) {
    if (static_cast<int>(c) == step_col) continue;
    if (header[c].empty()) throw DataError(where + " line 1: column " + std::to_string(c + 1) + " has no name.");
    for (size_t d = 0; d < c; ++d) {
      if (header[d] == header[c]) {
        throw DataError(where + " line 1: the column " + in_quotes(header[c]) + " appears twice (columns " +
                        std::to_string(d + 1) + " and " + std::to_string(c + 1) + ").");
      }
    }
    series_of[c] = static_cast<int>(run.series.size());
    run.series.push_back({label, header[c], {}});
  }
  std::vector<bool> is_val_col(header.size());
  for (size_t c = 0; c < header.size(); ++c) is_val_col[c] = is_validation_metric(header[c]);

  while (pos < text.size()) {
    ++line;
    const int64_t record_line = line;
    const std::vector<std::string> cells = next_record(text, pos, line, unterminated);
    if (unterminated) throw DataError(where + " line " + std::to_string(record_line) + ": unterminated quoted field.");
    if (cells.size() == 1 && cells[0].empty()) continue;  // a blank line
    // A run still training: the logger may be appending the last line right now.
    if (pos >= text.size() && text.back() != '\n' && cells.size() < header.size()) break;
    if (cells.size() != header.size()) {
      throw DataError(where + " line " + std::to_string(record_line) + " has " + std::to_string(cells.size()) +
                      " fields but the header has " + std::to_string(header.size()) +
                      "; the file is damaged or was not written by a CSV logger.");
    }
    double step_value = 0;
    const std::string& step_cell = cells[static_cast<size_t>(step_col)];
    if (!parse_value(step_cell, step_value) || !std::isfinite(step_value) || step_value != std::floor(step_value) ||
        std::fabs(step_value) > 9.0e15) {
      throw DataError(where + " line " + std::to_string(record_line) + ": the step " + in_quotes(step_cell) +
                      " is not a whole number.");
    }
    const auto step = static_cast<int64_t>(step_value);
    bool validation_row = false;
    for (size_t c = 0; c < cells.size(); ++c) validation_row = validation_row || (is_val_col[c] && !cells[c].empty());
    for (size_t c = 0; c < cells.size(); ++c) {
      if (series_of[c] < 0 || cells[c].empty()) continue;
      double v = 0;
      if (!parse_value(cells[c], v)) {
        throw DataError(where + " line " + std::to_string(record_line) + ", column " + in_quotes(header[c]) + ": " +
                        in_quotes(cells[c]) + " is not a number.");
      }
      run.series[static_cast<size_t>(series_of[c])].points.push_back({step, v, validation_row || is_val_col[c]});
    }
    ++run.rows;
  }
  return run;
}

std::vector<std::string> metrics_files_of(const std::string& run_dir) {
  if (run_dir.empty()) throw ConfigError("volt plot was given an empty RUN_DIR; give a run's folder.");
  std::error_code ec;
  const fs::file_status st = fs::status(run_dir, ec);
  if (ec || !fs::exists(st)) {
    throw ConfigError("RUN_DIR " + in_quotes(run_dir) + " " + input_file_problem(run_dir) +
                      ". Give a run's folder (the one holding metrics.csv, e.g. "
                      "out/fashion_mnist/lightning_logs/version_0).");
  }
  if (fs::is_regular_file(st)) {
    if (fs::path(run_dir).extension() == ".csv") return {run_dir};
    throw ConfigError("RUN_DIR " + in_quotes(run_dir) +
                      " is a file, not a run's folder or a .csv file. Give the folder "
                      "that holds metrics.csv.");
  }
  if (!fs::is_directory(st)) {
    throw ConfigError("RUN_DIR " + in_quotes(run_dir) + " " + input_file_problem(run_dir) +
                      "; give a run's folder (the one holding metrics.csv).");
  }
  const fs::path own = fs::path(run_dir) / "metrics.csv";
  if (fs::exists(own, ec)) return {own.string()};
  // A TensorBoard run (logger="tensorboard" alone): its event files.
  if (auto events = event_files_in(run_dir); !events.empty()) return events;
  // A logs folder (lightning_logs, or the default_root_dir above it): the runs below it.
  std::vector<std::string> found;
  for (fs::recursive_directory_iterator it(run_dir, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    if (it.depth() > 2) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->path().filename() == "metrics.csv" && it->is_regular_file(ec)) {
      found.push_back(it->path().string());
    } else if (is_event_file(it->path()) && it->is_regular_file(ec) &&
               !fs::exists(it->path().parent_path() / "metrics.csv", ec)) {
      found.push_back(it->path().string());  // a run with event files only
    }
  }
  // version_2 before version_10.
  std::sort(found.begin(), found.end(), [](const std::string& a, const std::string& b) {
    size_t i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
      if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
        size_t ie = i, je = j;
        while (ie < a.size() && std::isdigit(static_cast<unsigned char>(a[ie]))) ++ie;
        while (je < b.size() && std::isdigit(static_cast<unsigned char>(b[je]))) ++je;
        const std::string na = a.substr(i, ie - i), nb = b.substr(j, je - j);
        if (na.size() != nb.size()) return na.size() < nb.size();
        if (na != nb) return na < nb;
        i = ie;
        j = je;
      } else {
        if (a[i] != b[j]) return a[i] < b[j];
        ++i;
        ++j;
      }
    }
    return a.size() - i < b.size() - j;
  });
  if (found.empty()) {
    throw ConfigError("RUN_DIR " + in_quotes(run_dir) +
                      " holds no metrics.csv (nor do the folders up to two levels "
                      "below it). Give a run's folder, e.g. out/fashion_mnist/lightning_logs/version_0, of a run "
                      "trained with the CSV logger.");
  }
  return found;
}

namespace {

Run read_event_run(const std::vector<std::string>& files, const std::string& label) {
  Run run;
  run.label = label;
  run.source = files.size() == 1 ? files.front() : fs::path(files.front()).parent_path().string();
  std::vector<size_t> index_of_tag;
  std::vector<std::string> tags;
  for (const std::string& file : files) {
    std::vector<loggers::ScalarPoint> points;
    try {
      points = loggers::read_event_scalars(file);
    } catch (const Error& e) {
      throw DataError(std::string(e.what()));
    }
    for (const auto& p : points) {
      auto at = std::find(tags.begin(), tags.end(), p.tag);
      size_t k = static_cast<size_t>(at - tags.begin());
      if (at == tags.end()) {
        tags.push_back(p.tag);
        run.series.push_back(Series{label, p.tag, {}});
      }
      run.series[k].points.push_back({p.step, p.value, is_validation_metric(p.tag)});
      ++run.rows;
    }
  }
  return run;
}

}  // namespace

std::vector<Run> load_runs(const std::vector<std::string>& run_dirs) {
  if (run_dirs.empty()) throw ConfigError("volt plot needs at least one RUN_DIR.");
  std::vector<Run> runs;
  for (const std::string& dir : run_dirs) {
    const std::vector<std::string> files = metrics_files_of(dir);
    // Runs are folders: the event files of one folder make one run.
    std::vector<std::string> folders;
    for (const std::string& file : files) {
      const std::string folder = fs::path(file).parent_path().string();
      if (std::find(folders.begin(), folders.end(), folder) == folders.end()) folders.push_back(folder);
    }
    for (size_t f = 0; f < files.size(); ++f) {
      const std::string& file = files[f];
      // The argument as given names a run's folder or a .csv file; runs found below a folder are
      // named by their own folders.
      std::string label = folders.size() == 1 ? dir : fs::path(file).parent_path().string();
      while (label.size() > 1 && label.back() == '/') label.pop_back();
      if (label.empty()) label = ".";
      if (is_event_file(file)) {
        std::vector<std::string> group{file};
        while (f + 1 < files.size() && is_event_file(files[f + 1]) &&
               fs::path(files[f + 1]).parent_path() == fs::path(file).parent_path()) {
          group.push_back(files[++f]);
        }
        runs.push_back(read_event_run(group, label));
        continue;
      }
      std::string text;
      if (const std::string problem = read_input_file(file, text, kMaxCsvBytes); !problem.empty()) {
        throw DataError(in_quotes(file) + " " + problem + ".");
      }
      runs.push_back(parse_metrics_csv(text, file, label));
    }
  }
  return runs;
}

}  // namespace volt::plot
