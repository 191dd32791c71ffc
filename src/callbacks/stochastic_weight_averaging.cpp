#include "volt/callbacks/stochastic_weight_averaging.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <sstream>
#include <type_traits>
#include <utility>

#include <ATen/core/grad_mode.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/optim/optimizer.h>

#include "callbacks/detail/named_tensors.h"
#include "volt/core/error.h"
#include "volt/core/module.h"
#include "volt/core/trainer_control.h"

namespace volt::callbacks {
namespace {

const std::string kAveragePrefix = "swa.average.";

std::string join(const std::vector<double>& values) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
  out << "]";
  return out.str();
}

double clamp01(double x) {
  return std::max(0.0, std::min(1.0, x));
}

std::string epoch_start_text(const std::variant<int64_t, double>& start) {
  if (std::holds_alternative<int64_t>(start)) return std::to_string(std::get<int64_t>(start));
  std::ostringstream out;
  out << std::get<double>(start);
  return out.str();
}

/// BatchNormOptions' momentum: c10::optional<double> in LibTorch 1.13, std::optional in 2.x.
using Momentum = std::decay_t<decltype(std::declval<torch::nn::BatchNormOptions&>().momentum())>;

/// A batch-norm layer's statistics and the options whose momentum the pass unsets.
struct BatchNormState {
  torch::nn::BatchNormOptions* options;
  at::Tensor running_mean, running_var, num_batches_tracked;
};

template <typename Impl>
bool add_batch_norm(const std::shared_ptr<torch::nn::Module>& m, std::vector<BatchNormState>& out) {
  auto* bn = dynamic_cast<Impl*>(m.get());
  if (bn == nullptr) return false;
  // Without running statistics there is nothing to estimate (track_running_stats=false).
  if (bn->running_mean.defined() && bn->running_var.defined()) {
    out.push_back({&bn->options, bn->running_mean, bn->running_var, bn->num_batches_tracked});
  }
  return true;
}

std::vector<BatchNormState> batch_norm_layers(const torch::nn::Module& module) {
  std::vector<BatchNormState> out;
  for (const auto& m : module.modules(/*include_self=*/false)) {
    add_batch_norm<torch::nn::BatchNorm1dImpl>(m, out) || add_batch_norm<torch::nn::BatchNorm2dImpl>(m, out) ||
        add_batch_norm<torch::nn::BatchNorm3dImpl>(m, out);
  }
  return out;
}

}  // namespace

// --- SWALR ---

SWALR::SWALR(torch::optim::Optimizer& optimizer, std::vector<double> swa_lrs, int64_t annealing_epochs,
             const std::string& annealing_strategy)
    : LRScheduler(optimizer),
      swa_lrs_(std::move(swa_lrs)),
      annealing_epochs_(annealing_epochs),
      cosine_(annealing_strategy == "cos") {
  const size_t groups = optimizer.param_groups().size();
  if (swa_lrs_.size() == 1 && groups > 1) swa_lrs_.assign(groups, swa_lrs_.front());
  if (swa_lrs_.size() != groups) {
    throw ConfigError("SWALR got " + std::to_string(swa_lrs_.size()) + " swa_lrs " + join(swa_lrs_) +
                      " for an optimizer with " + std::to_string(groups) +
                      " parameter groups. Give one rate for all groups or one per group.");
  }
  for (double lr : swa_lrs_) {
    if (!(lr > 0.0) || !std::isfinite(lr)) {
      throw ConfigError("SWALR swa_lrs=" + join(swa_lrs_) + ": every rate must be a finite number above 0.");
    }
  }
  if (annealing_epochs < 0) {
    throw ConfigError("SWALR annealing_epochs=" + std::to_string(annealing_epochs) +
                      " is below 0; use 0 (the SWA rate at once) or a positive count of epochs.");
  }
  if (annealing_strategy != "cos" && annealing_strategy != "linear") {
    throw ConfigError("SWALR annealing_strategy='" + annealing_strategy + "' is not one of 'cos', 'linear'.");
  }
  apply();
}

