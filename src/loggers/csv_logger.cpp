#include "volt/loggers/csv_logger.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <set>
#include <system_error>

#include <yaml-cpp/yaml.h>

#include "volt/core/error.h"
#include "volt/loggers/csv_record.h"
#include "loggers/detail/write_fully.h"
#include "volt/core/file_check.h"
#include "loggers/detail/version_claims.h"

namespace fs = std::filesystem;

namespace volt::loggers {
namespace {

constexpr const char* kMetricsFile = "metrics.csv";
constexpr const char* kHparamsFile = "hparams.yaml";
constexpr const char* kStepColumn = "step";

[[noreturn]] void throw_os_error(const std::string& what, const std::string& path, int err) {
  throw Error("CSVLogger cannot " + what + " '" + path + "': " + std::strerror(err) +
              ". Give CSVLogger a save_dir in a writable folder.");
}

void write_all_or_throw(int fd, const std::string& data, const std::string& path) {
  if (detail::write_fully(fd, data.data(), data.size())) return;
  const int err = errno;
  ::close(fd);
  throw_os_error("write", path, err);
}

void fsync_dir(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: some filesystems refuse to open folders
  ::fsync(fd);
  ::close(fd);
}

// Readers of the file (a plotting script, `tail`) must see either the old or the new
// contents, never a half-written header.
void write_file_atomically(const fs::path& path, const std::string& content) {
  const fs::path tmp =
      path.parent_path() / ("." + path.filename().string() + ".tmp." + std::to_string(::getpid()));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_os_error("create", tmp.string(), errno);
  write_all_or_throw(fd, content, tmp.string());
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw_os_error("flush", tmp.string(), err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw_os_error("rename a temporary file onto", path.string(), err);
  }
  fsync_dir(path.parent_path());
}

// metrics.csv must be a regular file: a FIFO or device there would block open() or swallow
// the rows. O_NONBLOCK keeps open() of a FIFO from waiting; fstat then refuses it.
int open_regular(const fs::path& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return fd;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error("CSVLogger cannot use " + quote_path(path.string()) + ": it is " +
                describe(file_kind(path.string())) + ", not a regular file. Remove it, or give CSVLogger another "
                "save_dir or version.");
  }
  ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

// Returns false when the file is gone (deleted behind our back): the caller then
// writes it whole.
bool append_to_file(const fs::path& path, const std::string& content) {
  const int fd = open_regular(path, O_WRONLY | O_APPEND);
  if (fd < 0) {
    if (errno == ENOENT) return false;
    throw_os_error("open", path.string(), errno);
  }
  write_all_or_throw(fd, content, path.string());
  if (::close(fd) != 0) throw_os_error("write", path.string(), errno);
  return true;
}

std::optional<std::string> read_file(const fs::path& path) {
  const int fd = open_regular(path, O_RDONLY);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    throw_os_error("read", path.string(), errno);
  }
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw_os_error("read", path.string(), err);
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::vector<std::string> parse_csv_record(const std::string& text, size_t& pos) {
  return next_csv_record(text, pos).fields;
}

std::string format_value(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
#if defined(__cpp_lib_to_chars)
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, result.ptr);
#else
  // 17 significant digits always read back as the same double, if not the shortest way.
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
#endif
}

}  // namespace

namespace {

// Version folders chosen by loggers of this process (of every kind) but not created yet: two
// loggers in one save_dir must not choose the same one.
std::multiset<std::string>& claimed_dirs() { return detail::version_claims(); }

}  // namespace

CSVLogger::CSVLogger(std::string save_dir, std::string name, std::optional<int64_t> version,
                     int64_t flush_logs_every_n_steps, double max_flush_delay_s)
    : save_dir_(std::move(save_dir)),
      name_(std::move(name)),
      version_(version),
      flush_every_(flush_logs_every_n_steps) {
  if (flush_every_ < 1) {
    throw ConfigError("CSVLogger got flush_logs_every_n_steps=" + std::to_string(flush_every_) +
                      "; it must be at least 1 (1 writes after every log_metrics call).");
  }
  if (!(max_flush_delay_s > 0.0 && max_flush_delay_s <= 3600.0)) {
    throw ConfigError("CSVLogger got max_flush_delay_s=" + std::to_string(max_flush_delay_s) +
                      "; give seconds in (0, 3600] (default 2).");
  }
  if (version_ && *version_ < 0) {
    throw ConfigError("CSVLogger got version=" + std::to_string(*version_) +
                      "; versions are non-negative. Omit it to take the next free one.");
  }
  if (const std::string why = folder_problem(save_dir_, "CSVLogger save_dir", "Give a folder."); !why.empty()) {
    throw ConfigError(why);
  }
  pending_.set_max_delay(std::chrono::duration<double>(max_flush_delay_s));
  columns_.push_back(kStepColumn);
  column_index_[kStepColumn] = 0;
}

