// DeviceStatsMonitor: this process's counters read from /proc, rows on logging steps only, and
// its keys in a real run's metrics.csv with plausible values.
#include "volt/callbacks/device_stats_monitor.h"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/boring_module.h"
#include "support/fake_trainer_view.h"
#include "support/temp_dir.h"
#include "volt/core/error.h"
#include "volt/loggers/csv_logger.h"
#include "volt/trainer/trainer.h"

namespace {

using volt::callbacks::DeviceStatsMonitor;

// metrics.csv as a header and rows of cells.
struct Csv {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  int column(const std::string& name) const {
    for (size_t i = 0; i < header.size(); ++i) {
      if (header[i] == name) return static_cast<int>(i);
    }
    return -1;
  }
};

Csv read_csv(const std::string& path) {
  std::ifstream in(path);
  Csv csv;
  std::string line;
  auto split = [](const std::string& l) {
    std::vector<std::string> cells;
    std::stringstream ss(l);
    std::string cell;
    while (std::getline(ss, cell, ',')) cells.push_back(cell);
    if (!l.empty() && l.back() == ',') cells.emplace_back();
    return cells;
  };
  if (std::getline(in, line)) csv.header = split(line);
  while (std::getline(in, line)) {
    csv.rows.push_back(split(line));
    csv.rows.back().resize(csv.header.size());
  }
  return csv;
}

}  // namespace

TEST(DeviceStatsMonitor, ReadsThisProcesssMemoryAndFaultsFromProc) {
  const auto before = DeviceStatsMonitor::read_process();
  EXPECT_GT(before.rss_mb, 1.0);
  EXPECT_GE(before.vm_size_mb, before.rss_mb);
  EXPECT_GE(before.minor_faults, 0);
  EXPECT_GE(before.major_faults, 0);
  EXPECT_GT(before.cpu_seconds, 0.0);
  // Touching 64 MiB of fresh memory faults its pages in and grows the resident set.
  std::vector<char> block(64u << 20);
  for (size_t i = 0; i < block.size(); i += 4096) block[i] = static_cast<char>(i);
  const auto after = DeviceStatsMonitor::read_process();
  EXPECT_GE(after.minor_faults - before.minor_faults, 10000) << "64 MiB is 16384 pages";
  EXPECT_GT(after.rss_mb - before.rss_mb, 48.0);
  EXPECT_GE(after.cpu_seconds, before.cpu_seconds);
  EXPECT_EQ(block[4096], static_cast<char>(4096 & 0xff));
}

TEST(DeviceStatsMonitor, LogsOnLoggingStepsOnceEach) {
  volt::testing::BoringModule module;
  volt::testing::FakeTrainerView view(&module);
  view.has_loggers_ = true;
  view.state_.log_every_n_steps = 2;
  DeviceStatsMonitor monitor;
  monitor.setup(view, volt::Stage::kFit);
  monitor.on_train_start(view);
  for (int64_t step = 0; step < 6; ++step) {
    view.state_.batches_that_stepped = step;
    monitor.on_train_batch_end(view, {}, {}, step);
    monitor.on_train_batch_end(view, {}, {}, step);  // a second micro-batch of the same step
  }
  ASSERT_EQ(view.logged_.size(), 3u);
  EXPECT_EQ(view.logged_[0].second, 1);
  EXPECT_EQ(view.logged_[1].second, 3);
  EXPECT_EQ(view.logged_[2].second, 5);
  const auto& row = view.logged_[0].first;
  for (const char* key : {"cpu_percent", "rss_mb", "vm_size_mb", "minor_faults", "major_faults", "cpu_vm_percent"}) {
    EXPECT_EQ(row.count(std::string("device_stats/") + key), 1u) << key;
  }
  // A CPU module: no CUDA keys.
  EXPECT_EQ(row.count("device_stats/cuda_memory_allocated_mb"), 0u);
}

TEST(DeviceStatsMonitor, CpuPercentOfOneBusyThreadIsAtMostOneCore) {
  volt::testing::BoringModule module;
  volt::testing::FakeTrainerView view(&module);
  DeviceStatsMonitor monitor;
  monitor.on_train_start(view);
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(400);
  volatile uint64_t spin = 0;
  while (std::chrono::steady_clock::now() < end) spin = spin + 1;
  const double percent = monitor.collect(view).at("device_stats/cpu_percent");
  // One thread spinning for 400 ms: up to 100% of a core, plus /proc's 10 ms ticks (2.5%). Other
  // programs on a shared machine may take some of it.
  EXPECT_LE(percent, 110.0);
  EXPECT_GE(percent, 20.0);
}