double SWALR::anneal(double t) const {
  return cosine_ ? (1.0 - std::cos(M_PI * t)) / 2.0 : t;
}

// PyTorch's SWALR.get_lr, step by step from the starting rate: each step recovers the rate
// the annealing started from out of the current one, then anneals it one step further. The
// same operations in the same order give the same doubles as PyTorch's.
double SWALR::rate(double start_lr, double swa_lr, int64_t steps) const {
  double lr = start_lr;
  const double span = static_cast<double>(std::max<int64_t>(1, annealing_epochs_));
  for (int64_t s = 0; s <= steps; ++s) {
    const int64_t step = annealing_epochs_ == 0 ? std::max<int64_t>(1, s) : s;
    const double prev_alpha = anneal(clamp01(static_cast<double>(step - 1) / span));
    const double prev_lr = prev_alpha == 1.0 ? swa_lr : (lr - prev_alpha * swa_lr) / (1.0 - prev_alpha);
    const double alpha = anneal(clamp01(static_cast<double>(step) / span));
    lr = swa_lr * alpha + prev_lr * (1.0 - alpha);
  }
  return lr;
}

double SWALR::lr_at(double base_lr, int64_t epoch) const {
  const size_t group = next_group_;
  next_group_ = (next_group_ + 1) % swa_lrs_.size();
  return rate(base_lr, swa_lrs_[group], epoch);
}

// --- StochasticWeightAveraging ---

StochasticWeightAveraging::StochasticWeightAveraging(Options options) : options_(std::move(options)) {
  if (options_.swa_lrs.empty()) {
    throw ConfigError(
        "StochasticWeightAveraging needs swa_lrs: the SWA learning rate, one for all parameter "
        "groups (e.g. {0.05}) or one per group.");
  }
  for (double lr : options_.swa_lrs) {
    if (!(lr > 0.0) || !std::isfinite(lr)) {
      throw ConfigError("StochasticWeightAveraging swa_lrs=" + join(options_.swa_lrs) +
                        ": every rate must be a finite number above 0, e.g. {0.05}.");
    }
  }
  const auto& start = options_.swa_epoch_start;
  if (std::holds_alternative<int64_t>(start) && std::get<int64_t>(start) < 1) {
    throw ConfigError("StochasticWeightAveraging swa_epoch_start=" + epoch_start_text(start) +
                      ": a whole number is the 1-based epoch averaging starts at, so at least 1; or give a "
                      "fraction of max_epochs in [0, 1] such as 0.8.");
  }
  if (std::holds_alternative<double>(start)) {
    const double f = std::get<double>(start);
    if (!(f >= 0.0 && f <= 1.0)) {
      throw ConfigError("StochasticWeightAveraging swa_epoch_start=" + epoch_start_text(start) +
                        ": a fraction of max_epochs must lie in [0, 1]; or give a whole 1-based epoch such as 3.");
    }
  }
  if (options_.annealing_epochs < 0) {
    throw ConfigError("StochasticWeightAveraging annealing_epochs=" + std::to_string(options_.annealing_epochs) +
                      " is below 0; use 0 (the SWA rate at once) or a positive count of epochs.");
  }
  if (options_.annealing_strategy != "cos" && options_.annealing_strategy != "linear") {
    throw ConfigError("StochasticWeightAveraging annealing_strategy='" + options_.annealing_strategy +
                      "' is not one of 'cos', 'linear'.");
  }
  if (!options_.avg_fn) options_.avg_fn = &StochasticWeightAveraging::mean;
}

at::Tensor StochasticWeightAveraging::mean(const at::Tensor& averaged, const at::Tensor& current, int64_t n_averaged) {
  return averaged + (current - averaged) / static_cast<double>(n_averaged + 1);
}

