// The options every generated Volt project shares (config.yaml's model, data, checkpoint and
// early_stopping sections) and the callbacks and optimizer they choose.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "volt/volt.h"

namespace project {

/// Declares model.lr, model.optimizer, data.batch_size, checkpoint.* and early_stopping.*.
inline void add_common_options(volt::cli::Cli& cli) {
  cli.add_option("model.lr", 1e-3, "learning rate")
      .add_option("model.optimizer", "adam", "adam, adamw or sgd (momentum 0.9)")
      .add_option("data.batch_size", int64_t{64}, "training samples per batch per process")
      .add_option("checkpoint.monitor", "val_loss", "metric ranking checkpoints; empty: keep the latest")
      .add_option("checkpoint.save_last", true, "keep last.ckpt, to resume from")
      .add_option("checkpoint.save_top_k", int64_t{1}, "best checkpoints to keep (-1: all)")
      .add_option("checkpoint.every_n_train_steps", int64_t{0}, "also save every N optimizer steps; 0: off")
      .add_option("early_stopping.enabled", false, "stop when val_loss stops improving")
      .add_option("early_stopping.patience", int64_t{3}, "validations without improvement before stopping")
      .add_option("fit.ckpt_path", "", "resume from this checkpoint (a path, \"last\" or \"best\")");
}

/// The optimizer named by model.optimizer over `parameters`.
inline std::shared_ptr<torch::optim::Optimizer> make_optimizer(const std::string& name,
                                                               std::vector<at::Tensor> parameters, double lr) {
  if (name == "adam") return std::make_shared<torch::optim::Adam>(parameters, torch::optim::AdamOptions(lr));
  if (name == "adamw") return std::make_shared<torch::optim::AdamW>(parameters, torch::optim::AdamWOptions(lr));
  if (name == "sgd") {
    return std::make_shared<torch::optim::SGD>(parameters, torch::optim::SGDOptions(lr).momentum(0.9));
  }
  throw volt::ConfigError("model.optimizer='" + name + "' is not known; use adam, adamw or sgd.");
}

/// Checkpointing and early stopping as config.yaml asks; turns checkpointing off in `options`
/// when nothing is to be saved.
inline std::vector<std::shared_ptr<volt::callbacks::Callback>> make_callbacks(const volt::cli::Cli& cli,
                                                                              volt::TrainerOptions& options) {
  std::vector<std::shared_ptr<volt::callbacks::Callback>> callbacks;
  volt::callbacks::ModelCheckpoint::Options ckpt;
  ckpt.monitor = cli.get_string("checkpoint.monitor");
  ckpt.save_last = cli.get_bool("checkpoint.save_last");
  ckpt.every_n_train_steps = cli.get_int("checkpoint.every_n_train_steps");
  ckpt.save_top_k = ckpt.monitor.empty() && ckpt.every_n_train_steps == 0 ? 0 : cli.get_int("checkpoint.save_top_k");
  if (!ckpt.monitor.empty()) ckpt.filename = "{epoch}-{" + ckpt.monitor + ":.4f}";
  if (ckpt.monitor.empty() && !ckpt.save_last && ckpt.every_n_train_steps == 0) {
    options.enable_checkpointing = false;
  } else if (options.enable_checkpointing) {
    callbacks.push_back(std::make_shared<volt::callbacks::ModelCheckpoint>(ckpt));
  }
  if (cli.get_bool("early_stopping.enabled")) {
    volt::callbacks::EarlyStopping::Options stop;
    stop.monitor = "val_loss";
    stop.patience = cli.get_int("early_stopping.patience");
    callbacks.push_back(std::make_shared<volt::callbacks::EarlyStopping>(stop));
  }
  return callbacks;
}

/// The program's name for --help: the file name it was started as.
inline std::string program_name(const char* argv0) {
  const std::string s = argv0;
  const auto slash = s.rfind('/');
  return slash == std::string::npos ? s : s.substr(slash + 1);
}

}  // namespace project