CSVLogger::~CSVLogger() {
  pending_.stop();
  if (const size_t left = pending_.size(); left > 0) {
    try {
      save();
    } catch (const std::exception& e) {
      // A destructor must not throw; losing rows silently would be worse than a message.
      std::cerr << "warning: CSVLogger dropped " << left << " unsaved rows: " << e.what() << "\n";
    }
  }
  if (!log_dir_created_ && !log_dir_.empty()) detail::release_version_claim(log_dir_);
}

int64_t CSVLogger::next_version() const {
  const fs::path root = fs::path(save_dir_) / name_;
  int64_t next = 0;
  std::error_code ec;
  if (fs::is_directory(root, ec)) {
    for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string dir = it->path().filename().string();
      if (dir.rfind("version_", 0) != 0 || !it->is_directory(ec)) continue;
      const char* first = dir.data() + 8;
      const char* last = dir.data() + dir.size();
      int64_t k = 0;
      const auto parsed = std::from_chars(first, last, k);
      if (first == last || parsed.ec != std::errc() || parsed.ptr != last || k < 0) continue;
      next = std::max(next, k + 1);
    }
  }
  // Skip the versions other loggers of this process chose and have not created yet.
  while (claimed_dirs().count((root / ("version_" + std::to_string(next))).string())) ++next;
  return next;
}

const std::string& CSVLogger::choose_log_dir() {
  std::lock_guard<std::mutex> lock(dir_mutex_);
  if (!log_dir_.empty()) return log_dir_;
  const fs::path root = fs::path(save_dir_) / name_;
  std::lock_guard<std::mutex> claims(detail::version_claims_mutex());
  if (!version_) version_ = next_version();
  log_dir_ = (root / ("version_" + std::to_string(*version_))).string();
  claimed_dirs().insert(log_dir_);
  return log_dir_;
}

void CSVLogger::create_log_dir() {
  choose_log_dir();
  std::lock_guard<std::mutex> lock(dir_mutex_);
  if (log_dir_created_) return;
  if (const std::string why = folder_problem(log_dir_, "CSVLogger folder", "Give CSVLogger a save_dir that is a folder.");
      !why.empty()) {
    throw Error(why);
  }
  std::error_code ec;
  fs::create_directories(log_dir_, ec);
  if (ec) throw_os_error("create the folder", log_dir_, ec.value());
  log_dir_created_ = true;
}

std::string CSVLogger::version() {
  choose_log_dir();
  return "version_" + std::to_string(*version_);
}

std::string CSVLogger::log_dir() { return choose_log_dir(); }

std::string CSVLogger::metrics_file_path() {
  return (fs::path(choose_log_dir()) / kMetricsFile).string();
}

std::string CSVLogger::hparams_file_path() {
  return (fs::path(choose_log_dir()) / kHparamsFile).string();
}

void CSVLogger::log_hyperparams(const std::map<std::string, std::string>& params) {
  std::lock_guard<std::mutex> lock(io_mutex_);
  for (const auto& [key, value] : params) hparams_[key] = value;
  YAML::Emitter out;
  out << YAML::BeginMap;
  for (const auto& [key, value] : hparams_) out << YAML::Key << key << YAML::Value << value;
  out << YAML::EndMap;
  create_log_dir();
  write_file_atomically(hparams_file_path(), std::string(out.c_str()) + "\n");
}

void CSVLogger::log_metrics(const MetricMap& metrics, int64_t step) {
  const bool write_now = pending_.add([&](Rows& rows) {
    rows.emplace_back(step, metrics);
    return static_cast<int64_t>(rows.size()) >= flush_every_;
  });
  if (write_now) save();
}

void CSVLogger::finalize(const std::string& /*status*/) { save(); }

void CSVLogger::follow_version(const std::string& version) {
  std::lock_guard<std::mutex> lock(dir_mutex_);
  if (version_ || !log_dir_.empty() || version.rfind("version_", 0) != 0) return;
  const char* first = version.data() + 8;
  const char* last = version.data() + version.size();
  int64_t n = -1;
  const auto parsed = std::from_chars(first, last, n);
  if (first != last && parsed.ec == std::errc() && parsed.ptr == last && n >= 0) version_ = n;
}

