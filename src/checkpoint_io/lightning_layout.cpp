#include "volt/checkpoint_io/lightning_layout.h"

#include <algorithm>

#include "volt/core/checkpoint.h"
#include "volt/core/lr_scheduler.h"

namespace volt::checkpoint_io {
namespace {

using json = nlohmann::json;

json counters(int64_t ready, int64_t started, int64_t processed, int64_t completed, bool with_started,
              bool with_processed) {
  json c = {{"ready", ready}, {"completed", completed}};
  if (with_started) c["started"] = started;
  if (with_processed) c["processed"] = processed;
  // Lightning's order: ready, completed, started, processed.
  return c;
}

json progress(const json& total, const json& current) {
  return {{"total", total}, {"current", current}};
}

json zero_batch_progress() {
  json p = progress(counters(0, 0, 0, 0, true, true), counters(0, 0, 0, 0, true, true));
  p["is_last_batch"] = false;
  return p;
}

int64_t counter(const json& where, std::initializer_list<const char*> path) {
  const json* at = &where;
  for (const char* key : path) {
    if (!at->is_object() || !at->contains(key)) return -1;
    at = &at->at(key);
  }
  return at->is_number_integer() ? at->get<int64_t>() : -1;
}

}  // namespace

json progress_json(const LoopProgress& p) {
  return {{"epoch", p.epoch},
          {"global_step", p.global_step},
          {"batches_done", p.batches_done},
          {"batches_seen", p.batches_seen},
          {"num_training_batches", p.num_training_batches}};
}

json lightning_loops(const LoopProgress& p, int64_t scheduler_steps) {
  // Volt saves an epoch's end after the epoch's LR schedulers stepped, and between epochs (batches_done 0)
  // before the next epoch began: in Lightning's terms both are "epoch completed", the state
  // Trainer.save_checkpoint writes after fit, from which Lightning starts the next epoch (and does not run
  // this one's end again). Mid-epoch, Lightning's own batch-end files say the batch is processed but not
  // yet completed, and so does this.
  const bool epoch_end = p.batches_done > 0 && p.batches_done >= p.num_training_batches;
  const bool between = p.batches_done == 0;
  const int64_t done_epochs = epoch_end ? p.epoch + 1 : p.epoch;  // epochs completed
  const int64_t n = epoch_end ? p.batches_done : p.num_training_batches;
  const int64_t s = p.batches_seen;
  json batch;
  json epochs;
  if (epoch_end || between) {
    const int64_t b = done_epochs > 0 ? n : 0;  // the last epoch's batches
    batch = progress(counters(s, s, s, s, true, true), counters(b, b, b, b, true, true));
    batch["is_last_batch"] = done_epochs > 0;
    epochs = counters(done_epochs, done_epochs, done_epochs, done_epochs, true, true);
  } else {
    const int64_t b = p.batches_done;
    batch = progress(counters(s, s, s, std::max<int64_t>(s - 1, 0), true, true),
                     counters(b, b, b, std::max<int64_t>(b - 1, 0), true, true));
    batch["is_last_batch"] = false;
    epochs = counters(p.epoch + 1, p.epoch + 1, p.epoch, p.epoch, true, true);
  }
  const int64_t g = p.global_step;
  const json steps = progress(counters(g, g, g, g, false, false), counters(g, g, g, g, false, false));
  const json zero_grads = progress(counters(g, g, g, g, true, false), counters(g, g, g, g, true, false));
  const int64_t stepped = epoch_end || between ? g : std::max<int64_t>(g - 1, 0);
  json fit = json::object();
  fit["state_dict"] = json::object();
  fit["epoch_loop.state_dict"] = {{"_batches_that_stepped", stepped}};
  fit["epoch_loop.batch_progress"] = batch;
  fit["epoch_loop.scheduler_progress"] = progress(counters(scheduler_steps, 0, 0, scheduler_steps, false, false),
                                                  counters(scheduler_steps, 0, 0, scheduler_steps, false, false));
  fit["epoch_loop.automatic_optimization.state_dict"] = json::object();
  fit["epoch_loop.automatic_optimization.optim_progress"] = {
      {"optimizer", {{"step", steps}, {"zero_grad", zero_grads}}}};
  fit["epoch_loop.manual_optimization.state_dict"] = json::object();
  fit["epoch_loop.manual_optimization.optim_step_progress"] =
      progress(counters(0, 0, 0, 0, false, false), counters(0, 0, 0, 0, false, false));
  fit["epoch_loop.val_loop.state_dict"] = json::object();
  fit["epoch_loop.val_loop.batch_progress"] = zero_batch_progress();
  fit["epoch_progress"] = progress(epochs, epochs);
  json loops = json::object();
  loops["fit_loop"] = fit;
  for (const char* name : {"validate_loop", "test_loop", "predict_loop"}) {
    json loop = {{"state_dict", json::object()}, {"batch_progress", zero_batch_progress()}};
    if (std::string(name) == "predict_loop") loop["batch_progress"].erase("is_last_batch");
    loops[name] = loop;
  }
  return loops;
}

LoopProgress progress_from_lightning(const json& meta) {
  LoopProgress p;
  p.epoch = counter(meta, {"epoch"});
  p.global_step = counter(meta, {"global_step"});
  const json& fit =
      meta.is_object() && meta.contains("loops") && meta["loops"].is_object() && meta["loops"].contains("fit_loop")
          ? meta["loops"]["fit_loop"]
          : json();
  // "processed": a batch whose optimizer step ran (a batch-end checkpoint has not yet completed it).
  p.batches_done = counter(fit, {"epoch_loop.batch_progress", "current", "processed"});
  p.batches_seen = counter(fit, {"epoch_loop.batch_progress", "total", "processed"});
  bool last = false;
  if (fit.is_object() && fit.contains("epoch_loop.batch_progress")) {
    const json& bp = fit["epoch_loop.batch_progress"];
    last = bp.is_object() && bp.value("is_last_batch", false) == true;
  }
  // The epoch's length is not in the file; only whether the last batch was reached.
  p.num_training_batches = p.batches_done < 0 ? -1 : (last ? p.batches_done : p.batches_done + 1);
  // Saved after the epoch completed (Trainer.save_checkpoint after fit): "epoch" already counts it, so the
  // next epoch starts from its first batch. Saved in the epoch's end hooks, the epoch is processed but not
  // completed, and a resume starts the next one (batches_done == num_training_batches).
  const int64_t processed = counter(fit, {"epoch_progress", "current", "processed"});
  const int64_t completed = counter(fit, {"epoch_progress", "current", "completed"});
  if (last && processed >= 0 && processed == completed && p.batches_done >= 0) {
    p.batches_done = 0;
    p.num_training_batches = 0;
  }
  if (!fit.is_object()) {  // a weights-only file of another writer: start of its epoch
    p.batches_done = p.batches_seen = p.num_training_batches = 0;
  }
  return p;
}

std::string lightning_precision_key(const std::string& precision) {
  if (precision == "16-mixed" || precision == "bf16-mixed") return "MixedPrecision";
  if (precision == "64-true") return "DoublePrecision";
  if (precision == "16-true" || precision == "bf16-true") return "HalfPrecision";
  return "Precision";
}

json upgrade_v1_meta(const json& v1) {
  json out = json::object();
  json volt = json::object();
  volt["format_version"] = kCheckpointFormatVersion;
  volt["converted_from_format"] = v1.value("format_version", json(1));
  for (const char* key : {"torch_version", "weights_only", "metrics", "logger_version"}) {
    if (v1.contains(key)) volt[key] = v1[key];
  }
  out["epoch"] = v1.value("epoch", json(0));
  out["global_step"] = v1.value("global_step", json(0));
  out["pytorch-lightning_version"] = kLightningLayoutVersion;
  if (v1.contains("volt_version")) out["volt_version"] = v1["volt_version"];
  if (v1.contains("loops")) {
    volt["loops"] = v1["loops"];
    if (v1["loops"].is_object()) {
      LoopProgress p;
      const json& l = v1["loops"];
      auto get = [&](const char* k) { return l.contains(k) && l[k].is_number_integer() ? l[k].get<int64_t>() : 0; };
      p.epoch = get("epoch");
      p.global_step = get("global_step");
      p.batches_done = get("batches_done");
      p.batches_seen = get("batches_seen");
      p.num_training_batches = get("num_training_batches");
      out["loops"] = lightning_loops(p, 0);
    }
  }
  if (v1.contains("precision") && v1["precision"].is_object()) {
    const std::string name = v1["precision"].value("name", std::string());
    volt["precision"] = name;
    const json state = v1["precision"].value("state", json::object());
    if (state.is_object() && !state.empty()) out[lightning_precision_key(name)] = state;
  }
  for (const auto& [key, value] : v1.items()) {
    static const char* kKnown[] = {"format_version", "volt_version", "torch_version", "weights_only", "metrics",
                                   "logger_version", "epoch",        "global_step",   "loops",        "precision"};
    // key by name: clang before 16 cannot capture a structured binding (the fuzz build uses clang-14).
    if (std::find_if(std::begin(kKnown), std::end(kKnown), [&key = key](const char* k) { return key == k; }) !=
        std::end(kKnown)) {
      continue;
    }
    out[key] = value;  // hyper_parameters, callbacks, lr_schedulers, and anything a module added
  }
  out["volt"] = volt;
  return out;
}

json pytorch_scheduler_state(const LRScheduler& scheduler) {
  json s = scheduler.pytorch_settings();
  if (!s.is_object()) s = json::object();
  const int64_t last = scheduler.last_epoch();
  s["base_lrs"] = scheduler.base_lrs();
  s["last_epoch"] = last;
  s["verbose"] = false;
  s["_step_count"] = last + 1;  // PyTorch counts the step its constructor takes
  s["_get_lr_called_within_step"] = false;
  s["_last_lr"] = scheduler.get_last_lr();
  return s;
}

}  // namespace volt::checkpoint_io
