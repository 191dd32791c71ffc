#include "volt/callbacks/ema_weight_averaging.h"

#include <gtest/gtest.h>

#include <ATen/ops/zeros_like.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "callbacks/averaging_test_support.h"
#include "support/fake_trainer_view.h"
#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/core/error.h"
#include "volt/trainer/trainer.h"

namespace {

using volt::ConfigError;
using volt::callbacks::EMAWeightAveraging;
using volt::testing::AveragingNet;
using volt::testing::ScratchDir;

EMAWeightAveraging::Options ema_options(double decay, int64_t every = 1, std::optional<int64_t> start = std::nullopt,
                                        bool buffers = true) {
  EMAWeightAveraging::Options o;
  o.decay = decay;
  o.update_every_n_steps = every;
  o.update_starting_at_step = start;
  o.use_buffers = buffers;
  return o;
}

/// The module's weights after every optimizer step, during each validation, and when each
/// training epoch starts.
class StepRecorder : public volt::callbacks::Callback {
 public:
  std::string state_key() const override { return "StepRecorder"; }
  void on_train_batch_end(volt::TrainerView& view, const at::Tensor&, const volt::Batch&, int64_t) override {
    after_step.push_back(volt::testing::state_tensors(view.module()));
  }
  void on_validation_batch_start(volt::TrainerView& view, const volt::Batch&, int64_t batch_idx) override {
    if (batch_idx == 0 && !view.state().sanity_checking) {
      in_validation.push_back(volt::testing::state_tensors(view.module()));
      steps_at_validation.push_back(view.state().global_step);
    }
  }
  void on_train_epoch_start(volt::TrainerView& view) override {
    epoch_starts.push_back(volt::testing::state_tensors(view.module()));
  }
  std::vector<std::vector<at::Tensor>> after_step, in_validation, epoch_starts;
  std::vector<int64_t> steps_at_validation;
};

volt::TrainerOptions options_for(const ScratchDir& dir, int64_t epochs) {
  volt::TrainerOptions o = volt::testing::quiet_options(dir.path());
  o.max_epochs = epochs;
  return o;
}

/// The EMA of `history` (one state per optimizer step, step index = position), computed
/// in double, with the update rule of the options: first update copies, then
/// decay * average + (1 - decay) * weights.
std::vector<at::Tensor> reference_ema(const std::vector<std::vector<at::Tensor>>& history, size_t steps,
                                      const EMAWeightAveraging::Options& o, size_t tensors, int64_t* updates) {
  std::vector<at::Tensor> avg;
  *updates = 0;
  for (size_t s = 0; s < steps; ++s) {
    const auto idx = static_cast<int64_t>(s);
    const bool due =
        (!o.update_starting_at_step || idx >= *o.update_starting_at_step) && idx % o.update_every_n_steps == 0;
    if (!due) continue;
    if (avg.empty()) {
      for (size_t i = 0; i < tensors; ++i) avg.push_back(history[s][i].to(at::kDouble));
    } else {
      for (size_t i = 0; i < tensors; ++i) avg[i] = avg[i] * o.decay + history[s][i].to(at::kDouble) * (1 - o.decay);
    }
    ++*updates;
  }
  return avg;
}

}  // namespace

class EmaUpdates : public ::testing::TestWithParam<EMAWeightAveraging::Options> {};

