#include "volt/loggers/tensorboard_logger.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <system_error>

#include <ATen/ATen.h>

#include "loggers/detail/png_encoder.h"
#include "loggers/detail/summaries.h"
#include "loggers/detail/version_claims.h"
#include "loggers/detail/write_fully.h"
#include "volt/core/error.h"
#include "volt/core/file_check.h"
#include "volt/loggers/event_file.h"

namespace fs = std::filesystem;

namespace volt::loggers {
namespace {

// A burst of images should not wait for the timer in memory.
constexpr size_t kMaxPendingBytes = 4u << 20;

[[noreturn]] void throw_os_error(const std::string& what, const std::string& path, int err) {
  throw Error("TensorBoardLogger cannot " + what + " " + quote_path(path) + ": " + std::strerror(err) +
              ". Give TensorBoardLogger a save_dir in a writable folder.");
}

double wall_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void write_all(int fd, const std::string& data, const std::string& path) {
  if (!detail::write_fully(fd, data.data(), data.size())) throw_os_error("write", path, errno);
}

std::multiset<std::string>& claimed_dirs() {
  return detail::version_claims();
}

// TensorBoard's <n>: the files this process opened, as its writers count them.
std::atomic<int64_t> g_files_opened{0};

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  std::string host(buf);
  std::replace(host.begin(), host.end(), '/', '_');
  return host;
}

std::optional<int64_t> parse_version(const std::string& text) {
  const std::string digits = text.rfind("version_", 0) == 0 ? text.substr(8) : text;
  int64_t n = -1;
  const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (digits.empty() || r.ec != std::errc() || r.ptr != digits.data() + digits.size() || n < 0) return std::nullopt;
  return n;
}

std::string shape_of(const at::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

}  // namespace

TensorBoardLogger::TensorBoardLogger(std::string save_dir, std::string name, std::optional<int64_t> version,
                                     double max_flush_delay_s)
    : save_dir_(std::move(save_dir)), name_(std::move(name)), version_(version) {
  if (!(max_flush_delay_s > 0.0 && max_flush_delay_s <= 3600.0)) {
    throw ConfigError("TensorBoardLogger got max_flush_delay_s=" + std::to_string(max_flush_delay_s) +
                      "; give seconds in (0, 3600] (default 2).");
  }
  if (version_ && *version_ < 0) {
    throw ConfigError("TensorBoardLogger got version=" + std::to_string(*version_) +
                      "; versions are non-negative. Omit it to take the next free one.");
  }
  if (save_dir_.empty()) throw ConfigError("TensorBoardLogger got an empty save_dir; give a folder such as \".\".");
  if (const std::string why = folder_problem(save_dir_, "TensorBoardLogger save_dir", "Give a folder."); !why.empty()) {
    throw ConfigError(why);
  }
  pending_.set_max_delay(std::chrono::duration<double>(max_flush_delay_s));
}

TensorBoardLogger::~TensorBoardLogger() {
  pending_.stop();
  try {
    write_pending();
  } catch (const std::exception& e) {
    std::cerr << "warning: TensorBoardLogger dropped unsaved events: " << e.what() << "\n";
  }
  {
    std::lock_guard<std::mutex> io(io_mutex_);
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  if (!log_dir_created_ && !log_dir_.empty()) detail::release_version_claim(log_dir_);
}

const std::string& TensorBoardLogger::choose_log_dir() {
  std::lock_guard<std::mutex> lock(dir_mutex_);
  if (!log_dir_.empty()) return log_dir_;
  const fs::path root = fs::path(save_dir_) / name_;
  std::lock_guard<std::mutex> claims(detail::version_claims_mutex());
  if (!version_) {
    int64_t next = 0;
    std::error_code ec;
    if (fs::is_directory(root, ec)) {
      for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string dir = it->path().filename().string();
        if (dir.rfind("version_", 0) != 0 || !it->is_directory(ec)) continue;
        if (const auto k = parse_version(dir)) next = std::max(next, *k + 1);
      }
    }
    while (claimed_dirs().count((root / ("version_" + std::to_string(next))).string())) ++next;
    version_ = next;
  }
  log_dir_ = (root / ("version_" + std::to_string(*version_))).string();
  claimed_dirs().insert(log_dir_);
  return log_dir_;
}

std::string TensorBoardLogger::version() {
  choose_log_dir();
  std::lock_guard<std::mutex> lock(dir_mutex_);
  return "version_" + std::to_string(*version_);
}

std::string TensorBoardLogger::log_dir() {
  return choose_log_dir();
}

std::string TensorBoardLogger::event_file_path() const {
  std::lock_guard<std::mutex> lock(dir_mutex_);
  return file_path_;
}

void TensorBoardLogger::follow_version(const std::string& version) {
  std::lock_guard<std::mutex> lock(dir_mutex_);
  if (version_ || !log_dir_.empty()) return;
  version_ = parse_version(version);
}

void TensorBoardLogger::add_record(const std::string& event) {
  const std::string record = tfrecord(event);
  const bool write_now = pending_.add([&](std::string& pending) {
    pending += record;
    return pending.size() >= kMaxPendingBytes;
  });
  if (write_now) write_pending();
}

void TensorBoardLogger::log_hyperparams(const std::map<std::string, std::string>& params) {
  std::lock_guard<std::mutex> lock(state_mutex_);
  for (const auto& [k, v] : params) hparams_[k] = v;
  // TensorBoard keeps the first session_start_info of a run; without hyperparameters
  // there is nothing for the HPARAMS tab to list.
  if (session_started_ || hparams_.empty()) return;
  session_started_ = true;
  add_record(detail::hparams_session_start_event(wall_time_now(), hparams_, ""));
}

void TensorBoardLogger::log_hyperparams(const std::map<std::string, std::string>& params, const MetricMap& metrics) {
  if (!metrics.empty()) log_metrics(metrics, 0);
  log_hyperparams(params);
}

void TensorBoardLogger::log_metrics(const MetricMap& metrics, int64_t step) {
  if (metrics.empty()) return;
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    for (const auto& entry : metrics) scalar_tags_.insert(entry.first);
  }
  add_record(detail::scalars_event(wall_time_now(), step, metrics));
}

