#include "volt/callbacks/model_checkpoint.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <limits>
#include <sstream>
#include <system_error>

#include "callbacks/detail/python_text.h"
#include "volt/core/error.h"

namespace volt::callbacks {
namespace {

namespace fs = std::filesystem;
using detail::key_list;
using detail::py_str;

constexpr const char* kDefaultFilename = "{epoch}-{step}";
constexpr const char* kLastName = "last";

nlohmann::json score_to_json(std::optional<double> score) {
  if (!score) return nullptr;
  if (std::isnan(*score)) return "nan";
  if (std::isinf(*score)) return *score > 0 ? "inf" : "-inf";
  return *score;
}

std::optional<double> score_from_json(const nlohmann::json& j) {
  if (j.is_null()) return std::nullopt;
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  }
  throw CheckpointError("ModelCheckpoint state holds the score " + j.dump() +
                        ", which is not a number, \"inf\", \"-inf\" or \"nan\". The "
                        "checkpoint was not written by this version of Volt or is damaged.");
}

fs::path normalized(const std::string& p) {
  std::error_code ec;
  fs::path abs = fs::absolute(fs::path(p), ec);
  return (ec ? fs::path(p) : abs).lexically_normal();
}

void warn_rank_zero(const TrainerView& view, const std::string& message) {
  if (view.state().is_global_zero) std::cerr << "[volt] warning: " << message << "\n";
}

}  // namespace

ModelCheckpoint::ModelCheckpoint() : ModelCheckpoint(Options{}) {}

ModelCheckpoint::ModelCheckpoint(Options options) : options_(std::move(options)) {
  const Options& o = options_;
  const std::string who = "ModelCheckpoint(";
  if (o.mode != "min" && o.mode != "max") {
    throw ConfigError(who + "mode=" + py_str(o.mode) +
                      ") is not a valid mode. Use mode='min' when lower is better (a loss) "
                      "or mode='max' when higher is better (an accuracy).");
  }
  if (o.save_top_k < -1) {
    throw ConfigError(who + "save_top_k=" + std::to_string(o.save_top_k) +
                      ") is invalid. Use -1 to keep every checkpoint, 0 to keep none, or a "
                      "positive number of best checkpoints to keep.");
  }
  if (o.every_n_train_steps < 0) {
    throw ConfigError(who + "every_n_train_steps=" + std::to_string(o.every_n_train_steps) +
                      ") is invalid. Use a positive number of optimizer steps between saves, "
                      "or 0 to turn step-based saving off.");
  }
  if (o.every_n_epochs && *o.every_n_epochs < 0) {
    throw ConfigError(who + "every_n_epochs=" + std::to_string(*o.every_n_epochs) +
                      ") is invalid. Use a positive number of epochs between saves, or 0 to "
                      "turn epoch-based saving off.");
  }
  if (o.every_n_epochs && *o.every_n_epochs > 0 && o.every_n_train_steps > 0) {
    throw ConfigError(who + "every_n_epochs=" + std::to_string(*o.every_n_epochs) +
                      ", every_n_train_steps=" + std::to_string(o.every_n_train_steps) +
                      ") sets two save triggers; they are mutually exclusive. Keep one of "
                      "them, or use two ModelCheckpoint callbacks.");
  }
  if (o.monitor.empty() && o.save_top_k > 1) {
    throw ConfigError(who + "save_top_k=" + std::to_string(o.save_top_k) +
                      ", monitor='') has no metric to rank checkpoints by. Set monitor to a "
                      "logged metric (e.g. 'val_loss'), or use save_top_k=1 to keep the "
                      "latest checkpoint or -1 to keep all.");
  }
  every_n_epochs_ = o.every_n_epochs.value_or(o.every_n_train_steps > 0 ? 0 : 1);
  filename_template_ = o.filename.empty() ? kDefaultFilename : o.filename;
  filename_pieces_ =
      parse_template(filename_template_, who + "filename=" + py_str(filename_template_) + ")");
  last_pieces_ = parse_template(kLastName, "last");
  if (!o.dirpath.empty()) {
    dirpath_ = o.dirpath;
    dirpath_resolved_ = true;
  }
}

std::map<std::string, double> ModelCheckpoint::best_k_models() const {
  return {best_k_.begin(), best_k_.end()};
}

