#include "loggers/detail/summaries.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "loggers/detail/protobuf.h"

namespace volt::loggers::detail {
namespace {

// event.proto
constexpr uint32_t kEventWallTime = 1, kEventStep = 2, kEventFileVersion = 3, kEventSummary = 5;
// summary.proto
constexpr uint32_t kSummaryValue = 1;
constexpr uint32_t kValueTag = 1, kValueSimple = 2, kValueImage = 4, kValueHisto = 5, kValueTensor = 8,
                   kValueMetadata = 9;
constexpr uint32_t kMetadataPluginData = 1, kPluginName = 1, kPluginContent = 2;
constexpr uint32_t kMetadataDataClass = 4;
constexpr int64_t kDataClassTensor = 2;
// tensor.proto, tensor_shape.proto, types.proto
constexpr uint32_t kTensorDtype = 1, kTensorShape = 2, kTensorStringVal = 8, kShapeDim = 2, kDimSize = 1;
constexpr int64_t kDtString = 7;
// hparams plugin_data.proto / api.proto
constexpr uint32_t kPluginDataVersion = 1, kPluginDataExperiment = 2, kPluginDataSessionStart = 3,
                   kPluginDataSessionEnd = 4;
constexpr uint32_t kStartHparams = 1, kStartGroupName = 4, kStartTime = 5;
constexpr uint32_t kEndStatus = 1, kEndTime = 2;
constexpr uint32_t kExperimentTimeCreated = 3, kExperimentHparamInfos = 4, kExperimentMetricInfos = 5;
constexpr uint32_t kHparamInfoName = 1, kHparamInfoType = 4;
constexpr uint32_t kMetricInfoName = 1, kMetricNameTag = 2;
// google/protobuf/struct.proto Value
constexpr uint32_t kNumberValue = 2, kStringValue = 3, kBoolValue = 4;

std::string event(double wall_time, int64_t step, const ProtoWriter& summary) {
  ProtoWriter e;
  e.double_field(kEventWallTime, wall_time);
  e.int_field(kEventStep, step);
  e.message_field(kEventSummary, summary);
  return e.str();
}

ProtoWriter plugin_metadata(const std::string& plugin, const std::string& content, bool tensor_class) {
  ProtoWriter data;
  data.bytes_field(kPluginName, plugin);
  if (!content.empty()) data.bytes_field(kPluginContent, content);
  ProtoWriter metadata;
  metadata.message_field(kMetadataPluginData, data);
  if (tensor_class) metadata.int_field(kMetadataDataClass, kDataClassTensor);
  return metadata;
}

enum class HparamType { kString = 1, kBool = 2, kFloat64 = 3 };

HparamType type_of(const std::string& text, double& number) {
  if (text == "true" || text == "false") return HparamType::kBool;
  const char* first = text.data();
  const char* last = first + text.size();
  if (!text.empty() && *first == '+') ++first;
  const auto r = std::from_chars(first, last, number);
  if (first != last && r.ec == std::errc() && r.ptr == last && std::isfinite(number)) return HparamType::kFloat64;
  return HparamType::kString;
}

ProtoWriter hparam_value(const std::string& text) {
  ProtoWriter v;
  double number = 0;
  switch (type_of(text, number)) {
    case HparamType::kBool:
      v.int_field(kBoolValue, text == "true" ? 1 : 0);
      break;
    case HparamType::kFloat64:
      v.double_field(kNumberValue, number);
      break;
    case HparamType::kString:
      v.bytes_field(kStringValue, text);
      break;
  }
  return v;
}

std::string hparams_event(double wall_time, const std::string& tag, uint32_t data_field, const ProtoWriter& data) {
  ProtoWriter content;
  content.int_field(kPluginDataVersion, 0);
  content.message_field(data_field, data);
  ProtoWriter value;
  value.bytes_field(kValueTag, tag);
  value.message_field(kValueMetadata, plugin_metadata("hparams", content.str(), false));
  ProtoWriter summary;
  summary.message_field(kSummaryValue, value);
  return event(wall_time, 0, summary);
}

}  // namespace

std::string file_version_event(double wall_time) {
  ProtoWriter e;
  e.double_field(kEventWallTime, wall_time);
  e.bytes_field(kEventFileVersion, "brain.Event:2");
  return e.str();
}

std::string scalars_event(double wall_time, int64_t step, const MetricMap& metrics) {
  ProtoWriter summary;
  for (const auto& [tag, v] : metrics) {
    ProtoWriter value;
    value.bytes_field(kValueTag, tag);
    value.float_field(kValueSimple, static_cast<float>(v));
    summary.message_field(kSummaryValue, value);
  }
  return event(wall_time, step, summary);
}

std::string text_event(double wall_time, int64_t step, const std::string& tag, const std::string& text) {
  ProtoWriter dim;
  dim.int_field(kDimSize, 1);
  ProtoWriter shape;
  shape.message_field(kShapeDim, dim);
  ProtoWriter tensor;
  tensor.int_field(kTensorDtype, kDtString);
  tensor.message_field(kTensorShape, shape);
  tensor.bytes_field(kTensorStringVal, text);
  ProtoWriter value;
  value.bytes_field(kValueTag, tag);
  value.message_field(kValueMetadata, plugin_metadata("text", "", true));
  value.message_field(kValueTensor, tensor);
  ProtoWriter summary;
  summary.message_field(kSummaryValue, value);
  return event(wall_time, step, summary);
}

HistogramData make_histogram(const double* values, size_t n, int buckets) {
  HistogramData h;
  h.min = std::numeric_limits<double>::infinity();
  h.max = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < n; ++i) {
    const double v = values[i];
    if (!std::isfinite(v)) continue;
    h.min = std::min(h.min, v);
    h.max = std::max(h.max, v);
    h.num += 1;
    h.sum += v;
    h.sum_squares += v * v;
  }
  if (h.num == 0) return HistogramData{};
  if (h.min == h.max) {
    h.bucket_limit = {h.max};
    h.bucket = {h.num};
    return h;
  }
  const double width = (h.max - h.min) / buckets;
  h.bucket.assign(static_cast<size_t>(buckets), 0.0);
  for (int b = 0; b < buckets; ++b) h.bucket_limit.push_back(b + 1 == buckets ? h.max : h.min + width * (b + 1));
  for (size_t i = 0; i < n; ++i) {
    const double v = values[i];
    if (!std::isfinite(v)) continue;
    auto b = static_cast<int64_t>((v - h.min) / width);
    b = std::clamp<int64_t>(b, 0, buckets - 1);
    h.bucket[static_cast<size_t>(b)] += 1;
  }
  return h;
}

