#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace volt::loggers {

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of TFRecord files.
/// crc32c("123456789") is 0xE3069283.
uint32_t crc32c(const void* data, size_t size);
/// TFRecord's masked form of a CRC-32C: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t masked_crc32c(const void* data, size_t size);
/// `payload` framed as one TFRecord: its length (uint64, little-endian), the masked CRC of
/// those 8 bytes, the payload, the masked CRC of the payload.
std::string tfrecord(const std::string& payload);

/// One scalar of an event file (a Summary value with simple_value).
struct ScalarPoint {
  std::string tag;
  int64_t step;
  double wall_time;
  double value;
};

/// Every scalar of a TensorBoard event file, in file order. Both CRCs of every record
/// are verified; a damaged or cut record throws volt::Error naming the file and the byte
/// offset of the record.
std::vector<ScalarPoint> read_event_scalars(const std::string& path);

/// One Summary.Value of an event, as read back (the fields Volt writes).
struct SummaryValue {
  enum class Kind { kScalar, kHistogram, kImage, kTensor, kNone };
  std::string tag;
  Kind kind = Kind::kNone;
  /// SummaryMetadata.plugin_data: "text", "hparams", ... and its serialized content.
  std::string plugin_name;
  std::string plugin_content;
  double scalar = 0.0;
  struct Histogram {
    double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
    std::vector<double> bucket_limit, bucket;
  } histogram;
  struct Image {
    int64_t height = 0, width = 0, colorspace = 0;
    std::string encoded;  // the PNG file
  } image;
  /// A tensor's string_val entries (text summaries).
  std::vector<std::string> tensor_strings;
};

/// One Event record.
struct EventRecord {
  double wall_time = 0.0;
  int64_t step = 0;
  std::string file_version;  // "brain.Event:2" in the first record
  std::vector<SummaryValue> values;
};

/// Every event of a TensorBoard event file, CRCs verified as by read_event_scalars.
std::vector<EventRecord> read_events(const std::string& path);

}  // namespace volt::loggers
