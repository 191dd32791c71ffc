#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace torch::optim {
class Optimizer;
}

namespace volt {

/// A learning-rate schedule over an optimizer's parameter groups. The rate after
/// `last_epoch` steps is computed in closed form from the base rates, so the state
/// is one counter and a resumed run sets the same rates as an uninterrupted one.
class LRScheduler {
 public:
  explicit LRScheduler(torch::optim::Optimizer& optimizer);
  virtual ~LRScheduler() = default;

  /// Advances one interval (an epoch or a step, as configured) and sets the new rates.
  void step();
  /// The rates in effect now (after construction: the rates of step 0).
  std::vector<double> get_last_lr() const;
  /// How many times step() ran.
  int64_t last_epoch() const { return last_epoch_; }
  /// Restores the counter (and the rates it implies), e.g. from a checkpoint.
  void set_last_epoch(int64_t last_epoch);
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  /// The optimizer whose rates it sets.
  torch::optim::Optimizer& optimizer() const { return optimizer_; }
  /// The schedule's own settings under the names PyTorch's scheduler of the same name keeps in its
  /// state_dict() (StepLR: step_size, gamma); an empty object for a schedule PyTorch has no class for.
  /// Checkpoints write them beside the counters (docs/checkpoints.md).
  virtual nlohmann::json pytorch_settings() const;

 protected:
  /// The rate of a group whose base rate is `base_lr`, after `epoch` steps.
  virtual double lr_at(double base_lr, int64_t epoch) const = 0;
  /// Sets the rates of the current step; each concrete constructor calls it once (the
  /// base constructor cannot reach lr_at), so step 0's rates hold from the start.
  void apply();

 private:
  torch::optim::Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  int64_t last_epoch_ = 0;
};

/// lr = base * gamma^(epoch / step_size)
class StepLR : public LRScheduler {
 public:
  StepLR(torch::optim::Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
  nlohmann::json pytorch_settings() const override;

 protected:
  double lr_at(double base_lr, int64_t epoch) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

/// lr = base * gamma^(number of milestones <= epoch)
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(torch::optim::Optimizer& optimizer, std::vector<int64_t> milestones,
              double gamma = 0.1);
  nlohmann::json pytorch_settings() const override;

 protected:
  double lr_at(double base_lr, int64_t epoch) const override;

 private:
  std::vector<int64_t> milestones_;
  double gamma_;
};

/// lr = base * gamma^epoch
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(torch::optim::Optimizer& optimizer, double gamma);
  nlohmann::json pytorch_settings() const override;

 protected:
  double lr_at(double base_lr, int64_t epoch) const override;

 private:
  double gamma_;
};

/// Cosine annealing from base to eta_min over t_max steps (then held at eta_min).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(torch::optim::Optimizer& optimizer, int64_t t_max, double eta_min = 0.0);
  nlohmann::json pytorch_settings() const override;

 protected:
  double lr_at(double base_lr, int64_t epoch) const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

/// lr = base * factor(epoch), with a user function (warm-up, custom schedules).
class LambdaLR : public LRScheduler {
 public:
  LambdaLR(torch::optim::Optimizer& optimizer, std::function<double(int64_t)> factor);
  nlohmann::json pytorch_settings() const override;

 protected:
  double lr_at(double base_lr, int64_t epoch) const override;

 private:
  std::function<double(int64_t)> factor_;
};

}  // namespace volt
