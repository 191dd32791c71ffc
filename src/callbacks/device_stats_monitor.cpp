#include "volt/callbacks/device_stats_monitor.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#ifdef VOLT_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include "volt/core/error.h"
#include "volt/core/module.h"
#include "volt/core/trainer_state.h"
#include "volt/core/trainer_view.h"

namespace volt::callbacks {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// /proc files report a size of 0: read until end of file.
std::string read_proc(const char* path) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(std::string("DeviceStatsMonitor cannot open ") + path + ": " + std::strerror(errno) + ".");
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// MemTotal and MemAvailable of /proc/meminfo, in kB; nullopt when absent.
std::optional<double> machine_memory_percent() {
  std::istringstream in(read_proc("/proc/meminfo"));
  std::string key;
  double value = 0, total = -1, available = -1;
  std::string unit;
  while (in >> key >> value) {
    std::getline(in, unit);
    if (key == "MemTotal:") total = value;
    if (key == "MemAvailable:") available = value;
  }
  if (total <= 0 || available < 0) return std::nullopt;
  return 100.0 * (total - available) / total;
}

}  // namespace

DeviceStatsMonitor::DeviceStatsMonitor() : DeviceStatsMonitor(Options{}) {}

DeviceStatsMonitor::DeviceStatsMonitor(Options options) : options_(std::move(options)) {}

DeviceStatsMonitor::ProcessReading DeviceStatsMonitor::read_process() {
  ProcessReading r;
  r.wall = std::chrono::steady_clock::now();
  // /proc/self/stat: "pid (comm) state ppid ..."; comm may hold spaces and parentheses, so the
  // fields are counted from the last ')'. After it: state is field 3, minflt 10, majflt 12,
  // utime 14, stime 15 (proc(5)).
  const std::string stat = read_proc("/proc/self/stat");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) throw Error("DeviceStatsMonitor cannot parse /proc/self/stat: '" + stat + "'.");
  std::istringstream fields(stat.substr(close + 1));
  std::vector<std::string> f;
  for (std::string s; fields >> s && f.size() < 13;) f.push_back(s);
  if (f.size() < 13) throw Error("DeviceStatsMonitor: /proc/self/stat has fewer fields than proc(5) describes.");
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  r.minor_faults = std::strtoll(f[7].c_str(), nullptr, 10);
  r.major_faults = std::strtoll(f[9].c_str(), nullptr, 10);
  r.cpu_seconds = (std::strtod(f[11].c_str(), nullptr) + std::strtod(f[12].c_str(), nullptr)) / ticks;
  // /proc/self/statm: size resident shared text lib data dt, in pages.
  std::istringstream statm(read_proc("/proc/self/statm"));
  double size_pages = 0, resident_pages = 0;
  if (!(statm >> size_pages >> resident_pages)) throw Error("DeviceStatsMonitor cannot parse /proc/self/statm.");
  const double page = static_cast<double>(::sysconf(_SC_PAGESIZE));
  r.rss_mb = resident_pages * page / kMiB;
  r.vm_size_mb = size_pages * page / kMiB;
  return r;
}

std::map<std::string, double> DeviceStatsMonitor::cuda_memory_stats(int device_index) {
#ifdef VOLT_WITH_CUDA
  namespace alloc = c10::cuda::CUDACachingAllocator;
  const auto stats = alloc::getDeviceStats(static_cast<c10::DeviceIndex>(device_index));
  // StatType::AGGREGATE (all pools) is index 0 in 1.13 and 2.x alike; the enum itself moved
  // namespaces (c10::CachingAllocator) in 2.x, the index did not.
  constexpr size_t all = 0;
  return {{"cuda_memory_allocated_mb", static_cast<double>(stats.allocated_bytes[all].current) / kMiB},
          {"cuda_memory_reserved_mb", static_cast<double>(stats.reserved_bytes[all].current) / kMiB},
          {"cuda_max_memory_allocated_mb", static_cast<double>(stats.allocated_bytes[all].peak) / kMiB},
          {"cuda_max_memory_reserved_mb", static_cast<double>(stats.reserved_bytes[all].peak) / kMiB}};
#else
  (void)device_index;
  return {};
#endif
}

namespace {

// NVML, the NVIDIA driver's management library, opened at run time (no CUDA toolkit or
// driver needed to build or to run without a GPU). Its C ABI: nvmlInit_v2(),
// nvmlDeviceGetHandleByIndex_v2(index, &device), nvmlDeviceGetUtilizationRates(device,
// &{gpu, memory}); 0 is NVML_SUCCESS. The calls Lightning's DeviceStatsMonitor gets from
// nvidia-smi (utilization.gpu, utilization.memory) without starting a process per row.
struct Nvml {
  using Init = int (*)();
  using HandleByIndex = int (*)(unsigned, void**);
  struct Utilization {
    unsigned gpu;
    unsigned memory;
  };
  using UtilizationRates = int (*)(void*, Utilization*);
  Init init = nullptr;
  HandleByIndex handle_by_index = nullptr;
  UtilizationRates utilization = nullptr;
  bool ready = false;

