#include "volt/callbacks/learning_rate_finder.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include "callbacks/detail/optimizer_snapshot.h"
#include "volt/core/error.h"
#include "volt/core/trainer_view.h"
#include "volt/core/printable.h"

namespace volt::callbacks {

struct LearningRateSweep::Snapshot {
  explicit Snapshot(torch::optim::Optimizer& optimizer) : optimizer(optimizer) {}
  detail::OptimizerSnapshot optimizer;
};

namespace {

std::string num(double v) { return exact_number_text(v); }

}  // namespace

LRFinderMode parse_lr_finder_mode(const std::string& text, const std::string& flag) {
  if (text == "exponential") return LRFinderMode::kExponential;
  if (text == "linear") return LRFinderMode::kLinear;
  throw ConfigError(flag + "='" + text + "' is not a learning-rate finder mode. Use exponential or linear.");
}

const char* to_string(LRFinderMode mode) {
  return mode == LRFinderMode::kLinear ? "linear" : "exponential";
}

void check_lr_finder_options(const LearningRateFinderOptions& o) {
  if (!std::isfinite(o.min_lr) || o.min_lr <= 0.0) {
    throw ConfigError("min_lr=" + num(o.min_lr) + " is not a positive learning rate. Use e.g. 1e-8 (the default).");
  }
  if (!std::isfinite(o.max_lr) || o.max_lr <= o.min_lr) {
    throw ConfigError("max_lr=" + num(o.max_lr) + " must be finite and larger than min_lr=" + num(o.min_lr) +
                      ". Use e.g. 1 (the default).");
  }
  if (o.num_training_steps < 1) {
    throw ConfigError("num_training=" + std::to_string(o.num_training_steps) +
                      " is not a number of sweep steps. Use 1 or more (default 100).");
  }
  if (o.early_stop_threshold && (!std::isfinite(*o.early_stop_threshold) || *o.early_stop_threshold <= 0.0)) {
    throw ConfigError("early_stop_threshold=" + num(*o.early_stop_threshold) +
                      " is not a positive factor. Use e.g. 4 (the default), or none to never stop early.");
  }
}

double lr_finder_rate(const LearningRateFinderOptions& o, int64_t step) {
  if (step <= 0) return o.min_lr;
  const double r = static_cast<double>(step + 1) / static_cast<double>(o.num_training_steps);
  if (o.mode == LRFinderMode::kLinear) return o.min_lr + r * (o.max_lr - o.min_lr);
  return o.min_lr * std::pow(o.max_lr / o.min_lr, r);
}

std::optional<size_t> lr_finder_suggestion_index(const std::vector<double>& losses, int64_t skip_begin,
                                                 int64_t skip_end) {
  // Python's losses[skip_begin:-skip_end], negative and oversized bounds clamped as a slice does.
  const auto n = static_cast<int64_t>(losses.size());
  const auto clamp = [n](int64_t i) { return i < 0 ? std::max<int64_t>(0, n + i) : std::min(i, n); };
  const int64_t begin = clamp(skip_begin);
  const int64_t end = clamp(-skip_end);
  std::vector<float> kept;  // torch.tensor of Python floats: float32
  for (int64_t i = begin; i < end; ++i) {
    const auto v = static_cast<float>(losses[static_cast<size_t>(i)]);
    if (std::isfinite(v)) kept.push_back(v);
  }
  if (kept.size() < 2) return std::nullopt;
  const size_t m = kept.size();
  const auto gradient = [&](size_t i) -> float {
    if (i == 0) return kept[1] - kept[0];
    if (i == m - 1) return kept[m - 1] - kept[m - 2];
    return (kept[i + 1] - kept[i - 1]) / 2.0f;
  };
  size_t best = 0;
  float best_value = gradient(0);
  for (size_t i = 1; i < m; ++i) {
    const float g = gradient(i);
    if (g < best_value) {
      best = i;
      best_value = g;
    }
  }
  return best + static_cast<size_t>(std::max<int64_t>(0, skip_begin));
}

double LRFinderCurve::add(double loss, int64_t global_step) {
  avg_ = beta_ * avg_ + (1.0 - beta_) * loss;
  const double smoothed = avg_ / (1.0 - std::pow(beta_, static_cast<double>(global_step + 1)));
  if (threshold_ && global_step > 1 && smoothed > *threshold_ * best_) diverged_ = true;
  if (smoothed < best_ || global_step == 1) best_ = smoothed;
  smoothed_.push_back(smoothed);
  return smoothed;
}

LearningRateSweep::LearningRateSweep(LearningRateFinderOptions options)
    : options_(options), curve_(options.early_stop_threshold) {
  check_lr_finder_options(options_);
}

LearningRateSweep::~LearningRateSweep() = default;

namespace {

void set_lr(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

}  // namespace

void LearningRateSweep::on_fit_start(TrainerView& view) {
  const auto& optimizers = view.optimizers();
  if (optimizers.size() != 1) {
    throw ConfigError("the learning-rate finder needs exactly one optimizer, but configure_optimizers returned " +
                      std::to_string(optimizers.size()) + ". Return a single optimizer for the sweep.");
  }
  snapshot_ = std::make_unique<Snapshot>(*optimizers[0]);
  curve_ = LRFinderCurve(options_.early_stop_threshold);
  lrs_.clear();
  losses_.clear();
  stopped_early_ = false;
  first_step_ = last_step_ = view.state().global_step;
  set_lr(*optimizers[0], options_.min_lr);
}

void LearningRateSweep::on_train_batch_start(TrainerView& view, const Batch&, int64_t) {
  if (!snapshot_) return;
  // The rate of the optimizer step this batch belongs to; setting it at every batch of an
  // accumulation window keeps it whatever a scheduler of the module did in between.
  pending_lr_ = lr_finder_rate(options_, view.state().global_step - first_step_);
  set_lr(*view.optimizers()[0], pending_lr_);
}

void LearningRateSweep::on_train_batch_end(TrainerView& view, const at::Tensor& loss, const Batch&, int64_t) {
  if (!snapshot_) return;
  const int64_t step = view.state().global_step;
  if (step == last_step_) return;  // a batch inside an accumulation window: no optimizer step yet
  last_step_ = step;
  lrs_.push_back(pending_lr_);
  if (!loss.defined()) {
    // As Lightning: a step without a loss is recorded as NaN, which the suggestion skips.
    losses_.push_back(std::numeric_limits<double>::quiet_NaN());
  } else {
    losses_.push_back(curve_.add(loss.detach().item<double>(), step - first_step_));
  }
  bool stop = curve_.diverged();
  if (view.state().world_size > 1) stop = view.broadcast_from_rank_zero(stop ? "1" : "0") == "1";
  if (stop) {
    stopped_early_ = true;
    view.request_stop("the learning-rate finder's loss diverged (more than " +
                      num(options_.early_stop_threshold.value_or(0.0)) + " x the best smoothed loss)");
  } else if (static_cast<int64_t>(lrs_.size()) >= options_.num_training_steps) {
    view.request_stop("the learning-rate finder's sweep of " + std::to_string(options_.num_training_steps) +
                      " steps is complete");
  }
}

void LearningRateSweep::restore() {
  if (snapshot_) snapshot_->optimizer.restore();
  snapshot_.reset();
}

void LearningRateSweep::on_fit_end(TrainerView& view) {
  restore();
  if (view.state().world_size <= 1) return;
  // Rank 0's curve on every rank (Lightning broadcasts its results), exactly: hex floats.
  std::ostringstream out;
  char buf[64];
  out << (stopped_early_ ? 1 : 0) << ' ' << lrs_.size();
  for (size_t i = 0; i < lrs_.size(); ++i) {
    std::snprintf(buf, sizeof(buf), " %a", lrs_[i]);
    out << buf;
    std::snprintf(buf, sizeof(buf), " %a", losses_[i]);
    out << buf;
  }
  std::istringstream in(view.broadcast_from_rank_zero(out.str()));
  int stopped = 0;
  size_t n = 0;
  in >> stopped >> n;
  lrs_.assign(n, 0.0);
  losses_.assign(n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    std::string lr, loss;
    in >> lr >> loss;
    lrs_[i] = std::strtod(lr.c_str(), nullptr);
    losses_[i] = std::strtod(loss.c_str(), nullptr);
  }
  stopped_early_ = stopped != 0;
}

void LearningRateSweep::on_exception(TrainerView&, const std::exception&) {
  restore();
}

std::string lr_attr_name(const Module& module, const std::string& attr_name, const std::string& what) {
  const auto& hp = module.hparams();
  if (!attr_name.empty()) {
    if (hp.count(attr_name) == 0) {
      throw ConfigError(what + "(update_attr=true, attr_name=\"" + attr_name + "\"): the hyperparameters of " +
                        module.name() + " have no \"" + attr_name +
                        "\". Record it with save_hyperparameters and read it in configure_optimizers.");
    }
    return attr_name;
  }
  for (const char* name : {"lr", "learning_rate"}) {
    if (hp.count(name) != 0) return name;
  }
  throw ConfigError(what + "(update_attr=true): the hyperparameters of " + module.name() +
                    " hold neither \"lr\" nor \"learning_rate\", so the suggestion has nowhere to go. Call "
                    "save_hyperparameters({{\"lr\", ...}}) in the constructor and read hparams().at(\"lr\") in "
                    "configure_optimizers, name the key with attr_name, or set update_attr=false.");
}

LearningRateFinder::LearningRateFinder(LearningRateFinderOptions options, bool update_attr, std::string attr_name)
    : options_(options), update_attr_(update_attr), attr_name_(std::move(attr_name)) {
  check_lr_finder_options(options_);
}

LearningRateFinder::~LearningRateFinder() = default;

void LearningRateFinder::begin_search(Module& module, std::optional<int64_t>) {
  attr_ = update_attr_ ? lr_attr_name(module, attr_name_, "LearningRateFinder") : std::string();
  sweep_ = std::make_shared<LearningRateSweep>(options_);
  pending_ = true;
  optimal_lr_.reset();
}

std::optional<SearchTrial> LearningRateFinder::next_trial() {
  if (!pending_) return std::nullopt;
  pending_ = false;
  return SearchTrial{options_.num_training_steps, sweep_, std::nullopt};
}

void LearningRateFinder::end_trial(const SearchTrialOutcome&) {}

void LearningRateFinder::end_search(Module& module) {
  const auto i = lr_finder_suggestion_index(sweep_->losses());
  if (i && *i < sweep_->lrs().size()) optimal_lr_ = sweep_->lrs()[*i];
  if (optimal_lr_ && !attr_.empty()) {
    auto hp = module.hparams();
    hp[attr_] = num(*optimal_lr_);
    module.save_hyperparameters(std::move(hp));
  }
}

void LearningRateFinder::on_fit_start(TrainerView& view) {
  if (!optimal_lr_) return;
  const auto& optimizers = view.optimizers();
  if (optimizers.size() != 1) {
    throw ConfigError(
        "LearningRateFinder needs exactly one optimizer to set the learning rate it found, but "
        "configure_optimizers returned " +
        std::to_string(optimizers.size()) + ".");
  }
  set_lr(*optimizers[0], *optimal_lr_);
}

}  // namespace volt::callbacks