nlohmann::json StochasticWeightAveraging::state_dict() const {
  nlohmann::json scheduler = nullptr;
  if (scheduler_) {
    scheduler = {{"start_lrs", scheduler_start_lrs_}, {"steps", scheduler_->last_epoch()}};
  } else if (restored_scheduler_steps_) {
    scheduler = {{"start_lrs", scheduler_start_lrs_}, {"steps", *restored_scheduler_steps_}};
  }
  return {{"n_averaged", n_averaged_}, {"latest_update_epoch", latest_update_epoch_}, {"scheduler", scheduler}};
}

void StochasticWeightAveraging::load_state_dict(const nlohmann::json& state) {
  n_averaged_ = state.at("n_averaged").get<int64_t>();
  latest_update_epoch_ = state.at("latest_update_epoch").get<int64_t>();
  if (n_averaged_ < 0) {
    throw CheckpointError("StochasticWeightAveraging state has n_averaged=" + std::to_string(n_averaged_) +
                          ", below 0; the checkpoint is damaged.");
  }
  const auto& scheduler = state.at("scheduler");
  if (scheduler.is_null()) {
    restored_scheduler_steps_.reset();
    scheduler_start_lrs_.clear();
  } else {
    scheduler_start_lrs_ = scheduler.at("start_lrs").get<std::vector<double>>();
    const auto steps = scheduler.at("steps").get<int64_t>();
    if (steps < 0) {
      throw CheckpointError("StochasticWeightAveraging state has a SWALR step count of " + std::to_string(steps) +
                            ", below 0; the checkpoint is damaged.");
    }
    restored_scheduler_steps_ = steps;
  }
  scheduler_.reset();
  initialized_ = false;
}

void StochasticWeightAveraging::setup(TrainerView&, Stage stage) {
  if (stage != Stage::kFit) return;
  initialized_ = false;
  n_averaged_ = 0;
  latest_update_epoch_ = -1;
  average_.clear();
  scheduler_.reset();
  scheduler_start_lrs_.clear();
  restored_scheduler_steps_.reset();
}

void StochasticWeightAveraging::on_fit_start(TrainerView& view) {
  TrainerControl::of(view, state_key());  // refused at once outside a Trainer
  const auto& optimizers = view.optimizers();
  if (optimizers.size() != 1) {
    throw ConfigError("StochasticWeightAveraging works with one optimizer; configure_optimizers returned " +
                      std::to_string(optimizers.size()) + ". Return one optimizer, or leave the callback out.");
  }
  if (!view.module().automatic_optimization()) {
    throw ConfigError(
        "StochasticWeightAveraging needs automatic optimization: its SWALR is stepped by the Trainer "
        "at every epoch end, which manual optimization does not do. Remove "
        "set_automatic_optimization(false), or leave the callback out.");
  }
  if (view.lr_schedulers().size() > 1) {
    throw ConfigError(
        "StochasticWeightAveraging replaces the LR scheduler with its SWALR, so it works with at most "
        "one; configure_optimizers returned " +
        std::to_string(view.lr_schedulers().size()) + ".");
  }
  const size_t groups = optimizers.front()->param_groups().size();
  if (options_.swa_lrs.size() != 1 && options_.swa_lrs.size() != groups) {
    throw ConfigError("StochasticWeightAveraging swa_lrs=" + join(options_.swa_lrs) + " has " +
                      std::to_string(options_.swa_lrs.size()) + " rates but the optimizer has " +
                      std::to_string(groups) + " parameter groups. Give one rate for all groups or one per group.");
  }
  const int64_t max_epochs = view.state().max_epochs;
  if (max_epochs < 1) {
    throw ConfigError(
        "StochasticWeightAveraging averages the epochs from swa_epoch_start to max_epochs, but "
        "max_epochs=" +
        std::to_string(max_epochs) + (max_epochs < 0 ? " (only max_steps bounds this run)" : "") +
        ". Set max_epochs to 1 or more.");
  }
  const auto& start = options_.swa_epoch_start;
  const int64_t first = std::holds_alternative<int64_t>(start)
                            ? std::get<int64_t>(start)
                            : static_cast<int64_t>(static_cast<double>(max_epochs) * std::get<double>(start));
  swa_start_ = std::max<int64_t>(first - 1, 0);
  swa_end_ = max_epochs - 1;
  if (swa_start_ > swa_end_) {
    throw ConfigError("StochasticWeightAveraging swa_epoch_start=" + epoch_start_text(start) + " is past max_epochs=" +
                      std::to_string(max_epochs) + ", so averaging would never start. Use an epoch up to " +
                      std::to_string(max_epochs) + " or a fraction of max_epochs such as 0.8.");
  }
}

