#include "volt/loggers/csv_logger.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <future>
#include <iterator>
#include <chrono>
#include <vector>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "support/temp_dir.h"
#include "volt/core/error.h"

namespace fs = std::filesystem;
using volt::loggers::CSVLogger;

namespace {

class CSVLoggerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "volt_csv_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  static std::vector<std::string> lines(const std::string& path) {
    std::vector<std::string> out;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }
  static ino_t inode(const std::string& path) {
    struct stat st {};
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
    return st.st_ino;
  }

  fs::path dir_;
};

TEST_F(CSVLoggerTest, VersionsIncrementWithinOneSaveDir) {
  CSVLogger first(dir_.string());
  EXPECT_EQ(first.version(), "version_0");
  EXPECT_EQ(first.name(), "lightning_logs");
  EXPECT_EQ(first.log_dir(), (dir_ / "lightning_logs" / "version_0").string());
  EXPECT_FALSE(fs::exists(first.log_dir())) << "the folder is made by the first write";

  CSVLogger second(dir_.string());
  EXPECT_EQ(second.version(), "version_1");
  first.log_metrics({{"loss", 1.0}}, 0);
  first.save();
  second.log_metrics({{"loss", 1.0}}, 0);
  second.save();
  EXPECT_TRUE(fs::is_directory(dir_ / "lightning_logs" / "version_0"));
  EXPECT_TRUE(fs::is_directory(dir_ / "lightning_logs" / "version_1"));
}

TEST_F(CSVLoggerTest, NextVersionFollowsHighestExistingFolder) {
  fs::create_directories(dir_ / "exp" / "version_3");
  fs::create_directories(dir_ / "exp" / "version_10");
  fs::create_directories(dir_ / "exp" / "version_x");
  std::ofstream(dir_ / "exp" / "version_99");  // a file, not a folder
  CSVLogger logger(dir_.string(), "exp");
  EXPECT_EQ(logger.version(), "version_11");
}

TEST_F(CSVLoggerTest, ExplicitVersionIsUsedAsGiven) {
  CSVLogger logger(dir_.string(), "exp", 7);
  EXPECT_EQ(logger.log_dir(), (dir_ / "exp" / "version_7").string());
  logger.log_hyperparams({{"lr", "0.1"}});
  EXPECT_TRUE(fs::is_directory(logger.log_dir()));
}

TEST_F(CSVLoggerTest, FolderIsNotCreatedBeforeFirstUse) {
  CSVLogger logger(dir_.string());
  EXPECT_FALSE(fs::exists(dir_ / "lightning_logs"));
}

TEST_F(CSVLoggerTest, HeaderIsUnionOfNamesSortedByNameAsLightningWritesItWithEmptyCells) {
  CSVLogger logger(dir_.string());
  logger.log_metrics({{"loss", 1.5}}, 0);
  logger.log_metrics({{"val_acc", 0.25}, {"epoch", 0}}, 1);
  logger.log_metrics({{"loss", 0.5}}, 2);
  logger.save();
  EXPECT_EQ(lines(logger.metrics_file_path()),
            (std::vector<std::string>{
                "epoch,loss,step,val_acc", ",1.5,0,", "0,,1,0.25", ",0.5,2,"}));
}

TEST_F(CSVLoggerTest, AppendsRowsWhenHeaderIsUnchanged) {
  CSVLogger logger(dir_.string(), "lightning_logs", std::nullopt, 1);
  logger.log_metrics({{"loss", 1.0}}, 0);
  const std::string path = logger.metrics_file_path();
  const ino_t before = inode(path);
  logger.log_metrics({{"loss", 2.0}}, 1);
  EXPECT_EQ(inode(path), before) << "rows with the same columns must be appended in place";
  EXPECT_EQ(lines(path), (std::vector<std::string>{"loss,step", "1,0", "2,1"}));
}

TEST_F(CSVLoggerTest, RewritesWholeFileAtomicallyWhenColumnsAppear) {
  CSVLogger logger(dir_.string(), "lightning_logs", std::nullopt, 1);
  logger.log_metrics({{"loss", 1.0}}, 0);
  const std::string path = logger.metrics_file_path();
  const ino_t before = inode(path);
  logger.log_metrics({{"loss", 2.0}, {"lr", 0.1}}, 1);
  EXPECT_NE(inode(path), before) << "a wider header must replace the file by rename";
  EXPECT_EQ(lines(path), (std::vector<std::string>{"loss,lr,step", "1,,0", "2,0.1,1"}));
  for (const auto& entry : fs::directory_iterator(logger.log_dir())) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos)
        << "temporary file left behind: " << entry.path();
  }
}