std::string ModelCheckpoint::state_key() const {
  return "ModelCheckpoint{'monitor': " +
         (options_.monitor.empty() ? std::string("None") : py_str(options_.monitor)) +
         ", 'mode': " + py_str(options_.mode) +
         ", 'every_n_train_steps': " + std::to_string(options_.every_n_train_steps) +
         ", 'every_n_epochs': " + std::to_string(every_n_epochs_) + "}";
}

nlohmann::json ModelCheckpoint::state_dict() const {
  nlohmann::json best_k = nlohmann::json::object();
  for (const auto& [path, score] : best_k_) best_k[path] = score_to_json(score);
  return {{"best_model_path", best_model_path_},
          {"best_model_score", score_to_json(best_model_score_)},
          {"best_k_models", best_k},
          {"kth_best_model_path", kth_best_model_path_},
          {"last_model_path", last_model_path_},
          {"dirpath", dirpath_}};
}

void ModelCheckpoint::load_state_dict(const nlohmann::json& state) {
  // The default dirpath depends on the run (logger version), so the comparison that
  // decides what to restore waits until it is known.
  if (!dirpath_resolved_) {
    pending_state_ = state;
    return;
  }
  apply_state(state);
}

void ModelCheckpoint::apply_state(const nlohmann::json& state) {
  const std::string from = state.value("dirpath", dirpath_);
  if (from == dirpath_) {
    best_model_score_ = score_from_json(state.value("best_model_score", nlohmann::json()));
    kth_best_model_path_ = state.value("kth_best_model_path", kth_best_model_path_);
    last_model_path_ = state.value("last_model_path", last_model_path_);
    if (state.contains("best_k_models")) {
      best_k_.clear();
      for (const auto& [path, score] : state.at("best_k_models").items()) {
        best_k_.emplace_back(path, score_from_json(score).value_or(
                                       std::numeric_limits<double>::quiet_NaN()));
      }
    }
    kth_value_.reset();
    for (const auto& [path, score] : best_k_) {
      if (path == kth_best_model_path_) kth_value_ = score;
      live_paths_.insert(path);
    }
    if (!last_model_path_.empty()) live_paths_.insert(last_model_path_);
  } else {
    std::cerr << "[volt] warning: ModelCheckpoint's dirpath changed from '" << from
              << "' to '" << dirpath_
              << "', so best_model_score, best_k_models, kth_best_model_path and "
                 "last_model_path are not restored; only best_model_path is.\n";
  }
  best_model_path_ = state.value("best_model_path", best_model_path_);
}

std::vector<std::string> ModelCheckpoint::find_last_checkpoints() const {
  std::vector<std::string> out;
  std::error_code ec;
  // A sharded fsdp save is a folder named like the file (is_checkpoint_path).
  if (!last_model_path_.empty() && is_checkpoint_path(last_model_path_)) out.push_back(last_model_path_);
  if (!dirpath_resolved_ || !fs::is_directory(dirpath_, ec)) return out;
  for (fs::directory_iterator it(dirpath_, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.extension() != ".ckpt" || p.stem().string().rfind(kLastName, 0) != 0) continue;
    const std::string path = p.string();
    if (!is_checkpoint_path(path)) continue;
    if (std::find(out.begin(), out.end(), path) == out.end()) out.push_back(path);
  }
  return out;
}

void ModelCheckpoint::resolve_dirpath(const TrainerView& view) {
  if (dirpath_resolved_) return;
  const std::string root = view.has_loggers() ? view.log_dir() : view.state().default_root_dir;
  dirpath_ = (fs::path(root) / "checkpoints").string();
  dirpath_resolved_ = true;
  if (pending_state_) {
    apply_state(*pending_state_);
    pending_state_.reset();
  }
}

void ModelCheckpoint::setup(TrainerView& view, Stage stage) {
  resolve_dirpath(view);
  if (stage != Stage::kFit || !view.state().is_global_zero || options_.save_top_k == 0) return;
  std::error_code ec;
  if (fs::is_directory(dirpath_, ec) && !fs::is_empty(dirpath_, ec)) {
    warn_rank_zero(view, "Checkpoint directory " + dirpath_ +
                             " exists and is not empty; new checkpoints may get version "
                             "suffixes (-v1) and old ones stay.");
  }
}

void ModelCheckpoint::on_fit_start(TrainerView& view) {
  resolve_dirpath(view);
  seen_epoch_boundary_ = false;
}

