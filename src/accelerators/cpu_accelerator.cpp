#include "volt/accelerators/cpu_accelerator.h"

#include <malloc.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <mutex>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include <ATen/Parallel.h>

#include "volt/core/error.h"

namespace volt::accelerators {

CPUAccelerator::CPUAccelerator(int64_t num_threads) : num_threads_(1) {
  set_num_threads(num_threads);
}

void CPUAccelerator::set_num_threads(int64_t num_threads) {
  if (num_threads < 0) {
    throw ConfigError("num_threads=" + std::to_string(num_threads) +
                      " is negative. Use 0 for all cores or a positive thread count.");
  }
  num_threads_ = num_threads == 0 ? std::max<int64_t>(1, std::thread::hardware_concurrency()) : num_threads;
}

std::vector<int64_t> CPUAccelerator::parse_devices(const DevicesSpec& spec) const {
  using Kind = DevicesSpec::Kind;
  if (spec.kind == Kind::kAll) {
    throw ConfigError("devices=-1 means every GPU or TPU core; on CPU, devices counts processes. Use devices=1 (or a "
                      "process count such as devices=2) with accelerator=\"cpu\".");
  }
  if (spec.kind == Kind::kIds) {
    throw ConfigError("devices='" + spec.text + "' is a list of device ids; on CPU, devices counts processes. Use "
                      "devices=" + std::to_string(spec.ids.size()) + " with accelerator=\"cpu\".");
  }
  const int64_t n = spec.kind == Kind::kAuto ? auto_device_count() : spec.count;
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(i);
  return ids;
}

std::vector<c10::Device> CPUAccelerator::get_parallel_devices(const std::vector<int64_t>& ids) const {
  return std::vector<c10::Device>(ids.size(), c10::Device(c10::kCPU));
}

void CPUAccelerator::setup_device(const c10::Device& device) {
  if (!device.is_cpu()) {
    throw ConfigError("CPUAccelerator was given device " + device.str() + "; it only drives cpu.");
  }
  tune_allocator();
  previous_threads_ = at::get_num_threads();
  // LibTorch starts with hardware_concurrency()/2 threads; set the count explicitly.
  if (previous_threads_ != num_threads_) at::set_num_threads(static_cast<int>(num_threads_));
}

void CPUAccelerator::tune_allocator() {
  // glibc hands multi-MB activation buffers back to the kernel after every step (mmap,
  // munmap, page faults); keeping them in the heap made a small CNN 1.3x faster here.
  // Only once, only with glibc's malloc, and not when the user tuned it already.
  static const bool done = [] {
    const char* tunables = std::getenv("GLIBC_TUNABLES");
    const char* opt_out = std::getenv("VOLT_TUNE_MALLOC");
    if ((tunables != nullptr && std::string(tunables).find("malloc") != std::string::npos) ||
        (opt_out != nullptr && std::string(opt_out) == "0")) {
      return false;
    }
    mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    return true;
  }();
  (void)done;
}

void CPUAccelerator::teardown() {
  if (previous_threads_ > 0 && previous_threads_ != at::get_num_threads()) {
    at::set_num_threads(previous_threads_);
  }
  previous_threads_ = -1;
}

namespace {

double meminfo_mb(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) == 0 && line.size() > key.size() && line[key.size()] == ':') {
      std::istringstream ss(line.substr(key.size() + 1));
      double kb = 0;
      ss >> kb;
      return kb / 1024.0;
    }
  }
  return 0.0;
}

double rss_mb() {
  std::ifstream in("/proc/self/statm");
  long pages_total = 0, pages_rss = 0;
  in >> pages_total >> pages_rss;
  return static_cast<double>(pages_rss) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Reading {
  std::chrono::steady_clock::time_point wall;
  double cpu;
};

std::mutex& stats_mutex() {
  static std::mutex m;
  return m;
}

// Taken when the library loads, so the first reading covers a real interval.
const Reading kLoadReading{std::chrono::steady_clock::now(), process_cpu_seconds()};

Reading& last_reading() {
  static Reading r = kLoadReading;
  return r;
}

}  // namespace

std::map<std::string, double> CPUAccelerator::get_device_stats(const c10::Device&) const {
  // CPU time of this process over wall time since the previous reading (the first one:
  // since the library was loaded), in percent of one core.
  std::lock_guard<std::mutex> lock(stats_mutex());
  auto& last = last_reading();
  const double cpu = process_cpu_seconds();
  const auto now = std::chrono::steady_clock::now();
  const double wall = std::chrono::duration<double>(now - last.wall).count();
  const double percent = wall > 0 ? 100.0 * (cpu - last.cpu) / wall : 0.0;
  last = {now, cpu};
  return {{"cpu_percent", percent},
          {"rss_mb", rss_mb()},
          {"vm_total_mb", meminfo_mb("MemTotal")},
          {"vm_available_mb", meminfo_mb("MemAvailable")}};
}

}  // namespace volt::accelerators