void StochasticWeightAveraging::on_train_epoch_start(TrainerView& view) {
  const int64_t epoch = view.state().current_epoch;
  const bool averaging = swa_start_ <= epoch && epoch <= swa_end_;
  if (!initialized_ && averaging) {
    initialized_ = true;
    if (epoch != swa_start_ && !restored_scheduler_steps_ && view.state().is_global_zero) {
      std::cerr << "[volt] warning: StochasticWeightAveraging starts at epoch " << epoch
                << ", after swa_start=" << swa_start_
                << ", without its state from a checkpoint: the average and the SWALR start here, "
                << "unlike in a run that went through epoch " << swa_start_ << ".\n";
    }
    install_scheduler(view);
  }
  if (averaging && epoch > latest_update_epoch_) {
    fold(view);
    latest_update_epoch_ = epoch;
  }
}

void StochasticWeightAveraging::install_scheduler(TrainerView& view) {
  torch::optim::Optimizer& optimizer = *view.optimizers().front();
  auto& groups = optimizer.param_groups();
  if (restored_scheduler_steps_) {
    if (scheduler_start_lrs_.size() != groups.size()) {
      throw CheckpointError("StochasticWeightAveraging state holds " + std::to_string(scheduler_start_lrs_.size()) +
                            " starting rates for an optimizer with " + std::to_string(groups.size()) +
                            " parameter groups; the checkpoint was written for another optimizer.");
    }
    // The restore set the rates the module's own scheduler would have had: start again from SWA's.
    for (size_t i = 0; i < groups.size(); ++i) groups[i].options().set_lr(scheduler_start_lrs_[i]);
  } else {
    scheduler_start_lrs_.clear();
    for (auto& group : groups) scheduler_start_lrs_.push_back(group.options().get_lr());
  }
  scheduler_ =
      std::make_shared<SWALR>(optimizer, options_.swa_lrs, options_.annealing_epochs, options_.annealing_strategy);
  if (restored_scheduler_steps_) {
    scheduler_->set_last_epoch(*restored_scheduler_steps_);
    restored_scheduler_steps_.reset();
  }
  LRSchedulerConfig config;
  config.scheduler = scheduler_;
  config.interval = Interval::kEpoch;
  config.frequency = 1;
  std::vector<LRSchedulerConfig> schedulers = view.lr_schedulers();
  if (schedulers.empty()) {
    schedulers.push_back(config);
  } else {
    const auto& old = schedulers.front();
    if ((old.interval != Interval::kEpoch || old.frequency != 1) && !warned_scheduler_ && view.state().is_global_zero) {
      warned_scheduler_ = true;
      std::cerr << "[volt] warning: StochasticWeightAveraging replaces the module's LR scheduler (interval "
                << (old.interval == Interval::kStep ? "step" : "epoch") << ", frequency " << old.frequency
                << ") with its SWALR, which steps once per epoch.\n";
    }
    schedulers.front() = config;
  }
  TrainerControl::of(view, state_key()).set_lr_schedulers(std::move(schedulers));
}

void StochasticWeightAveraging::fold(const TrainerView& view) {
  at::NoGradGuard no_grad;
  const auto params = view.module().parameters();
  if (n_averaged_ == 0 || average_.empty()) {
    average_.clear();
    for (const auto& p : params) average_.push_back(p.detach().clone());
  } else {
    if (average_.size() != params.size()) {
      throw Error("StochasticWeightAveraging holds " + std::to_string(average_.size()) +
                  " averaged parameters but the module has " + std::to_string(params.size()) +
                  "; the module changed during fit.");
    }
    for (size_t i = 0; i < params.size(); ++i) {
      average_[i].copy_(options_.avg_fn(average_[i], params[i].detach(), n_averaged_));
    }
  }
  ++n_averaged_;
}