TEST_F(CSVLoggerTest, WritesEveryFlushIntervalAndOnFinalize) {
  CSVLogger logger(dir_.string(), "lightning_logs", std::nullopt, 3);
  const std::string path = logger.metrics_file_path();
  logger.log_metrics({{"loss", 1.0}}, 0);
  logger.log_metrics({{"loss", 1.0}}, 1);
  EXPECT_FALSE(fs::exists(path));
  logger.log_metrics({{"loss", 1.0}}, 2);
  EXPECT_EQ(lines(path).size(), 4u);
  logger.log_metrics({{"loss", 1.0}}, 3);
  EXPECT_EQ(lines(path).size(), 4u);
  logger.finalize("success");
  EXPECT_EQ(lines(path).size(), 5u);
}

TEST_F(CSVLoggerTest, SaveWithoutRowsWritesNoFile) {
  CSVLogger logger(dir_.string());
  logger.save();
  EXPECT_FALSE(fs::exists(logger.metrics_file_path()));
}

TEST_F(CSVLoggerTest, DestructorWritesBufferedRows) {
  std::string path;
  {
    CSVLogger logger(dir_.string());
    logger.log_metrics({{"loss", 3.0}}, 5);
    path = logger.metrics_file_path();
  }
  EXPECT_EQ(lines(path), (std::vector<std::string>{"loss,step", "3,5"}));
}

TEST_F(CSVLoggerTest, ValuesRoundTripExactly) {
  const std::vector<double> values = {0.1,
                                      1.0 / 3.0,
                                      static_cast<double>(0.412f),
                                      -2.5e-300,
                                      123456789.123456789,
                                      1e22,
                                      std::numeric_limits<double>::denorm_min(),
                                      std::numeric_limits<double>::max(),
                                      -0.0};
  CSVLogger logger(dir_.string());
  for (size_t i = 0; i < values.size(); ++i) {
    logger.log_metrics({{"v", values[i]}}, static_cast<int64_t>(i));
  }
  logger.log_metrics({{"v", std::nan("")}}, 100);
  logger.log_metrics({{"v", -std::numeric_limits<double>::infinity()}}, 101);
  logger.save();
  const auto rows = lines(logger.metrics_file_path());
  ASSERT_EQ(rows.size(), values.size() + 3);
  for (size_t i = 0; i < values.size(); ++i) {
    const std::string& row = rows[i + 1];
    const std::string cell = row.substr(row.find(',') + 1);
    const double back = std::strtod(cell.c_str(), nullptr);
    EXPECT_EQ(std::memcmp(&back, &values[i], sizeof(double)), 0)
        << "value " << i << " printed as " << cell;
  }
  EXPECT_EQ(rows[1], "0,0.1") << "shortest form that round-trips";
  EXPECT_EQ(rows[values.size() + 1], "100,nan");
  EXPECT_EQ(rows[values.size() + 2], "101,-inf");
}

TEST_F(CSVLoggerTest, MetricNamesNeedingQuotesAreQuoted) {
  CSVLogger logger(dir_.string());
  logger.log_metrics({{"a,b", 1.0}, {"say \"hi\"", 2.0}}, 0);
  logger.save();
  EXPECT_EQ(lines(logger.metrics_file_path()),
            (std::vector<std::string>{"\"a,b\",\"say \"\"hi\"\"\",step", "1,2,0"}));
}

TEST_F(CSVLoggerTest, ContinuesExistingFileOfSameVersion) {
  {
    CSVLogger logger(dir_.string(), "exp", 0);
    logger.log_metrics({{"loss", 1.0}}, 0);
    logger.finalize("success");
  }
  CSVLogger resumed(dir_.string(), "exp", 0);
  resumed.log_metrics({{"loss", 2.0}}, 1);
  resumed.save();
  resumed.log_metrics({{"acc", 0.5}}, 2);
  resumed.save();
  EXPECT_EQ(lines(resumed.metrics_file_path()),
            (std::vector<std::string>{"acc,loss,step", ",1,0", ",2,1", "0.5,,2"}));
}

