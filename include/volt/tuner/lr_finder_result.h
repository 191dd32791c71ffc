#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "volt/callbacks/learning_rate_finder.h"

namespace volt::tuner {

/// What a learning-rate sweep recorded (Lightning's _LRFinder): the rate of every optimizer step
/// and its smoothed loss, and the suggestion taken from them.
class LRFinderResult {
 public:
  LRFinderResult() = default;
  LRFinderResult(callbacks::LearningRateFinderOptions options, std::vector<double> lrs, std::vector<double> losses,
                 bool stopped_early);

  const callbacks::LearningRateFinderOptions& options() const { return options_; }
  const std::vector<double>& lrs() const { return lrs_; }
  const std::vector<double>& losses() const { return losses_; }
  /// True when the sweep stopped before num_training steps because the loss diverged.
  bool stopped_early() const { return stopped_early_; }
  /// The learning rate at the steepest descent of the smoothed loss (Lightning's suggestion(),
  /// callbacks::lr_finder_suggestion_index); nullopt, with a message on stderr (rank 0), when fewer
  /// than two losses remain after skipping.
  std::optional<double> suggestion(int64_t skip_begin = 10, int64_t skip_end = 1) const;
  /// The index of the suggestion in lrs() (nullopt as for suggestion()).
  std::optional<size_t> optimal_index(int64_t skip_begin = 10, int64_t skip_end = 1) const;

  /// The loss against the learning rate on a log axis, the suggestion as a red dot, as an SVG
  /// document (title, axis labels and ticks as text).
  std::string plot_svg(int64_t skip_begin = 10, int64_t skip_end = 1) const;
  /// The same plot as a PNG file's bytes (RGB; no text: the SVG has the labels).
  std::string plot_png(int64_t skip_begin = 10, int64_t skip_end = 1) const;
  /// Writes `path_stem`.svg and `path_stem`.png, each atomically (temporary file, fsync, rename).
  /// A folder that does not exist is a ConfigError naming it; a write failure a volt::Error.
  void save_plot(const std::string& path_stem, int64_t skip_begin = 10, int64_t skip_end = 1) const;

 private:
  callbacks::LearningRateFinderOptions options_;
  std::vector<double> lrs_, losses_;
  bool stopped_early_ = false;
};

}  // namespace volt::tuner