bool ModelCheckpoint::skip_saving(const TrainerView& view) const {
  const TrainerState& s = view.state();
  // kNone counts as fitting so that views which never set fn (test fakes) still save.
  const bool outside_fit = s.fn == TrainerFn::kValidating || s.fn == TrainerFn::kTesting ||
                           s.fn == TrainerFn::kPredicting;
  // Lightning: nothing under fast_dev_run (so best_model_path stays empty).
  return outside_fit || s.sanity_checking || s.fast_dev_run || last_global_step_saved_ == s.global_step;
}

bool ModelCheckpoint::save_at_train_epoch_end(const TrainerView& view) const {
  if (options_.save_on_train_epoch_end) return *options_.save_on_train_epoch_end;
  // Lightning's default: not when validation skips epochs (check_val_every_n_epoch != 1:
  // after validation instead); at train epoch end without validation batches; else only
  // when validation runs once, at the epoch's end (val_check_interval 1.0 or 1).
  const TrainerState& s = view.state();
  if (s.check_val_every_n_epoch != int64_t{1}) return false;
  if (s.num_val_batches == 0) return true;
  return s.val_check_interval.value == 1.0;
}

void ModelCheckpoint::on_train_batch_end(TrainerView& view, const at::Tensor&, const Batch&,
                                         int64_t) {
  const int64_t n = options_.every_n_train_steps;
  if (n < 1 || skip_saving(view) || view.state().global_step % n != 0) return;
  resolve_dirpath(view);
  const Candidates values = candidates(view);
  save_topk(view, values, /*at_epoch_boundary=*/false);
  save_last(view, values);
}

void ModelCheckpoint::on_train_epoch_end(TrainerView& view) {
  if (view.state().sanity_checking) return;
  seen_epoch_boundary_ = true;
  if (save_at_train_epoch_end(view)) save_epoch_checkpoints(view);
}

void ModelCheckpoint::on_validation_end(TrainerView& view) {
  if (view.state().sanity_checking) return;
  seen_epoch_boundary_ = true;
  if (!save_at_train_epoch_end(view)) save_epoch_checkpoints(view);
}

void ModelCheckpoint::save_epoch_checkpoints(TrainerView& view) {
  if (skip_saving(view)) return;
  resolve_dirpath(view);
  const Candidates values = candidates(view);
  if (every_n_epochs_ >= 1 && (view.state().current_epoch + 1) % every_n_epochs_ == 0) {
    save_topk(view, values, /*at_epoch_boundary=*/true);
  }
  save_last(view, values);
}

std::string ModelCheckpoint::missing_monitor_message(const TrainerView& view) const {
  return "ModelCheckpoint(monitor=" + py_str(options_.monitor) + ") could not find '" +
         options_.monitor + "' among the logged metrics: " + key_list(view.callback_metrics()) +
         ". Log it with ctx.log(\"" + options_.monitor + "\", ...) or fix monitor.";
}

void ModelCheckpoint::save_topk(TrainerView& view, const Candidates& values,
                                bool at_epoch_boundary) {
  if (options_.save_top_k == 0) return;
  if (options_.monitor.empty()) {
    save_without_monitor(view, values);
    return;
  }
  auto it = values.find(options_.monitor);
  if (it == values.end()) {
    // Before the first epoch ends, a step save may legitimately precede the first
    // validation (Lightning warns then); after it, a missing key is a configuration error.
    if (at_epoch_boundary || seen_epoch_boundary_) {
      throw ConfigError(missing_monitor_message(view));
    }
    if (!warned_missing_monitor_) {
      warned_missing_monitor_ = true;
      warn_rank_zero(view, missing_monitor_message(view) +
                               " Skipping top-k saves until it is logged.");
    }
    return;
  }
  if (check_monitor_top_k(view, it->second.value)) {
    update_best_and_save(view, it->second.value, values);
  }
}

void ModelCheckpoint::save_without_monitor(TrainerView& view, const Candidates& values) {
  // Lightning lets the new file take the previous one's name even with save_top_k=-1,
  // overwriting a checkpoint it meant to keep; only with save_top_k=1 is it replaced.
  const std::string replaceable = options_.save_top_k == 1 ? best_model_path_ : "";
  const std::string path =
      free_path(view, filename_pieces_, filename_template_, values, replaceable);
  const std::string previous = best_model_path_;
  best_model_path_ = path;  // before saving: it is part of the saved state
  save(view, path);
  if (options_.save_top_k == 1 && !previous.empty() && should_remove(previous, path)) {
    remove(view, previous);
  }
}