void TensorBoardLogger::log_text(const std::string& tag, const std::string& text, int64_t step) {
  add_record(detail::text_event(wall_time_now(), step, tag, text));
}

void TensorBoardLogger::log_histogram(const std::string& tag, const at::Tensor& values, int64_t step) {
  if (!values.defined()) {
    throw ConfigError("TensorBoardLogger::log_histogram(\"" + tag + "\") got an undefined tensor; pass the values.");
  }
  const at::Tensor flat = values.detach().to(at::kCPU, at::kDouble).contiguous().view(-1);
  const detail::HistogramData h = detail::make_histogram(flat.data_ptr<double>(), static_cast<size_t>(flat.numel()));
  if (h.num == 0) {
    std::lock_guard<std::mutex> lock(state_mutex_);
    if (warned_tags_.insert(tag).second) {
      std::cerr << "[volt] warning: histogram \"" << tag << "\" at step " << step << " has no finite value ("
                << flat.numel() << " values); nothing is logged for it while that lasts.\n";
    }
    return;
  }
  add_record(detail::histogram_event(wall_time_now(), step, tag, h));
}

void TensorBoardLogger::log_image(const std::string& tag, const at::Tensor& image, int64_t step) {
  const std::string call = "log_image(\"" + tag + "\")";
  if (!image.defined()) throw ConfigError(call + " got an undefined tensor; pass a [C,H,W] image.");
  at::Tensor t = image.detach().to(at::kCPU);
  if (t.dim() == 2) t = t.unsqueeze(0);
  if (t.dim() != 3 || !(t.size(0) == 1 || t.size(0) == 3 || t.size(0) == 4) || t.size(1) < 1 || t.size(2) < 1 ||
      t.size(1) > 65535 || t.size(2) > 65535) {
    throw ConfigError(call +
                      " needs a [C,H,W] tensor with C = 1, 3 or 4 channels and 1 to 65535 rows and columns; "
                      "got shape " +
                      shape_of(image) + ". For a batch of images, make a grid first (one [C,H,W] tensor).");
  }
  at::Tensor bytes;
  if (t.scalar_type() == at::kByte) {
    bytes = t;
  } else if (at::isFloatingType(t.scalar_type())) {
    t = t.to(at::kFloat);
    if (at::isnan(t).any().item<bool>()) {
      throw ConfigError(call + " got NaN pixels; an image holds values in [0, 1]. Check the model's output.");
    }
    bytes = t.mul(255.0f).round().clamp(0, 255).to(at::kByte);
  } else {
    throw ConfigError(call + " got a tensor of type " + std::string(c10::toString(t.scalar_type())) +
                      "; give float values in [0, 1] or uint8 values in [0, 255].");
  }
  const at::Tensor hwc = bytes.permute({1, 2, 0}).contiguous();
  const std::string png = detail::encode_png(hwc.data_ptr<uint8_t>(), t.size(1), t.size(2), t.size(0));
  add_record(detail::image_event(wall_time_now(), step, tag, t.size(1), t.size(2), t.size(0), png));
}

