#include "volt/loops/training_epoch_loop.h"

#include <ATen/ops/tensor.h>

#include <csignal>
#include <iostream>
#include <optional>

#include "loops/detail/loop_step_context.h"
#include "loops/detail/stop_rules.h"
#include "volt/core/error.h"
#include "volt/data/dataloader.h"

namespace volt::loops {

bool TrainingEpochLoop::is_validation_epoch() const {
  const auto& o = ctx_.options;
  if (!ctx_.data.val_loader() || ctx_.state.num_val_batches == 0) return false;
  if (!o.check_val_every_n_epoch) return true;  // only val_check_interval decides
  return (ctx_.state.current_epoch + 1) % *o.check_val_every_n_epoch == 0;
}

bool TrainingEpochLoop::should_validate_after(int64_t batch_idx, int64_t num_batches, bool stopping,
                                              bool stream_ended) const {
  const auto& o = ctx_.options;
  if (!is_validation_epoch()) return false;
  // A stop that takes effect after this batch validates first (Lightning).
  if (stopping) return true;
  if (o.val_check_interval.is_fraction) {
    // A stream without a length (only val_check_interval=1.0 is accepted for it): after its
    // last batch, as Lightning validates when val_check_batch is inf.
    if (num_batches == kInfiniteBatches) return stream_ended;
    // Every int(n * fraction) batches. The epoch's last batch validates only when it falls on
    // that grid (0.3 of 10 batches: after batches 3, 6 and 9, not 10), as in Lightning.
    const int64_t every =
        std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(num_batches) * o.val_check_interval.value));
    return (batch_idx + 1) % every == 0;
  }
  // A count of batches: within the epoch, or across epochs when check_val_every_n_epoch is
  // unset (Lightning's semantics for iterable-style schedules).
  const auto every = static_cast<int64_t>(o.val_check_interval.value);
  if (!o.check_val_every_n_epoch) return ctx_.state.batches_seen % every == 0;
  return (batch_idx + 1) % every == 0;
}

void TrainingEpochLoop::announce_held_stop() {
  if (announced_held_stop_) return;
  announced_held_stop_ = true;
  const auto& state = ctx_.state;
  if (!state.is_global_zero) return;
  std::cout << "volt: a stop was requested, but min_epochs=" << detail::effective_min_epochs(ctx_.options)
            << " and min_steps=" << ctx_.options.min_steps << " are not reached yet (epoch " << state.current_epoch
            << ", step " << state.global_step << "); training goes on until they are." << std::endl;
}

double TrainingEpochLoop::signal_ballot() const {
  const int own = ctx_.signals->received();
  return own == 0 ? 0.0 : ctx_.signals->is_requeue(own) ? NSIG + own : own;
}

bool TrainingEpochLoop::interrupted(bool at_step_boundary, strategies::Strategy::PendingReduce* vote) {
  if (ctx_.signals == nullptr || !at_step_boundary) return false;
  // On one process its own ballot, as it stands now. On several, the vote started before this
  // step (see run()): every rank must agree, or some would wait in the next collective forever,
  // and on which signal: a scheduler signals a job's tasks one after another, so another rank
  // may have it while this one does not yet.
  const auto agreed = static_cast<int>(vote != nullptr ? vote->get() : signal_ballot());
  if (agreed == 0) return false;
  const int signal = agreed > NSIG ? agreed - NSIG : agreed;
  ctx_.signals->stopped_by(signal);
  auto& state = ctx_.state;
  // SLURM's requeue signal: the checkpoint goes where a requeued job looks for it.
  const bool requeue = ctx_.signals->is_requeue(signal);
  const std::string path = requeue ? connectors::SignalConnector::requeue_checkpoint_path(ctx_.options.default_root_dir)
                                   : ctx_.view.log_dir() + "/checkpoints/interrupted.ckpt";
  ctx_.view.save_checkpoint(path);
  state.interrupted_by = signal;
  state.interrupt_checkpoint = path;
  std::string reason = "received " + connectors::SignalConnector::name(signal) + ": finished step " +
                       std::to_string(state.global_step) + " (epoch " + std::to_string(state.current_epoch) +
                       ", batch " + std::to_string(state.batches_done) + ") and saved " + path;
  if (requeue) {
    // Only rank 0 requeues: one job, one requeue. The report comes first: Slurm cancels the
    // job's step as soon as it is requeued, and what a task writes after that may not reach
    // the job's log (CI lost the line once).
    ctx_.view.request_stop(reason + "; requeueing the job.");
    if (state.is_global_zero) {
      const std::string outcome = ctx_.signals->requeue();
      std::cout << "volt: " << outcome << " The requeued job resumes from it." << std::endl;
      state.stop_reason = reason + "; " + outcome + " The requeued job resumes from it.";
    } else {
      state.stop_reason = reason + "; rank 0 requeues the job.";
    }
    return true;
  }
  reason += "; resume with fit(..., ckpt_path=\"" + path + "\").";
  ctx_.view.request_stop(reason);
  return true;
}