void StochasticWeightAveraging::transfer(const TrainerView& view) const {
  at::NoGradGuard no_grad;
  const auto params = view.module().parameters();
  for (size_t i = 0; i < params.size() && i < average_.size(); ++i) params[i].detach().copy_(average_[i]);
}

void StochasticWeightAveraging::update_batch_norm(TrainerView& view) const {
  std::vector<BatchNormState> layers = batch_norm_layers(view.module());
  if (layers.empty()) return;
  std::vector<Momentum> momenta;
  {
    at::NoGradGuard no_grad;
    for (auto& bn : layers) {
      bn.running_mean.zero_();
      bn.running_var.fill_(1.0);
      if (bn.num_batches_tracked.defined()) bn.num_batches_tracked.zero_();
      momenta.push_back(bn.options->momentum());
      bn.options->momentum(Momentum());  // unset: a cumulative average over the pass
    }
  }
  struct RestoreMomenta {
    std::vector<BatchNormState>& layers;
    std::vector<Momentum>& momenta;
    ~RestoreMomenta() {
      for (size_t i = 0; i < layers.size(); ++i) layers[i].options->momentum(momenta[i]);
    }
  } restore{layers, momenta};
  TrainerControl& control = TrainerControl::of(view, state_key());
  control.forward_training_data();
  if (view.state().world_size <= 1) return;
  // Each rank saw its part of the data, the same number of batches: the mean of the ranks'
  // cumulative averages is the average over every batch.
  at::NoGradGuard no_grad;
  for (auto& bn : layers) {
    bn.running_mean.copy_(control.all_reduce_mean(bn.running_mean));
    bn.running_var.copy_(control.all_reduce_mean(bn.running_var));
    if (bn.num_batches_tracked.defined()) {
      at::Tensor count = control.all_reduce_mean(bn.num_batches_tracked.to(at::kDouble));
      bn.num_batches_tracked.copy_(count.round());
    }
  }
}

void StochasticWeightAveraging::on_train_end(TrainerView& view) {
  // Lightning's rule: only a fit that ran through the last epoch gets the average.
  if (view.state().current_epoch - 1 != swa_end_ || n_averaged_ == 0) return;
  transfer(view);
  update_batch_norm(view);
}

void StochasticWeightAveraging::on_save_checkpoint(TrainerView& view, Checkpoint& checkpoint) {
  if (average_.empty()) return;
  const auto named = detail::named_tensors(view.module(), /*buffers=*/false);
  for (size_t i = 0; i < named.size() && i < average_.size(); ++i) {
    checkpoint.tensors[kAveragePrefix + named[i].first] = average_[i];
  }
}

void StochasticWeightAveraging::on_load_checkpoint(TrainerView& view, const Checkpoint& checkpoint) {
  average_.clear();
  if (n_averaged_ == 0) return;
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> average;  // taken over only once every tensor checked out
  for (const auto& [name, param] : detail::named_tensors(view.module(), /*buffers=*/false)) {
    auto it = checkpoint.tensors.find(kAveragePrefix + name);
    if (it == checkpoint.tensors.end()) {
      throw CheckpointError("the checkpoint's StochasticWeightAveraging state says " + std::to_string(n_averaged_) +
                            " weights are averaged, but it holds no averaged '" + name + "' (tensor " + kAveragePrefix +
                            name + "); it was written for another model, or is damaged.");
    }
    if (it->second.sizes() != param.sizes()) {
      std::ostringstream msg;
      msg << "the checkpoint's averaged '" << name << "' has shape " << it->second.sizes() << " but the module's is "
          << param.sizes() << "; the checkpoint was written for another model.";
      throw CheckpointError(msg.str());
    }
    average.push_back(it->second.to(param.options()).clone());
  }
  average_ = std::move(average);
}

}  // namespace volt::callbacks
