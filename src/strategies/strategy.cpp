#include "volt/strategies/strategy.h"

#include <filesystem>
#include <sstream>

#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "volt/checkpoint_io/sharded_checkpoint.h"
#include "volt/core/error.h"
#include "volt/core/file_check.h"
#include "volt/strategies/strategy_registry.h"

namespace volt::strategies {

Strategy::Strategy(std::shared_ptr<accelerators::Accelerator> accelerator,
                   std::shared_ptr<precision::Precision> precision,
                   std::shared_ptr<environments::ClusterEnvironment> environment,
                   std::shared_ptr<checkpoint_io::CheckpointIO> checkpoint_io)
    : accelerator_(std::move(accelerator)),
      precision_(std::move(precision)),
      environment_(std::move(environment)),
      checkpoint_io_(std::move(checkpoint_io)) {
  if (!accelerator_ || !precision_ || !environment_ || !checkpoint_io_) {
    throw ConfigError("a strategy needs an accelerator, a precision plug-in, a cluster environment and a "
                      "checkpoint IO; one of them was null.");
  }
}

namespace {

/// A reduction over one rank: the value itself.
class ReadyReduce final : public Strategy::PendingReduce {
 public:
  explicit ReadyReduce(double value) : value_(value) {}
  double get() override { return value_; }

 private:
  double value_;
};

}  // namespace

std::unique_ptr<Strategy::PendingReduce> Strategy::start_reduce(double value, ReduceOp /*op*/) {
  return std::make_unique<ReadyReduce>(value);
}

void Strategy::connect(const StrategyParts& parts) {
  if (!accelerator_) accelerator_ = parts.accelerator;
  if (!precision_) precision_ = parts.precision;
  if (!environment_) environment_ = parts.environment;
  if (!checkpoint_io_) checkpoint_io_ = parts.checkpoint_io;
  if (!accelerator_ || !precision_ || !environment_ || !checkpoint_io_) {
    throw ConfigError("strategy '" + name() +
                      "' was connected without an accelerator, a precision plug-in, a cluster "
                      "environment or a checkpoint IO; the accelerator connector passes all four.");
  }
}

void Strategy::setup_environment() {
  accelerator_->setup_device(root_device());
}

void Strategy::setup(Module& module) {
  module.set_device(root_device());
  module.configure_model();
  precision_->convert_module(module);
  const c10::Device device = root_device();
  // Avoid a walk over every parameter when the module is already where it belongs.
  bool on_device = true;
  for (const auto& p : module.parameters()) {
    if (p.device() != device) {
      on_device = false;
      break;
    }
  }
  if (!on_device) module.to(device);
}

void Strategy::batch_to_device(Batch& batch) const {
  const c10::Device device = root_device();
  for (auto& t : batch) {
    if (t.defined() && t.device() != device) t = t.to(device, /*non_blocking=*/true);
  }
  precision_->convert_input(batch);
}

at::Tensor Strategy::training_step(Module& module, Batch& batch, StepContext& ctx) {
  auto scope = precision_->forward_context();
  return module.training_step(batch, ctx);
}

void Strategy::validation_step(Module& module, Batch& batch, StepContext& ctx) {
  auto scope = precision_->forward_context();
  module.validation_step(batch, ctx);
}

void Strategy::test_step(Module& module, Batch& batch, StepContext& ctx) {
  auto scope = precision_->forward_context();
  module.test_step(batch, ctx);
}

at::Tensor Strategy::predict_step(Module& module, Batch& batch, StepContext& ctx) {
  auto scope = precision_->forward_context();
  return module.predict_step(batch, ctx);
}

void Strategy::backward(const at::Tensor& loss) {
  const at::Tensor scaled = precision_->pre_backward(loss);
  precision_->backward(scaled);
  precision_->post_backward(scaled);
}

void Strategy::unscale_gradients(torch::optim::Optimizer& optimizer) {
  precision_->unscale_gradients(optimizer);
}

void Strategy::clip_gradients(torch::optim::Optimizer& optimizer, double value, precision::ClipAlgorithm algorithm) {
  precision_->clip_gradients(optimizer, value, algorithm);
}

bool Strategy::optimizer_step(torch::optim::Optimizer& optimizer, const std::function<void()>& before_step) {
  return precision_->optimizer_step(optimizer, before_step);
}

double Strategy::scalar_to_host(const at::Tensor& value) {
  return value.item<double>();
}

std::string Strategy::save_optimizer_state(torch::optim::Optimizer& optimizer) {
  torch::serialize::OutputArchive archive;
  optimizer.save(archive);
  std::ostringstream bytes;
  archive.save_to(bytes);
  return bytes.str();
}

void Strategy::load_optimizer_state(torch::optim::Optimizer& optimizer, const std::string& bytes) {
  torch::serialize::InputArchive archive;
  std::istringstream in(bytes);
  archive.load_from(in);
  optimizer.load(archive);
}

void Strategy::save_checkpoint(const Checkpoint& checkpoint, const std::string& path) {
  if (is_global_zero()) checkpoint_io_->save_checkpoint(checkpoint, path);
}

void Strategy::save_checkpoint_without_collective(const Checkpoint& checkpoint, const std::string& path) {
  if (is_global_zero()) checkpoint_io_->save_checkpoint(checkpoint, path);
}

Checkpoint Strategy::load_checkpoint(const std::string& path) {
  if (const std::string problem = checkpoint_io::unfinished_sharded_checkpoint(path); !problem.empty()) {
    throw CheckpointError(problem);
  }
  // A sharded fsdp checkpoint (a folder of per-rank files) is joined into the ordinary layout.
  if (checkpoint_io::is_sharded_checkpoint(path)) return checkpoint_io::load_sharded_checkpoint(*checkpoint_io_, path);
  return checkpoint_io_->load_checkpoint(path);
}

void Strategy::remove_checkpoint(const std::string& path) {
  if (!is_global_zero()) return;
  if (checkpoint_io::is_sharded_checkpoint(path) || !checkpoint_io::unfinished_sharded_checkpoint(path).empty()) {
    std::error_code ec;
    remove_tree(path, ec);
    if (ec) throw CheckpointError("cannot remove sharded checkpoint '" + path + "': " + ec.message());
    return;
  }
  checkpoint_io_->remove_checkpoint(path);
}

void Strategy::teardown() {
  checkpoint_io_->teardown();
  precision_->teardown();
  accelerator_->teardown();
}

}  // namespace volt::strategies