void TensorBoardLogger::open_file() {
  // Under io_mutex_.
  choose_log_dir();
  std::string dir, path;
  {
    std::lock_guard<std::mutex> lock(dir_mutex_);
    dir = log_dir_;
    path = file_path_;
  }
  if (!path.empty()) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NONBLOCK);
    if (fd_ >= 0) {
      struct stat st {};
      if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd_);
        fd_ = -1;
        throw Error("TensorBoardLogger's event file " + quote_path(path) +
                    " was replaced by something that is not "
                    "a regular file. Remove it.");
      }
      ::fcntl(fd_, F_SETFL, O_WRONLY | O_APPEND);
      return;
    }
    if (errno != ENOENT) throw_os_error("open", path, errno);
    // Deleted behind our back: start it again, file_version first.
  }
  if (const std::string why =
          folder_problem(dir, "TensorBoardLogger folder", "Give TensorBoardLogger a save_dir that is a folder.");
      !why.empty()) {
    throw Error(why);
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw_os_error("create the folder", dir, ec.value());
  {
    std::lock_guard<std::mutex> lock(dir_mutex_);
    log_dir_created_ = true;
  }
  if (path.empty()) {
    const auto secs = static_cast<long long>(
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count());
    char stamp[32];
    std::snprintf(stamp, sizeof(stamp), "%010lld", secs);
    path = (fs::path(dir) / ("events.out.tfevents." + std::string(stamp) + "." + host_name() + "." +
                             std::to_string(::getpid()) + "." + std::to_string(g_files_opened++)))
               .string();
  }
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw_os_error("create", path, errno);
  {
    std::lock_guard<std::mutex> lock(dir_mutex_);
    file_path_ = path;
  }
  write_all(fd_, tfrecord(detail::file_version_event(wall_time_now())), path);
}

void TensorBoardLogger::write_pending() {
  std::lock_guard<std::mutex> io(io_mutex_);
  std::string data = pending_.take();
  if (data.empty()) return;
  try {
    if (fd_ < 0) open_file();
    write_all(fd_, data, event_file_path());
  } catch (...) {
    // Keep the events for the next attempt, in order. (A write cut half-way would repeat
    // its first part; the reader then reports the torn record by its offset.)
    pending_.put_back(std::move(data));
    throw;
  }
}

void TensorBoardLogger::save() {
  pending_.raise_error();
  write_pending();
}

void TensorBoardLogger::finalize(const std::string& status) {
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    if (session_started_ && !session_ended_) {
      session_ended_ = true;
      const double now = wall_time_now();
      add_record(detail::hparams_experiment_event(now, hparams_,
                                                  std::vector<std::string>(scalar_tags_.begin(), scalar_tags_.end())));
      add_record(detail::hparams_session_end_event(now, status));
    }
  }
  save();
  std::lock_guard<std::mutex> io(io_mutex_);
  if (fd_ >= 0) {
    const int fd = fd_;
    fd_ = -1;
    const bool synced = ::fsync(fd) == 0;
    const int err = errno;
    if (::close(fd) != 0 || !synced) throw_os_error("flush", event_file_path(), synced ? errno : err);
  }
}

}  // namespace volt::loggers