  static const Nvml& get() {
    static const Nvml nvml = [] {
      Nvml n;
      const char* path = std::getenv("VOLT_NVML_LIBRARY");
      void* lib = ::dlopen(path != nullptr && *path != '\0' ? path : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
      if (lib == nullptr) return n;
      n.init = reinterpret_cast<Init>(::dlsym(lib, "nvmlInit_v2"));
      n.handle_by_index = reinterpret_cast<HandleByIndex>(::dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
      n.utilization = reinterpret_cast<UtilizationRates>(::dlsym(lib, "nvmlDeviceGetUtilizationRates"));
      n.ready = n.init != nullptr && n.handle_by_index != nullptr && n.utilization != nullptr && n.init() == 0;
      return n;
    }();
    return nvml;
  }
};

/// NVML numbers devices as the driver does; CUDA_VISIBLE_DEVICES=2,3 makes cuda:0 the driver's 2.
int driver_index(int cuda_index) {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible == nullptr || *visible == '\0') return cuda_index;
  std::stringstream in(visible);
  std::string item;
  for (int i = 0; std::getline(in, item, ','); ++i) {
    if (i != cuda_index) continue;
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    return end != item.c_str() && *end == '\0' && v >= 0 ? static_cast<int>(v) : -1;  // a UUID: unknown
  }
  return -1;
}

}  // namespace

std::map<std::string, double> DeviceStatsMonitor::gpu_utilization(int device_index) {
  const Nvml& nvml = Nvml::get();
  const int index = driver_index(device_index);
  if (!nvml.ready || index < 0) return {};
  void* device = nullptr;
  Nvml::Utilization u{};
  if (nvml.handle_by_index(static_cast<unsigned>(index), &device) != 0 || nvml.utilization(device, &u) != 0) return {};
  return {{"gpu_utilization_percent", static_cast<double>(u.gpu)},
          {"gpu_memory_utilization_percent", static_cast<double>(u.memory)}};
}

void DeviceStatsMonitor::setup(TrainerView& view, Stage stage) {
  if (stage == Stage::kFit && !view.has_loggers()) {
    throw ConfigError(
        "DeviceStatsMonitor needs a logger; the Trainer has none, so the device statistics would be "
        "recorded nowhere. Attach a logger (logger=true gives the CSV logger) or remove the "
        "DeviceStatsMonitor callback.");
  }
}

void DeviceStatsMonitor::on_train_start(TrainerView& /*view*/) {
  last_ = read_process();
  last_logged_step_ = -1;
}

MetricMap DeviceStatsMonitor::collect(const TrainerView& view) {
  MetricMap out;
  const c10::Device device = view.module().device();
  const bool cuda = device.is_cuda();
  if (options_.cpu_stats.value_or(!cuda)) {
    const ProcessReading now = read_process();
    const ProcessReading before = last_.value_or(now);
    const double wall = std::chrono::duration<double>(now.wall - before.wall).count();
    out[options_.prefix + "cpu_percent"] = wall > 0 ? 100.0 * (now.cpu_seconds - before.cpu_seconds) / wall : 0.0;
    out[options_.prefix + "rss_mb"] = now.rss_mb;
    out[options_.prefix + "vm_size_mb"] = now.vm_size_mb;
    out[options_.prefix + "minor_faults"] = static_cast<double>(now.minor_faults - before.minor_faults);
    out[options_.prefix + "major_faults"] = static_cast<double>(now.major_faults - before.major_faults);
    if (const auto percent = machine_memory_percent()) out[options_.prefix + "cpu_vm_percent"] = *percent;
    last_ = now;
  }
  if (cuda) {
    const int index = device.has_index() ? device.index() : 0;
    for (const auto& [key, value] : cuda_memory_stats(index)) out[options_.prefix + key] = value;
    for (const auto& [key, value] : gpu_utilization(index)) out[options_.prefix + key] = value;
  }
  return out;
}

void DeviceStatsMonitor::on_train_batch_end(TrainerView& view, const at::Tensor& /*loss*/, const Batch& /*batch*/,
                                            int64_t /*batch_idx*/) {
  const TrainerState& s = view.state();
  if (!should_update_logs(s.batches_that_stepped, s.log_every_n_steps, s.should_stop)) return;
  if (s.batches_that_stepped == last_logged_step_) return;  // a micro-batch of the same step
  MetricMap metrics;
  try {
    metrics = collect(view);
  } catch (const Error& e) {
    // Statistics are an aid: a /proc that cannot be read must not stop training.
    if (!warned_ && s.is_global_zero) std::cerr << "[volt] warning: " << e.what() << " No device stats are logged.\n";
    warned_ = true;
    return;
  }
  last_logged_step_ = s.batches_that_stepped;
  if (!metrics.empty()) view.log_metrics(metrics, s.batches_that_stepped);
}

}  // namespace volt::callbacks