void CSVLogger::register_columns(const Rows& rows) {
  bool added = false;
  for (const auto& row : rows) {
    for (const auto& entry : row.second) {
      if (column_index_.emplace(entry.first, columns_.size()).second) {
        columns_.push_back(entry.first);
        added = true;
      }
    }
  }
  if (!added) return;
  // Lightning's CSV writer keeps every column, "epoch" and "step" among them, sorted by name.
  std::sort(columns_.begin(), columns_.end());
  for (size_t i = 0; i < columns_.size(); ++i) column_index_[columns_[i]] = i;
}

std::string CSVLogger::format_rows(const Rows& rows) const {
  std::string out;
  std::vector<std::string> cells(columns_.size());
  const size_t step_col = column_index_.at(kStepColumn);
  for (const auto& [step, metrics] : rows) {
    for (auto& cell : cells) cell.clear();
    cells[step_col] = std::to_string(step);
    for (const auto& [key, value] : metrics) {
      if (key != kStepColumn) cells[column_index_.at(key)] = format_value(value);
    }
    for (size_t i = 0; i < cells.size(); ++i) {
      if (i > 0) out += ',';
      out += cells[i];
    }
    out += '\n';
  }
  return out;
}

void CSVLogger::save() {
  pending_.raise_error();
  write_pending();
}

void CSVLogger::write_pending() {
  std::lock_guard<std::mutex> io(io_mutex_);
  Rows rows = pending_.take();
  if (rows.empty()) return;
  try {
    write_rows(rows);
  } catch (...) {
    pending_.put_back(std::move(rows));  // for the next attempt, in order
    throw;
  }
}

void CSVLogger::write_rows(const Rows& rows) {
  create_log_dir();
  const fs::path path = fs::path(choose_log_dir()) / kMetricsFile;
  std::optional<std::string> existing;
  bool ends_mid_line = false;
  if (!existing_file_checked_) {
    existing_file_checked_ = true;
    existing = read_file(path);
    if (existing && !existing->empty()) {
      // Continue a file left by an earlier run of this version; its header stays.
      size_t end = 0;
      columns_ = parse_csv_record(*existing, end);
      column_index_.clear();
      for (size_t i = 0; i < columns_.size(); ++i) column_index_.emplace(columns_[i], i);
      disk_columns_ = columns_;
      if (!column_index_.count(kStepColumn)) {
        column_index_[kStepColumn] = columns_.size();
        columns_.push_back(kStepColumn);
      }
      ends_mid_line = existing->back() != '\n';
    } else {
      existing.reset();
    }
  }
  register_columns(rows);

  std::string header;
  for (size_t i = 0; i < columns_.size(); ++i) {
    if (i > 0) header += ',';
    header += csv_field(columns_[i]);
  }
  header += '\n';
  const std::string new_rows = format_rows(rows);

  bool written = false;
  if (disk_columns_ == columns_) {
    // A row torn by a crash of the earlier run must not swallow our first row.
    written = append_to_file(path, ends_mid_line ? "\n" + new_rows : new_rows);
  } else if (!disk_columns_.empty()) {
    if (!existing) existing = read_file(path);
    if (existing) {
      // New columns: the whole file again under the new (sorted) header, each old row's
      // cells moved to their column, as Lightning rewrites it.
      size_t pos = 0;
      parse_csv_record(*existing, pos);
      std::string content = header;
      std::vector<std::string> cells(columns_.size());
      while (pos < existing->size()) {
        const std::vector<std::string> old = parse_csv_record(*existing, pos);
        if (old.size() == 1 && old[0].empty()) continue;  // a blank line
        for (auto& cell : cells) cell.clear();
        for (size_t i = 0; i < old.size() && i < disk_columns_.size(); ++i) {
          cells[column_index_.at(disk_columns_[i])] = old[i];
        }
        for (size_t i = 0; i < cells.size(); ++i) {
          if (i > 0) content += ',';
          content += csv_field(cells[i]);
        }
        content += '\n';
      }
      write_file_atomically(path, content + new_rows);
      written = true;
    }
  }
  if (!written) write_file_atomically(path, header + new_rows);
  disk_columns_ = columns_;
}

}  // namespace volt::loggers
