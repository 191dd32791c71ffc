// TensorBoardLogger and the event-file reader: CRC-32C against published values, the
// file name and first record, every kind of summary read back by an independent Python
// reader (tensorboard_check.py) and by Volt's reader, a flipped byte failing both CRC
// checks, the 2 s flush, and refused images.
#include "volt/loggers/tensorboard_logger.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <ATen/ops/arange.h>
#include <ATen/ops/full.h>
#include <ATen/ops/linspace.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include "loggers/tensorboard_support.h"
#include "support/temp_dir.h"
#include "volt/core/error.h"
#include "volt/loggers/event_file.h"

namespace {

using volt::loggers::EventRecord;
using volt::loggers::SummaryValue;
using volt::loggers::TensorBoardLogger;
using volt::testing::TempDir;
namespace tb = volt::testing::tb;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(TensorBoardCrc32c, MatchesPublishedCheckValues) {
  using volt::loggers::crc32c;
  const std::string check = "123456789";
  EXPECT_EQ(crc32c(check.data(), check.size()), 0xE3069283u);
  // RFC 3720 (iSCSI), appendix B.4.
  std::vector<unsigned char> zeros(32, 0x00), ones(32, 0xFF), up(32), down(32);
  for (int i = 0; i < 32; ++i) {
    up[i] = static_cast<unsigned char>(i);
    down[i] = static_cast<unsigned char>(31 - i);
  }
  EXPECT_EQ(crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(crc32c(up.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(crc32c(down.data(), 32), 0x113FDB5Cu);
  EXPECT_EQ(crc32c(nullptr, 0), 0u);
}

TEST(TensorBoardCrc32c, TfrecordFramesLengthAndDataWithMaskedCrcs) {
  const std::string record = volt::loggers::tfrecord("abc");
  ASSERT_EQ(record.size(), 8u + 4 + 3 + 4);
  EXPECT_EQ(record.substr(0, 8), std::string("\x03\0\0\0\0\0\0\0", 8));
  uint32_t length_crc = 0, data_crc = 0;
  std::memcpy(&length_crc, record.data() + 8, 4);
  std::memcpy(&data_crc, record.data() + 15, 4);
  EXPECT_EQ(length_crc, volt::loggers::masked_crc32c(record.data(), 8));
  const uint32_t plain = volt::loggers::crc32c("abc", 3);
  EXPECT_EQ(data_crc, ((plain >> 15) | (plain << 17)) + 0xa282ead8u);
}

TEST(TensorBoardLogger, EventFileIsNamedAsTensorBoardNamesItAndStartsWithItsVersion) {
  TempDir dir;
  TensorBoardLogger logger(dir.str());
  EXPECT_EQ(logger.log_dir(), (dir.path() / "lightning_logs" / "version_0").string());
  EXPECT_EQ(logger.event_file_path(), "");
  EXPECT_FALSE(std::filesystem::exists(logger.log_dir())) << "the folder is created by the first write";
  logger.log_metrics({{"loss", 0.5}}, 3);
  logger.save();
  const std::string path = logger.event_file_path();
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  const std::string file = std::filesystem::path(path).filename().string();
  const std::string prefix = "events.out.tfevents.";
  const std::string suffix = "." + std::string(host) + "." + std::to_string(::getpid()) + ".";
  ASSERT_GT(file.size(), prefix.size() + 10 + suffix.size()) << file;
  EXPECT_EQ(file.substr(0, prefix.size()), prefix) << file;
  EXPECT_TRUE(std::regex_match(file.substr(prefix.size(), 10), std::regex("[0-9]{10}"))) << file;
  EXPECT_EQ(file.substr(prefix.size() + 10, suffix.size()), suffix) << file;
  EXPECT_TRUE(std::regex_match(file.substr(prefix.size() + 10 + suffix.size()), std::regex("[0-9]+"))) << file;
  EXPECT_EQ(std::filesystem::path(path).parent_path().string(), logger.log_dir());
  const auto events = volt::loggers::read_events(path);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_TRUE(events[0].values.empty());
  ASSERT_EQ(events[1].values.size(), 1u);
  EXPECT_EQ(events[1].step, 3);
  EXPECT_EQ(events[1].values[0].tag, "loss");
  EXPECT_FLOAT_EQ(static_cast<float>(events[1].values[0].scalar), 0.5f);
  // A second logger of this process takes the next version.
  TensorBoardLogger second(dir.str());
  EXPECT_EQ(second.version(), "version_1");
}

// Writes one of every summary kind and returns the event file.
struct Written {
  std::string path;
  at::Tensor image_bytes;  // uint8 [C,H,W] the image must decode to
};

Written write_every_kind(const std::string& root) {
  TensorBoardLogger logger(root);
  logger.log_hyperparams({{"lr", "0.01"}, {"name", "mlp"}, {"shuffle", "true"}});
  logger.log_metrics({{"train_loss", 0.75}, {"epoch", 0}}, 0);
  logger.log_metrics({{"train_loss", 0.25}, {"epoch", 1}}, 10);
  logger.log_metrics({{"val_loss", -1.5}}, 10);
  logger.log_text("notes", "first run \xc3\xa9t\xc3\xa9", 4);
  logger.log_histogram("weights/w", at::linspace(-1.0, 1.0, 101, at::TensorOptions().dtype(at::kDouble)), 5);
  // A 3x4 RGB gradient in [0, 1], float.
  at::Tensor img = at::arange(36, at::kFloat).reshape({3, 3, 4}).div(35.0);
  logger.log_image("samples", img, 6);
  logger.finalize("success");
  return {logger.event_file_path(), img.mul(255).round().clamp(0, 255).to(at::kByte)};
}

TEST(TensorBoardLogger, IndependentReaderRoundTripsScalarsHparamsTextHistogramsAndImages) {
  const std::string skip = tb::python_skip_reason();
  if (!skip.empty()) GTEST_SKIP() << skip;
  TempDir dir;
  const Written w = write_every_kind(dir.str());
  const tb::PythonResult r = tb::python_dump(w.path);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto json = nlohmann::json::parse(r.out);
  ASSERT_EQ(json["files"].size(), 1u);
  const auto& events = json["files"][0]["events"];
  EXPECT_EQ(events[0]["file_version"], "brain.Event:2");

  std::vector<std::tuple<std::string, int64_t, double>> scalars;
  nlohmann::json ssi, exp, sei, text, histo, image;
  for (const auto& e : events) {
    for (const auto& v : e["values"]) {
      const std::string kind = v.value("kind", "");
      if (kind == "scalar") scalars.emplace_back(v["tag"], e["step"], v["value"]);
      if (v.value("plugin", "") == "hparams") {
        const auto& h = v["hparams"];
        if (h.contains("session_start_info")) ssi = h["session_start_info"];
        if (h.contains("experiment")) exp = h["experiment"];
        if (h.contains("session_end_info")) sei = h["session_end_info"];
        EXPECT_EQ(h["version"], 0);
      }
      if (kind == "text") text = v, text["step"] = e["step"];
      if (kind == "histogram") histo = v, histo["step"] = e["step"];
      if (kind == "image") image = v, image["step"] = e["step"];
    }
  }
  const std::vector<std::tuple<std::string, int64_t, double>> expected = {
      {"epoch", 0, 0.0}, {"train_loss", 0, 0.75}, {"epoch", 10, 1.0}, {"train_loss", 10, 0.25}, {"val_loss", 10, -1.5}};
  EXPECT_EQ(scalars, expected);

  ASSERT_FALSE(ssi.is_null()) << "no session_start_info";
  EXPECT_EQ(ssi["hparams"]["lr"], 0.01);
  EXPECT_EQ(ssi["hparams"]["name"], "mlp");
  EXPECT_EQ(ssi["hparams"]["shuffle"], true);
  ASSERT_FALSE(exp.is_null()) << "no experiment summary";
  EXPECT_EQ(exp["metric_infos"], nlohmann::json({"epoch", "train_loss", "val_loss"}));
  EXPECT_EQ(exp["hparam_infos"],
            nlohmann::json::parse(R"([{"name":"lr","type":3},{"name":"name","type":1},{"name":"shuffle","type":2}])"));
  ASSERT_FALSE(sei.is_null()) << "no session_end_info";
  EXPECT_EQ(sei["status"], 1);

  EXPECT_EQ(text["text"], "first run \xc3\xa9t\xc3\xa9");
  EXPECT_EQ(text["dtype"], 7);  // DT_STRING
  EXPECT_EQ(text["step"], 4);

  EXPECT_EQ(histo["tag"], "weights/w");
  EXPECT_EQ(histo["step"], 5);
  EXPECT_DOUBLE_EQ(histo["min"].get<double>(), -1.0);
  EXPECT_DOUBLE_EQ(histo["max"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(histo["num"].get<double>(), 101.0);
  EXPECT_NEAR(histo["sum"].get<double>(), 0.0, 1e-6);
  EXPECT_NEAR(histo["sum_squares"].get<double>(), 34.34, 1e-6);  // sum of (k/50 - 1)^2, k = 0..100
  ASSERT_EQ(histo["bucket"].size(), 30u);
  ASSERT_EQ(histo["bucket_limit"].size(), 30u);
  double counted = 0;
  for (const auto& c : histo["bucket"]) counted += c.get<double>();
  EXPECT_DOUBLE_EQ(counted, 101.0);
  EXPECT_DOUBLE_EQ(histo["bucket_limit"].back().get<double>(), 1.0);

  EXPECT_EQ(image["tag"], "samples");
  EXPECT_EQ(image["step"], 6);
  EXPECT_EQ(image["height"], 3);
  EXPECT_EQ(image["width"], 4);
  EXPECT_EQ(image["colorspace"], 3);
  const at::Tensor hwc = w.image_bytes.permute({1, 2, 0}).contiguous();
  const std::vector<int> pixels(hwc.data_ptr<uint8_t>(), hwc.data_ptr<uint8_t>() + hwc.numel());
  EXPECT_EQ(image["pixels"].get<std::vector<int>>(), pixels);
}

TEST(TensorBoardLogger, VoltsReaderRoundTripsEveryKind) {
  TempDir dir;
  const Written w = write_every_kind(dir.str());
  const auto events = volt::loggers::read_events(w.path);
  std::map<std::string, SummaryValue> by_tag;
  for (const auto& e : events) {
    for (const auto& v : e.values) by_tag[v.tag] = v;
  }
  EXPECT_EQ(by_tag.at("notes").plugin_name, "text");
  EXPECT_EQ(by_tag.at("notes").tensor_strings, std::vector<std::string>{"first run \xc3\xa9t\xc3\xa9"});
  EXPECT_EQ(by_tag.at("weights/w").kind, SummaryValue::Kind::kHistogram);
  EXPECT_EQ(by_tag.at("weights/w").histogram.num, 101.0);
  EXPECT_EQ(by_tag.at("samples").image.encoded.substr(1, 3), "PNG");
  EXPECT_EQ(by_tag.at("_hparams_/session_end_info").plugin_name, "hparams");
  const auto scalars = volt::loggers::read_event_scalars(w.path);
  ASSERT_EQ(scalars.size(), 5u);
  EXPECT_EQ(scalars[4].tag, "val_loss");
  EXPECT_EQ(scalars[4].step, 10);
  EXPECT_DOUBLE_EQ(scalars[4].value, -1.5);
  EXPECT_GT(scalars[4].wall_time, 1.6e9);
}

TEST(TensorBoardLogger, FlippedByteFailsBothReadersCrcChecks) {
  TempDir dir;
  const Written w = write_every_kind(dir.str());
  std::string bytes = read_all(w.path);
  // The second record starts after the first (file_version): flip a byte of its data.
  uint64_t first_len = 0;
  std::memcpy(&first_len, bytes.data(), 8);
  const size_t second = 8 + 4 + first_len + 4;
  bytes[second + 12 + 3] ^= 0x01;
  const std::string damaged = dir.file("events.out.tfevents.0000000000.damaged.1.0");
  std::ofstream(damaged, std::ios::binary) << bytes;
  try {
    volt::loggers::read_event_scalars(damaged);
    ADD_FAILURE() << "a flipped byte was not noticed";
  } catch (const volt::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("damaged"), std::string::npos) << what;
    EXPECT_NE(what.find("byte " + std::to_string(second)), std::string::npos) << what;
    EXPECT_NE(what.find("CRC of the record's data"), std::string::npos) << what;
  }
  // The length's CRC too.
  std::string length_flip = read_all(w.path);
  length_flip[second + 2] ^= 0x40;
  const std::string damaged2 = dir.file("events.out.tfevents.0000000000.damaged.2.0");
  std::ofstream(damaged2, std::ios::binary) << length_flip;
  EXPECT_THROW(volt::loggers::read_events(damaged2), volt::Error);

  if (tb::python_skip_reason().empty()) {
    EXPECT_EQ(tb::python_dump(w.path).exit_code, 0) << "the undamaged file reads";
    const tb::PythonResult r = tb::python_dump(damaged);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find("data CRC mismatch at offset " + std::to_string(second)), std::string::npos) << r.out;
    const tb::PythonResult r2 = tb::python_dump(damaged2);
    EXPECT_EQ(r2.exit_code, 1);
    EXPECT_NE(r2.out.find("length CRC mismatch"), std::string::npos) << r2.out;
  }
}

TEST(TensorBoardLogger, CutFileIsNamedWithTheOffsetOfItsLastRecord) {
  TempDir dir;
  const Written w = write_every_kind(dir.str());
  const std::string bytes = read_all(w.path);
  const std::string cut = dir.file("cut");
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() - 5);
  EXPECT_THROW(volt::loggers::read_events(cut), volt::Error);
}

TEST(TensorBoardLogger, BufferedEventsReachTheFileWithinTheFlushDelayWithoutSave) {
  TempDir dir;
  TensorBoardLogger logger(dir.str(), "lightning_logs", std::nullopt, /*max_flush_delay_s=*/0.3);
  logger.log_metrics({{"loss", 1.0}}, 1);
  EXPECT_EQ(logger.event_file_path(), "") << "log_metrics itself does not write";
  std::vector<volt::loggers::ScalarPoint> points;
  for (int i = 0; i < 40 && points.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!logger.event_file_path().empty()) points = volt::loggers::read_event_scalars(logger.event_file_path());
  }
  ASSERT_EQ(points.size(), 1u) << "the background writer did not write within 2 s";
  EXPECT_EQ(points[0].tag, "loss");
}

TEST(TensorBoardLogger, RefusesBadFlushDelaysVersionsAndSaveDirs) {
  TempDir dir;
  EXPECT_THROW(TensorBoardLogger(dir.str(), "x", std::nullopt, 0.0), volt::ConfigError);
  EXPECT_THROW(TensorBoardLogger(dir.str(), "x", std::nullopt, 4000.0), volt::ConfigError);
  EXPECT_THROW(TensorBoardLogger(dir.str(), "x", -1), volt::ConfigError);
  std::ofstream(dir.file("file")) << "x";
  EXPECT_THROW(TensorBoardLogger(dir.file("file")), volt::ConfigError);
}

TEST(TensorBoardLogger, RefusesImagesItCannotEncodeNamingTheShape) {
  TempDir dir;
  TensorBoardLogger logger(dir.str());
  auto message = [&](const at::Tensor& t) {
    try {
      logger.log_image("img", t, 0);
    } catch (const volt::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(message(at::zeros({2, 4, 4})).find("[2, 4, 4]"), std::string::npos);
  EXPECT_NE(message(at::zeros({1, 3, 4, 4})).find("[1, 3, 4, 4]"), std::string::npos);
  EXPECT_NE(message(at::full({1, 2, 2}, std::nan(""))).find("NaN"), std::string::npos);
  EXPECT_NE(message(at::zeros({1, 2, 2}, at::kLong)).find("Long"), std::string::npos);
  EXPECT_NE(message(at::Tensor()).find("undefined"), std::string::npos);
  // Accepted: grey [H,W], uint8 RGB, RGBA; values outside [0, 1] are clipped.
  logger.log_image("grey", at::zeros({5, 7}), 0);
  logger.log_image("rgb", at::full({3, 2, 2}, 200, at::kByte), 0);
  logger.log_image("rgba", at::full({4, 2, 2}, 1.5), 0);
  logger.finalize("success");
  for (const auto& e : volt::loggers::read_events(logger.event_file_path())) {
    for (const auto& v : e.values) {
      if (v.tag == "grey") {
        EXPECT_EQ(v.image.colorspace, 1);
        EXPECT_EQ(v.image.width, 7);
      }
      if (v.tag == "rgba") {
        EXPECT_EQ(v.image.colorspace, 4);
      }
    }
  }
}

TEST(TensorBoardLogger, HistogramWithoutFiniteValuesLogsNothing) {
  TempDir dir;
  TensorBoardLogger logger(dir.str());
  logger.log_histogram("h", at::full({4}, std::nan("")), 0);
  logger.log_histogram("h", at::full({4}, 2.0), 1);  // one value: a single bucket
  logger.finalize("success");
  std::vector<SummaryValue> histos;
  for (const auto& e : volt::loggers::read_events(logger.event_file_path())) {
    for (const auto& v : e.values) histos.push_back(v);
  }
  ASSERT_EQ(histos.size(), 1u);
  EXPECT_EQ(histos[0].histogram.bucket, std::vector<double>{4.0});
  EXPECT_THROW(logger.log_histogram("h", at::Tensor(), 0), volt::ConfigError);
}

TEST(TensorBoardLogger, FollowsAnotherLoggersVersion) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "lightning_logs" / "version_4");
  TensorBoardLogger logger(dir.str());
  logger.follow_version("version_9");
  EXPECT_EQ(logger.version(), "version_9");
  logger.follow_version("version_2");  // chosen already: kept
  EXPECT_EQ(logger.version(), "version_9");
  TensorBoardLogger fixed(dir.str(), "lightning_logs", 1);
  fixed.follow_version("version_9");
  EXPECT_EQ(fixed.version(), "version_1");
  TensorBoardLogger fresh(dir.str());
  EXPECT_EQ(fresh.version(), "version_5");
}

}  // namespace
