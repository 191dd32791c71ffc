// SIGTERM/SIGINT during fit: the step in progress finishes, interrupted.ckpt is written,
// fit returns; resuming from it ends with bitwise the same weights as a run that was
// never interrupted (data order, dropout RNG, optimizer momentum, LR schedule).
#include <chrono>
#include <csignal>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include <ATen/ops/cross_entropy_loss.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include "support/boring_module.h"
#include "volt/core/lr_scheduler.h"
#include "volt/core/seed.h"
#include "volt/trainer/trainer.h"

namespace {

using volt::Trainer;
using volt::testing::expect_bitwise_equal;
using volt::testing::quiet_options;
using volt::testing::weights;
using volt::testing::ScratchDir;

/// Dropout (CPU RNG), SGD with momentum, a per-step LR schedule: everything a resume
/// must restore. Raises `signal` inside the training step of global step `raise_at`.
class Resumable : public volt::Module {
 public:
  explicit Resumable(int64_t raise_at = -1, int signal = SIGTERM) : raise_at_(raise_at), signal_(signal) {
    fc1 = register_module("fc1", torch::nn::Linear(32, 16));
    drop = register_module("drop", torch::nn::Dropout(0.5));
    fc2 = register_module("fc2", torch::nn::Linear(16, 2));
  }
  at::Tensor training_step(volt::Batch& b, volt::StepContext& ctx) override {
    if (ctx.global_step() == raise_at_) std::raise(signal_);
    auto loss = at::cross_entropy_loss(fc2->forward(drop->forward(fc1->forward(b[0]).relu())), b[1]);
    ctx.log("train_loss", loss);
    return loss;
  }
  volt::OptimizerConfig configure_optimizers() override {
    auto sgd = std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    return {sgd, volt::LRSchedulerConfig{std::make_shared<volt::StepLR>(*sgd, 3, 0.5), volt::Interval::kStep}};
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::Dropout drop{nullptr};

 private:
  int64_t raise_at_;
  int signal_;
};

std::shared_ptr<volt::data::DataLoader> shuffled(uint64_t seed) {
  volt::data::DataLoaderOptions o;
  o.batch_size = 4;
  o.shuffle = true;
  o.seed = seed;
  return std::make_shared<volt::data::DataLoader>(volt::testing::random_dataset(16, 5), o);
}

volt::TrainerOptions options(const ScratchDir& dir) {
  auto o = quiet_options(dir.path());
  o.max_epochs = 3;  // 4 batches an epoch: global steps 0..11
  return o;
}


std::vector<at::Tensor> uninterrupted(const ScratchDir& dir) {
  volt::seed_everything(21);
  Resumable m;
  Trainer trainer(options(dir));
  trainer.fit(m, shuffled(9));
  EXPECT_EQ(trainer.global_step(), 12);
  return weights(m);
}

void interrupt_and_resume(int64_t raise_at, int signal) {
  ScratchDir dir;
  const auto reference = uninterrupted(dir);

  volt::seed_everything(21);
  Resumable first(raise_at, signal);
  Trainer trainer(options(dir));
  trainer.fit(first, shuffled(9));
  EXPECT_EQ(trainer.state().interrupted_by, signal);
  EXPECT_EQ(trainer.global_step(), raise_at + 1) << "the step in progress must finish";
  const std::string path = trainer.state().interrupt_checkpoint;
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  EXPECT_NE(trainer.state().stop_reason.find(path), std::string::npos) << trainer.state().stop_reason;

  volt::seed_everything(999);  // the checkpoint's RNG state must win over whatever is current
  Resumable second;
  Trainer resumed(options(dir));
  resumed.fit(second, shuffled(9), nullptr, path);
  EXPECT_EQ(resumed.global_step(), 12);
  EXPECT_EQ(resumed.state().interrupted_by, 0);
  expect_bitwise_equal(reference, weights(second));
}

TEST(Interrupt, SigtermMidEpochResumesBitwiseExactly) { interrupt_and_resume(5, SIGTERM); }

TEST(Interrupt, SigintAtAnEpochsLastBatchResumesBitwiseExactly) { interrupt_and_resume(7, SIGINT); }

volatile std::sig_atomic_t g_sigterms_seen = 0;
extern "C" void count_sigterm(int) { g_sigterms_seen = g_sigterms_seen + 1; }

TEST(Interrupt, StopsEvenBeforeMinEpochsAndRestoresTheSignalHandlers) {
  ScratchDir dir;
  auto o = options(dir);
  o.min_epochs = 3;
  // The program's own handlers, which fit must give back.
  struct sigaction counting {}, previous_term {}, sigint_before {};
  counting.sa_handler = count_sigterm;
  sigemptyset(&counting.sa_mask);
  sigaction(SIGTERM, &counting, &previous_term);
  sigaction(SIGINT, nullptr, &sigint_before);
  g_sigterms_seen = 0;
  Resumable m(1);
  Trainer trainer(o);
  trainer.fit(m, shuffled(9));
  EXPECT_EQ(trainer.global_step(), 2);
  struct sigaction now {};
  sigaction(SIGINT, nullptr, &now);
  EXPECT_EQ(now.sa_handler, sigint_before.sa_handler) << "fit must give the previous SIGINT handler back";
  // The SIGTERM that stopped the fit, delivered a second time right after (as a job's signal
  // that reached this process directly and through its launcher): one request, absorbed.
  std::raise(SIGTERM);
  EXPECT_EQ(g_sigterms_seen, 0);
  // A SIGTERM after that window is a new one: the program's handler gets it, and stays.
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  std::raise(SIGTERM);
  EXPECT_EQ(g_sigterms_seen, 1);
  sigaction(SIGTERM, nullptr, &now);
  EXPECT_EQ(now.sa_handler, counting.sa_handler) << "fit must give the previous SIGTERM handler back";
  std::raise(SIGTERM);
  EXPECT_EQ(g_sigterms_seen, 2);
  sigaction(SIGTERM, &previous_term, nullptr);
}

}  // namespace