std::string histogram_event(double wall_time, int64_t step, const std::string& tag, const HistogramData& h) {
  ProtoWriter histo;
  histo.double_field(1, h.min);
  histo.double_field(2, h.max);
  histo.double_field(3, h.num);
  histo.double_field(4, h.sum);
  histo.double_field(5, h.sum_squares);
  histo.packed_doubles(6, h.bucket_limit);
  histo.packed_doubles(7, h.bucket);
  ProtoWriter value;
  value.bytes_field(kValueTag, tag);
  value.message_field(kValueHisto, histo);
  ProtoWriter summary;
  summary.message_field(kSummaryValue, value);
  return event(wall_time, step, summary);
}

std::string image_event(double wall_time, int64_t step, const std::string& tag, int64_t height, int64_t width,
                        int64_t colorspace, const std::string& png) {
  ProtoWriter image;
  image.int_field(1, height);
  image.int_field(2, width);
  image.int_field(3, colorspace);
  image.bytes_field(4, png);
  ProtoWriter value;
  value.bytes_field(kValueTag, tag);
  value.message_field(kValueImage, image);
  ProtoWriter summary;
  summary.message_field(kSummaryValue, value);
  return event(wall_time, step, summary);
}

std::string hparams_session_start_event(double wall_time, const std::map<std::string, std::string>& hparams,
                                        const std::string& group_name) {
  ProtoWriter start;
  for (const auto& [key, text] : hparams) {
    ProtoWriter entry;  // a map entry: key = 1, value = 2
    entry.bytes_field(1, key);
    entry.message_field(2, hparam_value(text));
    start.message_field(kStartHparams, entry);
  }
  if (!group_name.empty()) start.bytes_field(kStartGroupName, group_name);
  start.double_field(kStartTime, wall_time);
  return hparams_event(wall_time, "_hparams_/session_start_info", kPluginDataSessionStart, start);
}

std::string hparams_experiment_event(double wall_time, const std::map<std::string, std::string>& hparams,
                                     const std::vector<std::string>& metric_tags) {
  ProtoWriter experiment;
  experiment.double_field(kExperimentTimeCreated, wall_time);
  for (const auto& [key, text] : hparams) {
    double number = 0;
    ProtoWriter info;
    info.bytes_field(kHparamInfoName, key);
    info.int_field(kHparamInfoType, static_cast<int64_t>(type_of(text, number)));
    experiment.message_field(kExperimentHparamInfos, info);
  }
  for (const auto& tag : metric_tags) {
    ProtoWriter name;
    name.bytes_field(kMetricNameTag, tag);
    ProtoWriter info;
    info.message_field(kMetricInfoName, name);
    experiment.message_field(kExperimentMetricInfos, info);
  }
  return hparams_event(wall_time, "_hparams_/experiment", kPluginDataExperiment, experiment);
}

std::string hparams_session_end_event(double wall_time, const std::string& status) {
  ProtoWriter end;
  end.int_field(kEndStatus, status == "success" ? 1 : status == "failed" ? 2 : 0);
  end.double_field(kEndTime, wall_time);
  return hparams_event(wall_time, "_hparams_/session_end_info", kPluginDataSessionEnd, end);
}

}  // namespace volt::loggers::detail