TEST_P(EmaUpdates, FinalWeightsAreTheEmaOfTheWeightsAfterEachDueStep) {
  ScratchDir dir;
  AveragingNet model;
  const auto o = GetParam();
  auto ema = std::make_shared<EMAWeightAveraging>(o);
  auto recorder = std::make_shared<StepRecorder>();
  volt::Trainer trainer(options_for(dir, 3), {ema, recorder});
  trainer.fit(model, volt::testing::random_loader(48, 8, 21, 8));

  ASSERT_EQ(recorder->after_step.size(), 18u);
  const size_t params = model.parameters().size();
  int64_t updates = 0;
  const auto expected = reference_ema(recorder->after_step, 18, o, params, &updates);
  EXPECT_EQ(ema->n_averaged(), updates);
  const auto final_weights = volt::testing::weights(model);
  for (size_t i = 0; i < params; ++i) {
    EXPECT_TRUE(final_weights[i].to(at::kDouble).allclose(expected[i], 0, 1e-6)) << "parameter " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, EmaUpdates,
                         ::testing::Values(ema_options(0.9), ema_options(0.5, 2, 3), ema_options(0.99, 4)));

TEST(EMAWeightAveraging, ValidationSeesTheAverageAndTrainingGoesOnWithTheModelsOwnWeights) {
  ScratchDir dir;
  AveragingNet model(/*batch_norm=*/true);
  const auto o = ema_options(0.8);
  auto ema = std::make_shared<EMAWeightAveraging>(o);
  auto recorder = std::make_shared<StepRecorder>();
  volt::Trainer trainer(options_for(dir, 3), {ema, recorder});
  trainer.fit(model, volt::testing::random_loader(48, 8, 3, 8), volt::testing::random_loader(16, 8, 4, 8));

  ASSERT_EQ(recorder->in_validation.size(), 3u);
  ASSERT_EQ(recorder->epoch_starts.size(), 3u);
  const size_t all = recorder->after_step.front().size();
  for (size_t v = 0; v < 3; ++v) {
    const auto steps = static_cast<size_t>(recorder->steps_at_validation[v]);
    int64_t updates = 0;
    // use_buffers: the batch-norm statistics are averaged too.
    const auto expected = reference_ema(recorder->after_step, steps, o, all, &updates);
    for (size_t i = 0; i < all; ++i) {
      if (!recorder->in_validation[v][i].is_floating_point()) continue;
      EXPECT_TRUE(recorder->in_validation[v][i].to(at::kDouble).allclose(expected[i], 1e-6, 1e-6))
          << "validation " << v << ", tensor " << i;
    }
    if (v + 1 < 3) {
      // The next epoch trains on from the weights the last step left, bit for bit.
      volt::testing::expect_bitwise_equal(recorder->epoch_starts[v + 1], recorder->after_step[steps - 1]);
    }
  }
}

TEST(EMAWeightAveraging, CheckpointHoldsTheAverageAsItsWeightsAndTheModelsOwnBeside) {
  ScratchDir dir;
  const std::string path = dir.path() + "/ema.ckpt";
  AveragingNet model(true);
  auto ema = std::make_shared<EMAWeightAveraging>(ema_options(0.7));
  auto recorder = std::make_shared<StepRecorder>();
  std::vector<at::Tensor> average_at_save, module_at_save;
  struct Snap : volt::callbacks::Callback {
    std::shared_ptr<EMAWeightAveraging> ema;
    std::vector<at::Tensor>* average;
    std::vector<at::Tensor>* module;
    std::string state_key() const override { return "Snap"; }
    void on_train_batch_end(volt::TrainerView& view, const at::Tensor&, const volt::Batch&, int64_t) override {
      if (view.state().global_step != 5) return;
      for (const auto& t : ema->average()) average->push_back(t.clone());
      *module = volt::testing::state_tensors(view.module());
    }
  };
  auto snap = std::make_shared<Snap>();
  snap->ema = ema;
  snap->average = &average_at_save;
  snap->module = &module_at_save;
  volt::Trainer trainer(options_for(dir, 1), {ema, snap, std::make_shared<volt::testing::SaveAtStep>(5, path)});
  trainer.fit(model, volt::testing::random_loader(48, 8, 3, 8));

  const volt::Checkpoint ckpt = volt::checkpoint_io::TorchCheckpointIO().load_checkpoint(path);
  const auto state = ckpt.state_dict();
  size_t i = 0;
  for (const auto& item : model.named_parameters()) {
    EXPECT_TRUE(state.at(item.key()).equal(average_at_save[i])) << item.key();
    EXPECT_TRUE(ckpt.tensors.at("ema.current." + item.key()).equal(module_at_save[i])) << item.key();
    ++i;
  }
  for (const auto& item : model.named_buffers()) {
    EXPECT_TRUE(state.at(item.key()).equal(average_at_save[i])) << item.key();
    EXPECT_TRUE(ckpt.tensors.at("ema.current." + item.key()).equal(module_at_save[i])) << item.key();
    ++i;
  }
  EXPECT_FALSE(state.at("fc1.weight").equal(ckpt.tensors.at("ema.current.fc1.weight")));
  EXPECT_EQ(ckpt.meta.at("callbacks").at("EMAWeightAveraging").at("n_averaged").get<int64_t>(), 5);

  // validate/test load the checkpoint's weights: the average.
  AveragingNet fresh(true);
  volt::Trainer evaluator(options_for(dir, 1));
  evaluator.validate(fresh, volt::testing::random_loader(16, 8, 4, 8), path);
  EXPECT_TRUE(fresh.fc1->weight.equal(state.at("fc1.weight")));
}

/// (step, at the end of its epoch).
class EmaResume : public ::testing::TestWithParam<std::pair<int64_t, bool>> {};

TEST_P(EmaResume, ResumedFitEndsWithBitwiseTheWeightsOfTheUninterruptedOne) {
  const auto [step, at_epoch_end] = GetParam();
  ScratchDir dir;
  const std::string ckpt = dir.path() + "/mid.ckpt";
  auto train = [] { return volt::testing::random_loader(48, 8, 31, 8); };
  auto val = [] { return volt::testing::random_loader(16, 8, 32, 8); };
  const auto o = ema_options(0.9, 2, 3);

  AveragingNet full(/*batch_norm=*/true, /*scheduler=*/true);
  auto ema_full = std::make_shared<EMAWeightAveraging>(o);
  volt::Trainer first(options_for(dir, 4),
                      {ema_full, std::make_shared<volt::testing::SaveAtStep>(step, ckpt, at_epoch_end)});
  first.fit(full, train(), val());

  AveragingNet resumed(true, true);
  auto ema_resumed = std::make_shared<EMAWeightAveraging>(o);
  volt::Trainer second(options_for(dir, 4), {ema_resumed});
  second.fit(resumed, train(), val(), ckpt);

  EXPECT_EQ(resumed.train_steps, full.train_steps - step);
  EXPECT_EQ(ema_resumed->n_averaged(), ema_full->n_averaged());
  volt::testing::expect_bitwise_equal(volt::testing::state_tensors(resumed), volt::testing::state_tensors(full));
}

INSTANTIATE_TEST_SUITE_P(SaveSteps, EmaResume,
                         ::testing::Values(std::make_pair(int64_t{4}, false), std::make_pair(int64_t{9}, false),
                                           std::make_pair(int64_t{12}, true)));

TEST(EMAWeightAveraging, RefusesBadOptionsWithWhatWasGiven) {
  auto message = [](EMAWeightAveraging::Options o) {
    try {
      EMAWeightAveraging ema(o);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(ema_options(0.0)).find("decay=0 "), std::string::npos);
  EXPECT_NE(message(ema_options(1.0)).find("decay=1 "), std::string::npos);
  EXPECT_NE(message(ema_options(1.5)).find("decay=1.5"), std::string::npos);
  EXPECT_NE(message(ema_options(-0.1)).find("decay=-0.1"), std::string::npos);
  EXPECT_NE(message(ema_options(NAN)).find("decay=nan"), std::string::npos);
  EXPECT_NE(message(ema_options(0.9, 0)).find("update_every_n_steps=0"), std::string::npos);
  EXPECT_NE(message(ema_options(0.9, 1, -2)).find("update_starting_at_step=-2"), std::string::npos);
  EXPECT_EQ(message(ema_options(0.999)), "no error");
}

TEST(EMAWeightAveraging, RefusesACheckpointWithoutTheCurrentWeightsOfEveryTensorAndChangesNothing) {
  AveragingNet model;
  volt::testing::FakeTrainerView view(&model);
  EMAWeightAveraging ema(ema_options(0.9));
  const auto before = volt::testing::state_tensors(model);
  volt::Checkpoint ckpt;
  ckpt.tensors["ema.current.fc1.weight"] = at::zeros_like(model.fc1->weight);
  try {
    ema.on_load_checkpoint(view, ckpt);
    FAIL() << "a checkpoint with only ema.current.fc1.weight was accepted";
  } catch (const volt::CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("'fc1.bias'"), std::string::npos) << e.what();
  }
  volt::testing::expect_bitwise_equal(volt::testing::state_tensors(model), before);
}