bool TrainingEpochLoop::reached_max_steps() const {
  return ctx_.options.max_steps >= 0 && ctx_.state.global_step >= ctx_.options.max_steps;
}

void TrainingEpochLoop::run_validation() {
  auto& loader = *ctx_.data.val_loader();
  EvaluationLoop eval(ctx_, RunningStage::kValidating);
  eval.run(loader, ctx_.state.num_val_batches);
  ctx_.state.stage = RunningStage::kTraining;
}

void TrainingEpochLoop::step_schedulers(Interval interval) {
  for (auto& cfg : ctx_.lr_schedulers) {
    if (!cfg.scheduler || cfg.interval != interval) continue;
    const int64_t count = interval == Interval::kStep ? ctx_.state.global_step : ctx_.state.current_epoch + 1;
    if (count % cfg.frequency == 0) cfg.scheduler->step();
  }
}

void TrainingEpochLoop::run() {
  auto& state = ctx_.state;
  auto& module = ctx_.module;
  auto& view = ctx_.view;
  auto& strategy = ctx_.strategy;
  using CB = callbacks::Callback;
  const Hooks& hooks = ctx_.hooks;

  auto& loader = *ctx_.data.train_loader();
  // A stream's epoch restarts with an unknown length (the last epoch's end set the count it ran).
  if (!loader.has_length()) state.num_training_batches = planned_batches_;
  const int64_t num_batches = state.num_training_batches;
  const bool automatic = module.automatic_optimization();

  state.stage = RunningStage::kTraining;
  detail::LoopStepContext step_ctx(ctx_, RunningStage::kTraining);
  detail::ScopedLogContext attach(step_ctx);
  module.train();

  ctx_.logger.begin_epoch(RunningStage::kTraining);
  hooks.callbacks(Hook::on_train_epoch_start, [&](CB& cb) { cb.on_train_epoch_start(view); });
  step_ctx.set_in_epoch_hook(true);
  hooks.module(Hook::on_train_epoch_start, [&] { module.on_train_epoch_start(); });
  step_ctx.set_in_epoch_hook(false);
  // Read once per epoch, after on_train_epoch_start, where a GradientAccumulationScheduler sets it.
  const int64_t accumulate = state.accumulate_grad_batches;

  loader.set_epoch(state.current_epoch);
  // A loader without a length is read one batch ahead, as Lightning's data fetcher does, so the
  // loop knows which batch is the epoch's last (accumulation, epoch schedulers, validation). Under
  // ddp the ranks vote on every fetch: the epoch ends when any rank's stream ends, so no rank
  // waits in a collective for a batch another does not have. The vote is one all_gather of
  // [has a batch, next worker, examples per worker] from each rank: with it every rank also knows
  // where every rank's stream stood before the fetch, which is what a checkpoint written after
  // the current batch must hold for each rank (rank 0 writes it).
  const bool sized = loader.has_length();
  const bool vote = !sized && state.world_size > 1;
  std::unique_ptr<data::BatchStream> stream;
  std::vector<std::vector<int64_t>> rank_examples;
  std::vector<int64_t> rank_next_worker;
  auto fetch = [&]() -> std::optional<Batch> {
    data::StreamPosition before;
    if (vote) before = stream->position();
    auto batch = hooks.action(Action::train_dataloader_next, [&] { return stream->next(); });
    if (vote) {
      std::vector<int64_t> mine{batch.has_value() ? 1 : 0, before.next_worker};
      mine.insert(mine.end(), before.examples.begin(), before.examples.end());
      const auto gathered = strategy.all_gather(at::tensor(mine, at::kLong));
      bool every_rank_has_one = true;
      rank_examples.clear();
      rank_next_worker.clear();
      for (const at::Tensor& t : gathered) {
        const at::Tensor c = t.to(at::kLong).contiguous();
        const int64_t* v = c.data_ptr<int64_t>();
        every_rank_has_one = every_rank_has_one && v[0] == 1;
        rank_next_worker.push_back(v[1]);
        rank_examples.emplace_back(v + 2, v + c.numel());
      }
      if (!every_rank_has_one) batch.reset();
    }
    return batch;
  };
  if (sized) {
    stream = loader.stream(state.batches_done);
  } else {
    data::StreamPosition from;
    if (state.batches_done > 0) {
      if (state.stream_examples.empty()) {
        throw ConfigError("resuming mid-epoch (after batch " + std::to_string(state.batches_done) +
                          " of epoch " + std::to_string(state.current_epoch) +
                          ") on a train loader without a length, but the checkpoint holds no stream position "
                          "(volt.stream): it was written for a loader with a length. Resume with the loader it "
                          "was written with, or from a checkpoint taken at an epoch's end.");
      }
      from.batches = state.batches_done;
      from.examples = state.stream_examples;
      from.next_worker = state.stream_next_worker;
      if (!state.stream_rank_examples.empty()) {
        const auto ranks = static_cast<int64_t>(state.stream_rank_examples.size());
        if (ranks != state.world_size) {
          throw ConfigError("resuming mid-epoch (after batch " + std::to_string(state.batches_done) + " of epoch " +
                            std::to_string(state.current_epoch) + ") on a train loader without a length: the "
                            "checkpoint holds the stream positions of " + std::to_string(ranks) +
                            " ranks (volt.stream.ranks), this run has " + std::to_string(state.world_size) +
                            ". Resume with " + std::to_string(ranks) +
                            " processes, or from a checkpoint taken at an epoch's end.");
        }
        const auto rank = static_cast<size_t>(strategy.global_rank());
        from.examples = state.stream_rank_examples[rank];
        from.next_worker = state.stream_rank_next_worker[rank];
      }
    }
    stream = loader.stream(from);
  }
  std::optional<Batch> ahead;
  if (!sized && state.batches_done < num_batches) ahead = fetch();
  for (int64_t batch_idx = state.batches_done; batch_idx < num_batches; ++batch_idx) {
    std::optional<Batch> next;
    data::StreamPosition position;
    bool stream_ended = false;
    bool ranks_known = false;  // rank_examples hold every rank's `position` (the fetch after it voted)
    if (sized) {
      next = fetch();
    } else {
      next = std::move(ahead);
      ahead.reset();
      position = stream->position();
      if (next && batch_idx + 1 < num_batches) {
        ahead = fetch();
        ranks_known = vote;
      }
      stream_ended = next && !ahead;
    }
    if (!next) break;
    Batch& batch = *next;
    hooks.action(Action::batch_to_device, [&] { strategy.batch_to_device(batch); });
    state.batch_idx = batch_idx;
    step_ctx.set_batch(batch_idx, detail::batch_size_of(batch));

    hooks.callbacks(Hook::on_train_batch_start, [&](CB& cb) { cb.on_train_batch_start(view, batch, batch_idx); });
    if (!hooks.module(Hook::on_train_batch_start, [&] { return module.on_train_batch_start(batch, batch_idx); })) break;

    // The last batches of an epoch step even when fewer than `accumulate` remain.
    const bool last = batch_idx + 1 == num_batches || stream_ended;
    const bool step_now = (batch_idx + 1) % accumulate == 0 || last;
    at::Tensor loss;
    bool stepped = false;
    // Under ddp the ranks vote on a termination signal before each step boundary: one allreduce
    // (max) of each rank's ballot, started here and read after the step, so that its latency
    // hides behind the step's compute instead of adding a synchronisation point to every step
    // (measured in bench/ddp_scaling: docs/performance.md). A signal that arrives during the
    // step is in the next step's vote.
    std::unique_ptr<strategies::Strategy::PendingReduce> vote;
    if (ctx_.signals != nullptr && state.world_size > 1 && (!automatic || step_now)) {
      vote = strategy.start_reduce(signal_ballot(), strategies::ReduceOp::kMax);
    }
    {
      auto batch_guard = hooks.scoped(Action::run_training_batch);
      // Micro-batches before the last of an accumulation keep their gradients local.
      std::optional<strategies::Strategy::NoSyncGuard> no_sync;
      if (automatic && !step_now) no_sync.emplace(strategy.no_sync());
      loss = hooks.action(Action::training_step, [&] { return strategy.training_step(module, batch, step_ctx); });
      if (automatic) {
        // An undefined loss skips backward only: as in Lightning, the window's optimizer step
        // still runs (on the gradients accumulated so far, if any) and counts.
        if (loss.defined()) detail::run_backward(ctx_, accumulate > 1 ? loss / static_cast<double>(accumulate) : loss);
        if (step_now) {
          detail::run_optimizer_step(ctx_, 0);
          step_schedulers(Interval::kStep);
          stepped = true;
        }
      }
    }
    ++state.batches_seen;
    state.batches_done = batch_idx + 1;
    if (!sized) {
      state.stream_examples = position.examples;
      state.stream_next_worker = position.next_worker;
      // Without the fetch after it (the epoch's last batch by count) no rank's position was
      // gathered; a checkpoint there resumes at the next epoch and needs none.
      state.stream_rank_examples = ranks_known ? rank_examples : std::vector<std::vector<int64_t>>{};
      state.stream_rank_next_worker = ranks_known ? rank_next_worker : std::vector<int64_t>{};
      // The stream's end makes the epoch's length known: an epoch-end checkpoint is complete.
      if (stream_ended) state.num_training_batches = state.batches_done;
    }
    hooks.module(Hook::on_train_batch_end, [&] { module.on_train_batch_end(loss, batch, batch_idx); });
    hooks.callbacks(Hook::on_train_batch_end, [&](CB& cb) { cb.on_train_batch_end(view, loss, batch, batch_idx); });
    // Lightning's order: step values reach the loggers after the batch-end hooks (a stop
    // requested there is logged with this batch), at the batches_that_stepped of before this
    // batch; a batch that only accumulates gradients logs nothing.
    const bool accumulating = automatic && !step_now;
    if (!accumulating) ctx_.logger.end_train_batch(state.batches_that_stepped, state.current_epoch, state.should_stop);

    if (last && automatic) step_schedulers(Interval::kEpoch);
    const bool can_stop = detail::can_stop_early(ctx_);
    if (should_validate_after(batch_idx, num_batches, state.should_stop && can_stop, stream_ended)) run_validation();
    if (!accumulating) ++state.batches_that_stepped;
    hooks.step();
    if (interrupted(stepped || !automatic, vote.get())) return;
    // A stop requested during this batch or its validation takes effect now, once the
    // minimums are met (Lightning checks between batches; so the next batch never starts).
    if (state.should_stop && !can_stop) announce_held_stop();
    if (reached_max_steps() || (state.should_stop && can_stop)) break;
  }
  stream.reset();

  // Lightning's order: other callbacks, the module (which may still log), then the epoch
  // aggregates, then the monitoring callbacks (ModelCheckpoint, EarlyStopping), which so
  // see every metric of the epoch.
  hooks.monitoring_callbacks(false, Hook::on_train_epoch_end, [&](CB& cb) { cb.on_train_epoch_end(view); });
  step_ctx.set_in_epoch_hook(true);
  hooks.module(Hook::on_train_epoch_end, [&] { module.on_train_epoch_end(); });
  step_ctx.set_in_epoch_hook(false);
  // Lightning logs the epoch's aggregates one step back (batches_that_stepped - 1): at the
  // step of the epoch's last step row.
  ctx_.logger.end_epoch(RunningStage::kTraining, state.batches_that_stepped - 1, state.current_epoch);
  hooks.monitoring_callbacks(true, Hook::on_train_epoch_end, [&](CB& cb) { cb.on_train_epoch_end(view); });
}

}  // namespace volt::loops