bool ModelCheckpoint::is_better(double a, double b) const {
  return options_.mode == "min" ? a < b : a > b;
}

bool ModelCheckpoint::rank_zero_decides(TrainerView& view, bool decision) const {
  // "any" over ranks where only rank 0 may say true is a broadcast of rank 0's decision.
  return view.reduce_boolean_decision(view.state().is_global_zero && decision, /*all=*/false);
}

bool ModelCheckpoint::check_monitor_top_k(TrainerView& view, double current) {
  if (options_.save_top_k == -1) return true;
  if (static_cast<int64_t>(best_k_.size()) < options_.save_top_k) return true;
  // NaN compares false, so a NaN never displaces a kept checkpoint.
  return rank_zero_decides(view, kth_value_ && is_better(current, *kth_value_));
}

void ModelCheckpoint::update_best_and_save(TrainerView& view, double current,
                                           const Candidates& values) {
  const size_t k = options_.save_top_k == -1 ? best_k_.size() + 1
                                             : static_cast<size_t>(options_.save_top_k);
  std::string del;
  if (best_k_.size() == k && k > 0) {
    del = kth_best_model_path_;
    best_k_.erase(std::remove_if(best_k_.begin(), best_k_.end(),
                                 [&](const auto& e) { return e.first == del; }),
                  best_k_.end());
  }
  if (std::isnan(current)) {
    current = options_.mode == "min" ? std::numeric_limits<double>::infinity()
                                     : -std::numeric_limits<double>::infinity();
  }
  const std::string path = free_path(view, filename_pieces_, filename_template_, values, del);
  current_score_ = current;
  auto same = std::find_if(best_k_.begin(), best_k_.end(),
                           [&](const auto& e) { return e.first == path; });
  if (same != best_k_.end()) {
    same->second = current;
  } else {
    best_k_.emplace_back(path, current);
  }
  // First of equal scores wins in both searches, matching Python's max()/min() on a dict.
  if (best_k_.size() == k) {
    auto worst = best_k_.begin();
    for (auto e = best_k_.begin(); e != best_k_.end(); ++e) {
      if (is_better(worst->second, e->second)) worst = e;
    }
    kth_best_model_path_ = worst->first;
    kth_value_ = worst->second;
  }
  auto best = best_k_.begin();
  for (auto e = best_k_.begin(); e != best_k_.end(); ++e) {
    if (is_better(e->second, best->second)) best = e;
  }
  best_model_path_ = best->first;
  best_model_score_ = best->second;
  save(view, path);
  if (!del.empty() && should_remove(del, path)) remove(view, del);
}

void ModelCheckpoint::save_last(TrainerView& view, const Candidates& values) {
  if (!options_.save_last) return;
  const std::string path = free_path(view, last_pieces_, kLastName, values, last_model_path_);
  const std::string previous = last_model_path_;
  last_model_path_ = path;
  save(view, path);
  if (!previous.empty() && should_remove(previous, path)) remove(view, previous);
}

bool ModelCheckpoint::should_remove(const std::string& previous,
                                    const std::string& current) const {
  if (previous == current) return false;
  // Only files inside our directory: a best_model_path restored from another run's
  // directory is that run's property.
  const fs::path dir = normalized(dirpath_);
  const fs::path prev = normalized(previous);
  auto d = dir.begin();
  auto p = prev.begin();
  for (; d != dir.end() && !d->empty(); ++d, ++p) {
    if (p == prev.end() || *p != *d) return false;
  }
  return true;
}

void ModelCheckpoint::save(TrainerView& view, const std::string& path) {
  live_paths_.insert(path);
  view.save_checkpoint(path, options_.save_weights_only);
  if (options_.save_safetensors) view.save_weights_safetensors(safetensors_path(path));
  last_global_step_saved_ = view.state().global_step;
}

void ModelCheckpoint::remove(TrainerView& view, const std::string& path) {
  live_paths_.erase(path);
  if (!view.state().is_global_zero) return;
  view.remove_checkpoint(path);
  if (options_.save_safetensors) view.remove_checkpoint(safetensors_path(path));
}

}  // namespace volt::callbacks