TEST(DeviceStatsMonitor, CpuStatsFalseAndAPrefixOfOnesOwn) {
  volt::testing::BoringModule module;
  volt::testing::FakeTrainerView view(&module);
  DeviceStatsMonitor off({false, "x/"});
  EXPECT_TRUE(off.collect(view).empty());
  DeviceStatsMonitor on({true, "x/"});
  const auto m = on.collect(view);
  EXPECT_EQ(m.count("x/rss_mb"), 1u);
}

TEST(DeviceStatsMonitor, FitWithoutLoggersIsAConfigError) {
  volt::testing::BoringModule module;
  volt::testing::FakeTrainerView view(&module);
  view.has_loggers_ = false;
  DeviceStatsMonitor monitor;
  EXPECT_THROW(monitor.setup(view, volt::Stage::kFit), volt::ConfigError);
  EXPECT_NO_THROW(monitor.setup(view, volt::Stage::kTest));
}

#ifndef VOLT_WITH_CUDA
TEST(DeviceStatsMonitor, NoCudaNumbersInABuildWithoutCuda) {
  EXPECT_TRUE(DeviceStatsMonitor::cuda_memory_stats(0).empty());
}
#endif

TEST(DeviceStatsMonitor, KeysReachMetricsCsvWithPlausibleValues) {
  volt::testing::TempDir dir("volt_device_stats");
  auto o = volt::testing::quiet_options(dir.str());
  o.log_every_n_steps = 2;
  o.logger = true;
  auto csv = std::make_shared<volt::loggers::CSVLogger>(dir.str());
  volt::Trainer trainer(o, {std::make_shared<DeviceStatsMonitor>()}, {csv});
  volt::testing::BoringModule module;
  trainer.fit(module, volt::testing::random_loader(10, 1, 1));
  const Csv m = read_csv(csv->log_dir() + "/metrics.csv");
  const int step = m.column("step"), rss = m.column("device_stats/rss_mb"), cpu = m.column("device_stats/cpu_percent");
  const int minor = m.column("device_stats/minor_faults"), major = m.column("device_stats/major_faults");
  const int vm = m.column("device_stats/cpu_vm_percent");
  ASSERT_GE(step, 0);
  ASSERT_GE(rss, 0) << "no device_stats/rss_mb column";
  ASSERT_GE(cpu, 0);
  ASSERT_GE(minor, 0);
  ASSERT_GE(major, 0);
  ASSERT_GE(vm, 0);
  std::vector<std::string> steps;
  for (const auto& row : m.rows) {
    if (row[static_cast<size_t>(rss)].empty()) continue;
    steps.push_back(row[static_cast<size_t>(step)]);
    EXPECT_GT(std::stod(row[static_cast<size_t>(rss)]), 1.0);
    EXPECT_GE(std::stod(row[static_cast<size_t>(minor)]), 0.0);
    EXPECT_GE(std::stod(row[static_cast<size_t>(major)]), 0.0);
    EXPECT_GE(std::stod(row[static_cast<size_t>(cpu)]), 0.0);
    const double used = std::stod(row[static_cast<size_t>(vm)]);
    EXPECT_GT(used, 0.0);
    EXPECT_LE(used, 100.0);
  }
  EXPECT_EQ(steps, (std::vector<std::string>{"1", "3", "5", "7", "9"}));
}

TEST(DeviceStatsMonitor, GpuUtilisationComesFromNvmlThroughCudaVisibleDevices) {
  // The NVML stand-in reports gpu = 10 * N + 7 and memory = N + 2 for the driver's device N.
  ::setenv("VOLT_NVML_LIBRARY", VOLT_TEST_FAKE_NVML, 1);
  ::setenv("CUDA_VISIBLE_DEVICES", "3,1", 1);
  const auto first = DeviceStatsMonitor::gpu_utilization(0);  // the driver's device 3
  const auto second = DeviceStatsMonitor::gpu_utilization(1);  // the driver's device 1
  const auto beyond = DeviceStatsMonitor::gpu_utilization(2);  // not visible
  ::setenv("CUDA_VISIBLE_DEVICES", "GPU-5f1c", 1);  // a UUID: no driver index to map to
  const auto uuid = DeviceStatsMonitor::gpu_utilization(0);
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  const auto plain = DeviceStatsMonitor::gpu_utilization(2);
  ::unsetenv("VOLT_NVML_LIBRARY");
  using Map = std::map<std::string, double>;
  EXPECT_EQ(first, (Map{{"gpu_utilization_percent", 37}, {"gpu_memory_utilization_percent", 5}}));
  EXPECT_EQ(second, (Map{{"gpu_utilization_percent", 17}, {"gpu_memory_utilization_percent", 3}}));
  EXPECT_EQ(plain, (Map{{"gpu_utilization_percent", 27}, {"gpu_memory_utilization_percent", 4}}));
  EXPECT_TRUE(beyond.empty());
  EXPECT_TRUE(uuid.empty());
}
