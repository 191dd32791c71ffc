#include "volt/core/lr_scheduler.h"

#include <algorithm>
#include <cmath>

#include <torch/optim/optimizer.h>
#include <nlohmann/json.hpp>

#include "volt/core/error.h"

namespace volt {

LRScheduler::LRScheduler(torch::optim::Optimizer& optimizer) : optimizer_(optimizer) {
  for (auto& group : optimizer_.param_groups()) base_lrs_.push_back(group.options().get_lr());
}

void LRScheduler::step() {
  ++last_epoch_;
  apply();
}

void LRScheduler::set_last_epoch(int64_t last_epoch) {
  if (last_epoch < 0) {
    throw ConfigError("LRScheduler::set_last_epoch got " + std::to_string(last_epoch) +
                      "; the step count cannot be negative.");
  }
  last_epoch_ = last_epoch;
  apply();
}

std::vector<double> LRScheduler::get_last_lr() const {
  std::vector<double> out;
  for (auto& group : optimizer_.param_groups()) out.push_back(group.options().get_lr());
  return out;
}

nlohmann::json LRScheduler::pytorch_settings() const {
  return nlohmann::json::object();
}

void LRScheduler::apply() {
  auto& groups = optimizer_.param_groups();
  for (size_t i = 0; i < groups.size() && i < base_lrs_.size(); ++i) {
    groups[i].options().set_lr(lr_at(base_lrs_[i], last_epoch_));
  }
}

StepLR::StepLR(torch::optim::Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  if (step_size <= 0) {
    throw ConfigError("StepLR step_size=" + std::to_string(step_size) + " must be a positive count of intervals.");
  }
  apply();
}
nlohmann::json StepLR::pytorch_settings() const {
  return {{"step_size", step_size_}, {"gamma", gamma_}};
}
double StepLR::lr_at(double base_lr, int64_t epoch) const {
  return base_lr * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

MultiStepLR::MultiStepLR(torch::optim::Optimizer& optimizer, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(optimizer), milestones_(std::move(milestones)), gamma_(gamma) {
  if (!std::is_sorted(milestones_.begin(), milestones_.end())) {
    throw ConfigError("MultiStepLR milestones must be increasing; sort them.");
  }
  apply();
}
nlohmann::json MultiStepLR::pytorch_settings() const {
  // PyTorch keeps a Counter: milestone -> how often it is listed (each listing multiplies by gamma once more).
  nlohmann::json counts = nlohmann::json::object();
  for (const int64_t m : milestones_) {
    auto& n = counts[std::to_string(m)];
    n = n.is_null() ? 1 : n.get<int64_t>() + 1;
  }
  return {{"milestones", counts}, {"gamma", gamma_}};
}
double MultiStepLR::lr_at(double base_lr, int64_t epoch) const {
  auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), epoch) - milestones_.begin();
  return base_lr * std::pow(gamma_, static_cast<double>(passed));
}

ExponentialLR::ExponentialLR(torch::optim::Optimizer& optimizer, double gamma) : LRScheduler(optimizer), gamma_(gamma) {
  apply();
}
nlohmann::json ExponentialLR::pytorch_settings() const {
  return {{"gamma", gamma_}};
}
double ExponentialLR::lr_at(double base_lr, int64_t epoch) const {
  return base_lr * std::pow(gamma_, static_cast<double>(epoch));
}

CosineAnnealingLR::CosineAnnealingLR(torch::optim::Optimizer& optimizer, int64_t t_max, double eta_min)
    : LRScheduler(optimizer), t_max_(t_max), eta_min_(eta_min) {
  if (t_max <= 0) {
    throw ConfigError("CosineAnnealingLR t_max=" + std::to_string(t_max) + " must be a positive count of intervals.");
  }
  apply();
}
nlohmann::json CosineAnnealingLR::pytorch_settings() const {
  return {{"T_max", t_max_}, {"eta_min", eta_min_}};
}
double CosineAnnealingLR::lr_at(double base_lr, int64_t epoch) const {
  const double t = static_cast<double>(std::min(epoch, t_max_));
  return eta_min_ + (base_lr - eta_min_) * (1.0 + std::cos(M_PI * t / static_cast<double>(t_max_))) / 2.0;
}

LambdaLR::LambdaLR(torch::optim::Optimizer& optimizer, std::function<double(int64_t)> factor)
    : LRScheduler(optimizer), factor_(std::move(factor)) {
  if (!factor_) throw ConfigError("LambdaLR needs a factor function; none was given.");
  apply();
}
nlohmann::json LambdaLR::pytorch_settings() const {
  // PyTorch writes a function's state only for callable objects, None for a function.
  return {{"lr_lambdas", nlohmann::json::array_t(base_lrs().size(), nullptr)}};
}
double LambdaLR::lr_at(double base_lr, int64_t epoch) const {
  return base_lr * factor_(epoch);
}

}  // namespace volt
