#include "volt/callbacks/ema_weight_averaging.h"

#include <cmath>
#include <iostream>
#include <sstream>

#include <ATen/core/grad_mode.h>

#include "callbacks/detail/named_tensors.h"
#include "volt/core/error.h"
#include "volt/core/module.h"

namespace volt::callbacks {
namespace {

const std::string kCurrentPrefix = "ema.current.";
const std::string kStateDictPrefix = "state_dict.";

std::string number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

}  // namespace

EMAWeightAveraging::EMAWeightAveraging(Options options) : options_(options) {
  if (!(options_.decay > 0.0 && options_.decay < 1.0)) {
    throw ConfigError("EMAWeightAveraging decay=" + number(options_.decay) +
                      " must lie strictly between 0 and 1 (the old average's weight per update), e.g. 0.999.");
  }
  if (options_.update_every_n_steps < 1) {
    throw ConfigError("EMAWeightAveraging update_every_n_steps=" + std::to_string(options_.update_every_n_steps) +
                      " must be 1 or more (1: after every optimizer step).");
  }
  if (options_.update_starting_at_step && *options_.update_starting_at_step < 0) {
    throw ConfigError(
        "EMAWeightAveraging update_starting_at_step=" + std::to_string(*options_.update_starting_at_step) +
        " is below 0; give a step index of 0 or more, or leave it unset to start at once.");
  }
}

EMAWeightAveraging::EMAWeightAveraging() : EMAWeightAveraging(Options()) {}

nlohmann::json EMAWeightAveraging::state_dict() const {
  return {{"n_averaged", n_averaged_}, {"latest_update_step", latest_update_step_}};
}

void EMAWeightAveraging::load_state_dict(const nlohmann::json& state) {
  n_averaged_ = state.at("n_averaged").get<int64_t>();
  latest_update_step_ = state.at("latest_update_step").get<int64_t>();
  if (n_averaged_ < 0 || latest_update_step_ < 0) {
    throw CheckpointError("EMAWeightAveraging state has n_averaged=" + std::to_string(n_averaged_) +
                          " and latest_update_step=" + std::to_string(latest_update_step_) +
                          "; counts below 0 mean the checkpoint is damaged.");
  }
}

void EMAWeightAveraging::setup(TrainerView&, Stage stage) {
  if (stage != Stage::kFit) return;
  n_averaged_ = 0;
  latest_update_step_ = 0;
  average_.clear();
  swapped_ = false;
}

void EMAWeightAveraging::copy_from_module(const TrainerView& view) {
  at::NoGradGuard no_grad;
  average_.clear();
  for (const auto& [name, t] : detail::named_tensors(view.module(), /*buffers=*/true)) {
    average_.push_back(t.detach().clone());
  }
}

void EMAWeightAveraging::on_fit_start(TrainerView& view) {
  if (average_.empty()) copy_from_module(view);
}

bool EMAWeightAveraging::should_update(int64_t step_idx) const {
  const bool started = !options_.update_starting_at_step || step_idx >= *options_.update_starting_at_step;
  return started && step_idx % options_.update_every_n_steps == 0;
}

void EMAWeightAveraging::update(const TrainerView& view) {
  at::NoGradGuard no_grad;
  const auto current = detail::named_tensors(view.module(), /*buffers=*/true);
  const size_t params = view.module().parameters().size();
  if (average_.size() != current.size()) {
    throw Error("EMAWeightAveraging holds " + std::to_string(average_.size()) +
                " averaged tensors but the module has " + std::to_string(current.size()) +
                " parameters and buffers; the module changed during fit.");
  }
  const double weight = 1.0 - options_.decay;
  for (size_t i = 0; i < current.size(); ++i) {
    at::Tensor& avg = average_[i];
    const at::Tensor cur = current[i].second.detach();
    const bool averaged = i < params || options_.use_buffers;
    if (n_averaged_ == 0 || !averaged) {
      // The first update copies; buffers that are not averaged follow the module.
      avg.copy_(cur);
    } else if (avg.is_floating_point() || avg.is_complex()) {
      avg.lerp_(cur, weight);
    } else {
      avg.copy_(avg * options_.decay + cur * weight);
    }
  }
  ++n_averaged_;
}

void EMAWeightAveraging::on_train_batch_end(TrainerView& view, const at::Tensor&, const Batch&, int64_t) {
  const int64_t step = view.state().global_step;
  if (step > latest_update_step_ && should_update(step - 1)) {
    update(view);
    latest_update_step_ = step;
  }
}

void EMAWeightAveraging::swap(const TrainerView& view) {
  at::NoGradGuard no_grad;
  const auto current = detail::named_tensors(view.module(), /*buffers=*/true);
  for (size_t i = 0; i < current.size() && i < average_.size(); ++i) {
    at::Tensor cur = current[i].second.detach();
    at::Tensor held = average_[i].clone();
    average_[i].copy_(cur);
    cur.copy_(held);
  }
  swapped_ = !swapped_;
}

void EMAWeightAveraging::on_validation_epoch_start(TrainerView& view) {
  if (view.state().fn != TrainerFn::kFitting || average_.empty() || swapped_) return;
  swap(view);
}

void EMAWeightAveraging::on_validation_epoch_end(TrainerView& view) {
  if (swapped_) swap(view);
}

void EMAWeightAveraging::on_train_end(TrainerView& view) {
  if (average_.empty()) return;
  if (swapped_) swap(view);
  at::NoGradGuard no_grad;
  const auto current = detail::named_tensors(view.module(), /*buffers=*/true);
  for (size_t i = 0; i < current.size() && i < average_.size(); ++i) current[i].second.detach().copy_(average_[i]);
}

void EMAWeightAveraging::on_save_checkpoint(TrainerView& view, Checkpoint& checkpoint) {
  if (average_.empty()) return;
  const auto current = detail::named_tensors(view.module(), /*buffers=*/true);
  for (size_t i = 0; i < current.size() && i < average_.size(); ++i) {
    const std::string& name = current[i].first;
    auto it = checkpoint.tensors.find(kStateDictPrefix + name);
    if (it == checkpoint.tensors.end()) continue;
    // During a validation the module holds the average and average_ the module's own weights.
    if (swapped_) {
      checkpoint.tensors[kCurrentPrefix + name] = average_[i];
    } else {
      checkpoint.tensors[kCurrentPrefix + name] = it->second;
      it->second = average_[i];
    }
  }
}

void EMAWeightAveraging::on_load_checkpoint(TrainerView& view, const Checkpoint& checkpoint) {
  const auto current = detail::named_tensors(view.module(), /*buffers=*/true);
  bool has_current = false;
  for (const auto& [key, t] : checkpoint.tensors) {
    if (key.compare(0, kCurrentPrefix.size(), kCurrentPrefix) == 0) {
      has_current = true;
      break;
    }
  }
  // The restore put the checkpoint's weights, the average, into the module.
  copy_from_module(view);
  if (!has_current) {
    if (view.state().is_global_zero) {
      std::cerr << "[volt] warning: the checkpoint has no EMAWeightAveraging weights (ema.current.*): it was "
                   "written without the callback, so the average and the module both start from its weights.\n";
    }
    return;
  }
  std::vector<std::pair<at::Tensor, at::Tensor>> copies;
  for (const auto& [name, t] : current) {
    auto it = checkpoint.tensors.find(kCurrentPrefix + name);
    if (it == checkpoint.tensors.end()) {
      throw CheckpointError("the checkpoint holds EMAWeightAveraging's current weights (ema.current.*) but none for '" +
                            name + "'; it was written for another model, or is damaged.");
    }
    if (it->second.sizes() != t.sizes()) {
      std::ostringstream msg;
      msg << "the checkpoint's ema.current." << name << " has shape " << it->second.sizes() << " but the module's is "
          << t.sizes() << "; the checkpoint was written for another model.";
      throw CheckpointError(msg.str());
    }
    copies.emplace_back(t, it->second);
  }
  // Everything checked before anything is written.
  at::NoGradGuard no_grad;
  for (auto& [target, source] : copies) target.detach().copy_(source);
}

}  // namespace volt::callbacks