TEST_F(CSVLoggerTest, HparamsYamlHasOneLinePerKeyAndReadsBack) {
  CSVLogger logger(dir_.string());
  logger.log_hyperparams({{"lr", "0.001"}, {"batch_size", "32"}, {"name", "my model: v2"}});
  logger.log_hyperparams({{"empty", ""}, {"note", "# not a comment"}, {"lr", "0.01"}});
  const std::string path = logger.hparams_file_path();
  const auto text = lines(path);
  ASSERT_EQ(text.size(), 5u) << read(path);
  EXPECT_EQ(text[0], "batch_size: 32");
  EXPECT_EQ(text[2], "lr: 0.01");
  const YAML::Node yaml = YAML::LoadFile(path);
  EXPECT_EQ(yaml["lr"].as<double>(), 0.01);
  EXPECT_EQ(yaml["batch_size"].as<int>(), 32);
  EXPECT_EQ(yaml["name"].as<std::string>(), "my model: v2");
  EXPECT_EQ(yaml["empty"].as<std::string>(), "");
  EXPECT_EQ(yaml["note"].as<std::string>(), "# not a comment");
}

TEST_F(CSVLoggerTest, SaveDirUnderAFileIsRefusedAtConstructionSayingItIsAFile) {
  const fs::path file = dir_ / "plain_file";
  std::ofstream(file) << "x";
  try {
    CSVLogger logger((file / "logs").string());
    FAIL() << "expected volt::ConfigError";
  } catch (const volt::ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(file.string()), std::string::npos) << what;
    EXPECT_NE(what.find("is a file, not a folder"), std::string::npos) << what;
  }
}

TEST_F(CSVLoggerTest, UnwritableSaveDirThrowsErrorNamingPathAndOsError) {
  // procfs refuses new folders, for root too.
  const std::string save_dir = "/proc/self/volt_logs";
  CSVLogger logger(save_dir);
  try {
    logger.log_metrics({{"loss", 1.0}}, 0);
    logger.save();
    FAIL() << "expected volt::Error";
  } catch (const volt::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(save_dir), std::string::npos) << what;
    EXPECT_NE(what.find(std::strerror(ENOENT)), std::string::npos) << what;
  }
}

TEST_F(CSVLoggerTest, RowsReachTheFileWithinTheFlushDelayWithoutAnotherCall) {
  CSVLogger logger(dir_.string(), "lightning_logs", std::nullopt, /*flush_logs_every_n_steps=*/100,
                   /*max_flush_delay_s=*/0.2);
  logger.log_metrics({{"loss", 0.5}}, 7);
  const std::string path = logger.metrics_file_path();
  std::string text;
  for (int i = 0; i < 40 && text.find("7,0.5") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ifstream in(path);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  EXPECT_NE(text.find("loss,step\n0.5,7\n"), std::string::npos) << "metrics.csv after 2 s: '" << text << "'";
}

TEST_F(CSVLoggerTest, DefaultFlushDelayIsTwoSeconds) {
  CSVLogger logger(dir_.string());
  logger.log_metrics({{"loss", 0.5}}, 1);
  const std::string path = logger.metrics_file_path();
  EXPECT_FALSE(fs::exists(path)) << "one row is written by the background writer, not by log_metrics";
  std::this_thread::sleep_for(std::chrono::milliseconds(2600));
  EXPECT_TRUE(fs::exists(path)) << "a row older than 2 s is still only in memory";
}

TEST_F(CSVLoggerTest, RejectsANonPositiveOrNanFlushDelay) {
  EXPECT_THROW(CSVLogger(dir_.string(), "x", std::nullopt, 100, 0.0), volt::ConfigError);
  EXPECT_THROW(CSVLogger(dir_.string(), "x", std::nullopt, 100, std::nan("")), volt::ConfigError);
}

TEST_F(CSVLoggerTest, RejectsFlushIntervalBelowOne) {
  EXPECT_THROW(CSVLogger(dir_.string(), "x", std::nullopt, 0), volt::ConfigError);
}

}  // namespace

namespace {

TEST(CSVLoggerFiles, AFifoWhereMetricsCsvGoesIsRefusedNotOpened) {
  volt::testing::TempDir dir;
  fs::create_directories(dir.path() / "lightning_logs" / "version_0");
  const std::string fifo = (dir.path() / "lightning_logs" / "version_0" / "metrics.csv").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto result = std::async(std::launch::async, [&] {
    CSVLogger logger(dir.str(), "lightning_logs", 0);
    logger.log_metrics({{"loss", 1.0}}, 0);
    try {
      logger.save();
    } catch (const volt::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  });
  if (result.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    ADD_FAILURE() << "save() blocked on the FIFO";
    std::_Exit(1);
  }
  const std::string msg = result.get();
  EXPECT_NE(msg.find("FIFO"), std::string::npos) << msg;
  EXPECT_NE(msg.find("metrics.csv"), std::string::npos) << msg;
}

}  // namespace
