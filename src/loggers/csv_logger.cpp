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
#include <system_error>

#include <yaml-cpp/yaml.h>

#include "volt/core/error.h"

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

void write_all(int fd, const std::string& data, const std::string& path) {
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw_os_error("write", path, err);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
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
  write_all(fd, content, tmp.string());
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

// Returns false when the file is gone (deleted behind our back): the caller then
// writes it whole.
bool append_to_file(const fs::path& path, const std::string& content) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return false;
    throw_os_error("open", path.string(), errno);
  }
  write_all(fd, content, path.string());
  if (::close(fd) != 0) throw_os_error("write", path.string(), errno);
  return true;
}

std::optional<std::string> read_file(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
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

// Parses the first record of `text` (RFC 4180 quoting). Sets `end` past its line break.
std::vector<std::string> parse_csv_record(const std::string& text, size_t& end) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  size_t i = 0;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else if (c == '\n') {
      ++i;
      break;
    } else if (c != '\r') {
      fields.back() += c;
    }
  }
  end = i;
  return fields;
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

CSVLogger::CSVLogger(std::string save_dir, std::string name, std::optional<int64_t> version,
                     int64_t flush_logs_every_n_steps)
    : save_dir_(std::move(save_dir)),
      name_(std::move(name)),
      version_(version),
      flush_every_(flush_logs_every_n_steps) {
  if (flush_every_ < 1) {
    throw ConfigError("CSVLogger got flush_logs_every_n_steps=" + std::to_string(flush_every_) +
                      "; it must be at least 1 (1 writes after every log_metrics call).");
  }
  if (version_ && *version_ < 0) {
    throw ConfigError("CSVLogger got version=" + std::to_string(*version_) +
                      "; versions are non-negative. Omit it to take the next free one.");
  }
  columns_.push_back(kStepColumn);
  column_index_[kStepColumn] = 0;
}

CSVLogger::~CSVLogger() {
  if (pending_.empty()) return;
  try {
    save();
  } catch (const std::exception& e) {
    // A destructor must not throw; losing rows silently would be worse than a message.
    std::cerr << "warning: CSVLogger dropped " << pending_.size() << " unsaved rows: " << e.what()
              << "\n";
  }
}

int64_t CSVLogger::next_version() const {
  const fs::path root = fs::path(save_dir_) / name_;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return 0;
  int64_t next = 0;
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
  return next;
}

const std::string& CSVLogger::ensure_log_dir() {
  if (!log_dir_.empty()) return log_dir_;
  const fs::path root = fs::path(save_dir_) / name_;
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) throw_os_error("create the folder", root.string(), ec.value());
  if (version_) {
    const fs::path dir = root / ("version_" + std::to_string(*version_));
    fs::create_directories(dir, ec);
    if (ec) throw_os_error("create the folder", dir.string(), ec.value());
    log_dir_ = dir.string();
    return log_dir_;
  }
  // mkdir is the reservation: a second logger (or process) racing for the same number
  // gets EEXIST and moves on to the next one.
  for (int64_t v = next_version();; ++v) {
    const fs::path dir = root / ("version_" + std::to_string(v));
    if (::mkdir(dir.c_str(), 0755) == 0) {
      version_ = v;
      log_dir_ = dir.string();
      return log_dir_;
    }
    if (errno != EEXIST) throw_os_error("create the folder", dir.string(), errno);
  }
}

std::string CSVLogger::version() {
  ensure_log_dir();
  return "version_" + std::to_string(*version_);
}

std::string CSVLogger::log_dir() { return ensure_log_dir(); }

std::string CSVLogger::metrics_file_path() {
  return (fs::path(ensure_log_dir()) / kMetricsFile).string();
}

std::string CSVLogger::hparams_file_path() {
  return (fs::path(ensure_log_dir()) / kHparamsFile).string();
}

void CSVLogger::log_hyperparams(const std::map<std::string, std::string>& params) {
  for (const auto& [key, value] : params) hparams_[key] = value;
  YAML::Emitter out;
  out << YAML::BeginMap;
  for (const auto& [key, value] : hparams_) out << YAML::Key << key << YAML::Value << value;
  out << YAML::EndMap;
  write_file_atomically(hparams_file_path(), std::string(out.c_str()) + "\n");
}

void CSVLogger::log_metrics(const MetricMap& metrics, int64_t step) {
  pending_.emplace_back(step, metrics);
  if (++calls_since_flush_ >= flush_every_) save();
}

void CSVLogger::finalize(const std::string& /*status*/) { save(); }

void CSVLogger::register_columns() {
  for (const auto& row : pending_) {
    for (const auto& entry : row.second) {
      if (entry.first == kStepColumn || column_index_.count(entry.first)) continue;
      column_index_[entry.first] = columns_.size();
      columns_.push_back(entry.first);
    }
  }
}

std::string CSVLogger::format_rows() const {
  std::string out;
  std::vector<std::string> cells(columns_.size());
  const size_t step_col = column_index_.at(kStepColumn);
  for (const auto& [step, metrics] : pending_) {
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
  calls_since_flush_ = 0;
  if (pending_.empty()) return;
  const fs::path path = fs::path(ensure_log_dir()) / kMetricsFile;

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
      columns_on_disk_ = columns_.size();
      if (!column_index_.count(kStepColumn)) {
        column_index_[kStepColumn] = columns_.size();
        columns_.push_back(kStepColumn);
      }
      ends_mid_line = existing->back() != '\n';
    } else {
      existing.reset();
    }
  }
  register_columns();

  std::string header;
  for (size_t i = 0; i < columns_.size(); ++i) {
    if (i > 0) header += ',';
    header += csv_field(columns_[i]);
  }
  header += '\n';
  const std::string rows = format_rows();

  bool written = false;
  if (columns_on_disk_ == columns_.size()) {
    // A row torn by a crash of the earlier run must not swallow our first row.
    written = append_to_file(path, ends_mid_line ? "\n" + rows : rows);
  } else if (columns_on_disk_ > 0) {
    if (!existing) existing = read_file(path);
    if (existing) {
      // Columns are only ever appended, so old rows stay valid once padded with empty
      // cells; no need to parse them.
      size_t body = 0;
      parse_csv_record(*existing, body);
      const std::string pad(columns_.size() - columns_on_disk_, ',');
      std::string content = header;
      size_t pos = body;
      while (pos < existing->size()) {
        size_t eol = existing->find('\n', pos);
        if (eol == std::string::npos) eol = existing->size();
        size_t len = eol - pos;
        if (len > 0 && (*existing)[pos + len - 1] == '\r') --len;
        content.append(*existing, pos, len);
        content += pad;
        content += '\n';
        pos = eol + 1;
      }
      write_file_atomically(path, content + rows);
      written = true;
    }
  }
  if (!written) write_file_atomically(path, header + rows);
  columns_on_disk_ = columns_.size();
  pending_.clear();
}

}  // namespace volt::loggers
