#pragma once
// Event records as TensorBoard's event.proto and summary.proto define them, and the
// HParams plugin's summaries (tensorboard/plugins/hparams plugin_data.proto, api.proto),
// encoded with ProtoWriter. No LibTorch here.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "volt/core/types.h"

namespace volt::loggers::detail {

/// The first record of every event file: Event{wall_time, file_version: "brain.Event:2"}.
std::string file_version_event(double wall_time);
/// One Event whose Summary holds a simple_value per metric.
std::string scalars_event(double wall_time, int64_t step, const MetricMap& metrics);
/// The text plugin's summary: a DT_STRING tensor of shape [1].
std::string text_event(double wall_time, int64_t step, const std::string& tag, const std::string& text);

struct HistogramData {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit;  // right edge of each bucket
  std::vector<double> bucket;        // its count
};
/// Linear buckets between the smallest and largest of `values` (non-finite values are
/// left out; `values` must hold at least one finite value).
HistogramData make_histogram(const double* values, size_t n, int buckets = 30);
std::string histogram_event(double wall_time, int64_t step, const std::string& tag, const HistogramData& h);
/// Summary.Image; `colorspace` 1 (grey), 3 (RGB) or 4 (RGBA); `png` the encoded file.
std::string image_event(double wall_time, int64_t step, const std::string& tag, int64_t height, int64_t width,
                        int64_t colorspace, const std::string& png);

/// HParams plugin summaries, tags "_hparams_/session_start_info", "_hparams_/experiment",
/// "_hparams_/session_end_info". Values that read as finite numbers are number_value,
/// "true"/"false" bool_value, anything else string_value.
std::string hparams_session_start_event(double wall_time, const std::map<std::string, std::string>& hparams,
                                        const std::string& group_name);
std::string hparams_experiment_event(double wall_time, const std::map<std::string, std::string>& hparams,
                                     const std::vector<std::string>& metric_tags);
/// `status`: "success" (STATUS_SUCCESS), "failed" (STATUS_FAILURE), anything else
/// STATUS_UNKNOWN (an interrupted run).
std::string hparams_session_end_event(double wall_time, const std::string& status);

}  // namespace volt::loggers::detail
