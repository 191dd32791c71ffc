// The learning-rate finder: Lightning's arithmetic (checked against Lightning 2.2.5 itself on the same
// losses), the sweep through a real fit, what it puts back, the plot, update_attr and --tuner.lr_find.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/rand.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <type_traits>

#include "support/boring_module.h"
#include "support/temp_dir.h"
#include "tuner/tuner_support.h"
#include "volt/callbacks/learning_rate_finder.h"
#include "volt/cli/cli.h"
#include "volt/core/error.h"
#include "volt/data/idx.h"
#include "volt/data/mnist_datamodule.h"
#include "volt/trainer/trainer.h"
#include "volt/tuner/tuner.h"
#include "support/source_dir.h"

namespace {

using volt::callbacks::LearningRateFinderOptions;
using volt::callbacks::LRFinderCurve;
using volt::callbacks::LRFinderMode;
using volt::testing::hex;
using volt::testing::Mlp;
using volt::testing::TempDir;
using volt::testing::TensorDataModule;

/// A loss curve like a range test's: flat, falling, then blowing up after step `blow`, with wiggles.
std::vector<double> recorded_curve(int64_t n, int64_t blow) {
  std::vector<double> raw;
  for (int64_t k = 0; k < n; ++k) {
    double v = 2.3 - 1.8 / (1.0 + std::exp(-(static_cast<double>(k) - 0.45 * n) / 6.0)) + 0.05 * std::sin(1.7 * k);
    if (k > blow) v += 0.4 * std::pow(static_cast<double>(k - blow), 1.5);
    raw.push_back(static_cast<float>(v));  // a float32 loss, as a model returns it
  }
  return raw;
}

struct VoltSweep {
  std::vector<double> lrs, losses;
  std::optional<int64_t> stopped_at;
  std::optional<size_t> index;
};

/// What the callback computes, step by step, for raw losses (global_step k + 1 after step k).
VoltSweep volt_sweep(const LearningRateFinderOptions& o, const std::vector<double>& raw) {
  VoltSweep s;
  LRFinderCurve curve(o.early_stop_threshold);
  for (int64_t k = 0; k < o.num_training_steps; ++k) {
    s.lrs.push_back(volt::callbacks::lr_finder_rate(o, k));
    s.losses.push_back(curve.add(raw[static_cast<size_t>(k)], k + 1));
    if (curve.diverged()) {
      s.stopped_at = k;
      break;
    }
  }
  s.index = volt::callbacks::lr_finder_suggestion_index(s.losses);
  return s;
}

TEST(LRFinderMath, MatchesLightningBitForBitOnRecordedLossCurves) {
  std::vector<LearningRateFinderOptions> cases(4);
  cases[0] = {1e-8, 1.0, 100, LRFinderMode::kExponential, 4.0};
  cases[1] = {1e-5, 0.5, 80, LRFinderMode::kLinear, std::nullopt};
  cases[2] = {1e-6, 10.0, 120, LRFinderMode::kExponential, 2.0};
  cases[3] = {1e-4, 1.0, 60, LRFinderMode::kExponential, 4.0};
  const std::vector<int64_t> blow = {70, 60, 50, 1000};
  nlohmann::json json = nlohmann::json::array();
  std::vector<std::vector<double>> raws;
  for (size_t i = 0; i < cases.size(); ++i) {
    raws.push_back(recorded_curve(cases[i].num_training_steps, blow[i]));
    nlohmann::json raw = nlohmann::json::array();
    for (double v : raws.back()) raw.push_back(v);
    json.push_back({{"mode", volt::callbacks::to_string(cases[i].mode)},
                    {"min_lr", cases[i].min_lr},
                    {"max_lr", cases[i].max_lr},
                    {"num_training", cases[i].num_training_steps},
                    {"threshold", cases[i].early_stop_threshold ? nlohmann::json(*cases[i].early_stop_threshold)
                                                                : nlohmann::json(nullptr)},
                    {"raw", raw}});
  }
  const std::string path = volt::testing::oracle_pythonpath();
  if (path.empty()) {
    ASSERT_FALSE(volt::testing::oracle_available()) << "../shared/oracle is there but could not be unpacked";
    GTEST_SKIP() << "Lightning (../shared/oracle) is not available";
  }
  TempDir dir("volt_lr_oracle");
  std::ofstream(dir.file("cases.json")) << json.dump();
  const std::string src = volt::testing::source_dir().string();
  const std::string cmd = "PYTHONPATH='" + path + "' " + volt::testing::kPython + " " + src +
                          "/tests/tuner/lr_finder_oracle.py " + dir.file("cases.json") + " > " + dir.file("out.json") +
                          " 2> " + dir.file("err.txt");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "the oracle script failed; see " << dir.file("err.txt");
  std::ifstream in(dir.file("out.json"));
  const nlohmann::json lightning = nlohmann::json::parse(in);
  ASSERT_EQ(lightning.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    const VoltSweep v = volt_sweep(cases[i], raws[i]);
    const auto& l = lightning[i];
    ASSERT_EQ(v.lrs.size(), l["lrs"].size());
    for (size_t k = 0; k < v.lrs.size(); ++k) {
      EXPECT_EQ(v.lrs[k], std::strtod(l["lrs"][k].get<std::string>().c_str(), nullptr)) << "lr of step " << k;
      EXPECT_EQ(v.losses[k], std::strtod(l["losses"][k].get<std::string>().c_str(), nullptr)) << "loss of step " << k;
    }
    EXPECT_EQ(v.stopped_at.has_value(), !l["stopped_at"].is_null());
    if (v.stopped_at && !l["stopped_at"].is_null()) {
      EXPECT_EQ(*v.stopped_at, l["stopped_at"].get<int64_t>());
    }
    ASSERT_EQ(v.index.has_value(), !l["index"].is_null());
    if (v.index) {
      EXPECT_EQ(*v.index, l["index"].get<size_t>());
    }
  }
  // The cases cover a stop and a full sweep.
  EXPECT_FALSE(lightning[0]["stopped_at"].is_null());
  EXPECT_TRUE(lightning[3]["stopped_at"].is_null());
}

TEST(LRFinderMath, SuggestionIsTheSteepestDropAfterTheSkippedEnds) {
  // Differences: the steepest central difference is around index 12 (13 -> 11 -> 5).
  std::vector<double> losses(20, 10.0);
  for (size_t i = 0; i < 20; ++i) losses[i] = 20.0 - static_cast<double>(i) * 0.1;
  losses[12] = 15.0;
  losses[13] = 9.0;
  ASSERT_TRUE(volt::callbacks::lr_finder_suggestion_index(losses).has_value());
  EXPECT_EQ(*volt::callbacks::lr_finder_suggestion_index(losses), 12u);
  // A NaN is dropped, not differentiated.
  losses[15] = std::nan("");
  EXPECT_EQ(*volt::callbacks::lr_finder_suggestion_index(losses), 12u);
  // Python's losses[10:-0] is empty: no suggestion, as in Lightning.
  EXPECT_FALSE(volt::callbacks::lr_finder_suggestion_index(losses, 10, 0).has_value());
  EXPECT_FALSE(volt::callbacks::lr_finder_suggestion_index(std::vector<double>(11, 1.0)).has_value());
}

TEST(LRFinderMath, RatesRunFromMinToMaxAsLightningsSteppedSchedulers) {
  LearningRateFinderOptions o;
  o.min_lr = 1e-6;
  o.max_lr = 1e-1;
  o.num_training_steps = 50;
  EXPECT_EQ(volt::callbacks::lr_finder_rate(o, 0), 1e-6);
  EXPECT_DOUBLE_EQ(volt::callbacks::lr_finder_rate(o, 49), 1e-1);
  EXPECT_DOUBLE_EQ(volt::callbacks::lr_finder_rate(o, 1), 1e-6 * std::pow(1e5, 2.0 / 50));
  o.mode = LRFinderMode::kLinear;
  EXPECT_DOUBLE_EQ(volt::callbacks::lr_finder_rate(o, 24), 1e-6 + 0.5 * (1e-1 - 1e-6));
}

TEST(LearningRateFinder, RefusesOptionsOutsideTheirRangeNamingThem) {
  const auto refused = [](LearningRateFinderOptions o, const std::string& word) {
    try {
      volt::callbacks::LearningRateFinder finder(o);
      ADD_FAILURE() << "accepted; expected a ConfigError naming " << word;
    } catch (const volt::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  };
  LearningRateFinderOptions o;
  o.min_lr = 0;
  refused(o, "min_lr=0");
  o = {};
  o.max_lr = 1e-9;
  refused(o, "max_lr=");
  o = {};
  o.num_training_steps = 0;
  refused(o, "num_training=0");
  o = {};
  o.early_stop_threshold = -1.0;
  refused(o, "early_stop_threshold=-1");
  EXPECT_THROW(volt::callbacks::parse_lr_finder_mode("cubic"), volt::ConfigError);
}

volt::TrainerOptions lr_options(const std::string& root) {
  return volt::testing::quiet_options(root);  // one epoch
}

TEST(Tuner, LrFindStopsEarlyWhenTheLossDiverges) {
  TempDir dir("volt_lr_diverge");
  torch::manual_seed(1);
  Mlp model(16, 32, 4, 1e-3);
  TensorDataModule data(volt::testing::blobs(2048, 16, 4, 3), 32);
  volt::Trainer trainer(lr_options(dir.str()));
  volt::tuner::LRFindOptions o;
  o.min_lr = 1e-4;
  o.max_lr = 1e4;  // Adam far past any sensible rate: the loss blows up
  o.num_training = 200;
  const auto result = volt::Tuner(trainer).lr_find(model, data, o);
  EXPECT_TRUE(result.stopped_early());
  EXPECT_LT(result.lrs().size(), 200u);
  EXPECT_GT(result.lrs().size(), 2u);
  // The last smoothed loss is past 4 x the best one; the last rate is below max_lr.
  double best = result.losses()[0];
  for (double l : result.losses()) best = std::min(best, l);
  EXPECT_GT(result.losses().back(), 4.0 * best);
  EXPECT_LT(result.lrs().back(), o.max_lr);
  // Without a threshold the same sweep runs to the end.
  o.early_stop_threshold = std::nullopt;
  o.num_training = 60;
  const auto full = volt::Tuner(trainer).lr_find(model, data, o);
  EXPECT_FALSE(full.stopped_early());
  EXPECT_EQ(full.lrs().size(), 60u);
}

/// The optimizer state's key of a parameter: its TensorImpl's address, as text in LibTorch 1.13
/// (c10::guts::to_string) and as the pointer itself in 2.x.
template <typename Key>
Key state_key_of(const at::Tensor& p) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream text;
    text << static_cast<const void*>(p.unsafeGetTensorImpl());
    return text.str();
  } else {
    return p.unsafeGetTensorImpl();
  }
}

std::vector<at::Tensor> adam_state(torch::optim::Adam& adam) {
  using Key = std::decay_t<decltype(adam.state().begin()->first)>;
  std::vector<at::Tensor> out;
  for (const auto& p : adam.param_groups()[0].params()) {
    auto it = adam.state().find(state_key_of<Key>(p));
    if (it == adam.state().end()) continue;
    auto& s = static_cast<torch::optim::AdamParamState&>(*it->second);
    out.push_back(s.exp_avg().clone());
    out.push_back(s.exp_avg_sq().clone());
    out.push_back(at::full({1}, static_cast<double>(s.step())));
  }
  return out;
}

TEST(Tuner, LrFindPutsWeightsOptimizerRandomGeneratorAndTrainerBackBitwise) {
  TempDir dir("volt_lr_restore");
  torch::manual_seed(2);
  Mlp model(16, 32, 4, 1e-3, /*dropout=*/0.2, /*keep_optimizer=*/true);
  TensorDataModule data(volt::testing::blobs(1024, 16, 4, 4), 32);
  volt::TrainerOptions o = lr_options(dir.str());
  o.max_steps = 5;
  volt::Trainer trainer(o);
  trainer.fit(model, data);  // the module's own Adam now has state
  ASSERT_TRUE(model.kept_);
  const auto weights = volt::testing::weights(model);
  const auto state = adam_state(*model.kept_);
  ASSERT_EQ(state.size(), 3u * 4u);
  const double lr = model.kept_->param_groups()[0].options().get_lr();
  const at::Tensor rng = at::detail::getDefaultCPUGenerator().get_state();
  const bool training = model.is_training();

  volt::tuner::LRFindOptions f;
  f.num_training = 30;
  const auto result = volt::Tuner(trainer).lr_find(model, data, f);
  ASSERT_EQ(result.lrs().size(), 30u);

  volt::testing::expect_bitwise_equal(volt::testing::weights(model), weights);
  const auto after = adam_state(*model.kept_);
  ASSERT_EQ(after.size(), state.size());
  for (size_t i = 0; i < state.size(); ++i) EXPECT_TRUE(after[i].equal(state[i])) << "Adam state tensor " << i;
  EXPECT_EQ(model.kept_->param_groups()[0].options().get_lr(), lr);
  EXPECT_TRUE(at::detail::getDefaultCPUGenerator().get_state().equal(rng));
  EXPECT_EQ(model.is_training(), training);
  EXPECT_EQ(trainer.global_step(), 5);
  EXPECT_EQ(volt::testing::files_under(dir.str()), std::vector<std::string>{}) << "the sweep wrote files";
}

TEST(Tuner, AFitAfterLrFindEqualsAFitWithoutItAtTheSameRate) {
  TempDir dir("volt_lr_same_fit");
  const auto data_set = volt::testing::blobs(1024, 16, 4, 5);
  const auto run = [&](bool find_first) {
    torch::manual_seed(3);
    Mlp model(16, 32, 4, 1e-3, /*dropout=*/0.3);
    TensorDataModule data(data_set, 32);
    volt::TrainerOptions o = lr_options(dir.str());
    o.max_steps = 25;
    volt::Trainer trainer(o);
    if (find_first) {
      volt::tuner::LRFindOptions f;
      f.num_training = 40;
      const auto result = volt::Tuner(trainer).lr_find(model, data, f);
      EXPECT_TRUE(result.suggestion().has_value());
    }
    auto hp = model.hparams();
    hp["lr"] = hex(3e-3);
    model.save_hyperparameters(hp);
    trainer.fit(model, data);
    return volt::testing::weights(model);
  };
  const auto with = run(true);
  const auto without = run(false);
  volt::testing::expect_bitwise_equal(with, without);
}

TEST(Tuner, UpdateAttrWritesTheSuggestionIntoTheLrHyperparameter) {
  TempDir dir("volt_lr_update");
  torch::manual_seed(4);
  Mlp model(16, 32, 4, 1e-3);
  TensorDataModule data(volt::testing::blobs(1024, 16, 4, 6), 32);
  volt::Trainer trainer(lr_options(dir.str()));
  volt::tuner::LRFindOptions f;
  f.num_training = 40;
  f.update_attr = true;
  const auto result = volt::Tuner(trainer).lr_find(model, data, f);
  ASSERT_TRUE(result.suggestion().has_value());
  EXPECT_EQ(model.lr(), *result.suggestion());
  EXPECT_EQ(*result.suggestion(), result.lrs()[*result.optimal_index()]);

  // Hyperparameters without lr or learning_rate: refused before any step.
  volt::testing::BoringModule boring(16, 4);
  f.attr_name.clear();
  try {
    volt::Tuner(trainer).lr_find(boring, data, f);
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const volt::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("neither \"lr\" nor \"learning_rate\""), std::string::npos) << e.what();
  }
  EXPECT_EQ(boring.train_steps, 0);
}

TEST(Tuner, LrFindRefusesModulesWithSeveralOptimizersAndPutsTheModuleBack) {
  struct TwoOptimizers : Mlp {
    TwoOptimizers() : Mlp(16, 8, 4, 1e-3) { set_automatic_optimization(false); }
    at::Tensor training_step(volt::Batch& batch, volt::StepContext& ctx) override {
      return Mlp::training_step(batch, ctx);
    }
    volt::OptimizerConfig configure_optimizers() override {
      volt::OptimizerConfig c;
      c.optimizers.push_back(std::make_shared<torch::optim::Adam>(fc1->parameters()));
      c.optimizers.push_back(std::make_shared<torch::optim::Adam>(fc2->parameters()));
      return c;
    }
  };
  TempDir dir("volt_lr_two");
  torch::manual_seed(5);
  TwoOptimizers model;
  const auto weights = volt::testing::weights(model);
  TensorDataModule data(volt::testing::blobs(256, 16, 4, 7), 32);
  volt::Trainer trainer(lr_options(dir.str()));
  try {
    volt::Tuner(trainer).lr_find(model, data);
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const volt::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("exactly one optimizer"), std::string::npos) << e.what();
  }
  volt::testing::expect_bitwise_equal(volt::testing::weights(model), weights);
}

TEST(Tuner, RefusesLaunchersThatWouldStartTheRanksAgainBeforeAnyStep) {
  TempDir dir("volt_lr_launchers");
  for (const std::string strategy : {"ddp", "ddp_spawn"}) {
    SCOPED_TRACE(strategy);
    volt::TrainerOptions o = lr_options(dir.str());
    o.strategy = strategy;
    o.devices = "2";
    o.allow_cpu_oversubscription = true;
    volt::Trainer trainer(o);
    volt::testing::BoringModule model(16, 4);
    TensorDataModule data(volt::testing::blobs(256, 16, 4, 7), 32);
    try {
      volt::Tuner(trainer).lr_find(model, data);
      ADD_FAILURE() << "expected a NotSupportedError";
    } catch (const volt::NotSupportedError& e) {
      EXPECT_NE(std::string(e.what()).find("volt launch"), std::string::npos) << e.what();
    }
    EXPECT_THROW(volt::Tuner(trainer).scale_batch_size(model, data), volt::NotSupportedError);
    EXPECT_EQ(model.train_steps, 0);
  }
}

TEST(LRFinderResult, SavePlotWritesAnSvgAndAPngWithTheSuggestionMarked) {
  LearningRateFinderOptions o;
  std::vector<double> lrs, losses;
  const auto raw = recorded_curve(100, 1000);
  LRFinderCurve curve;
  for (int64_t k = 0; k < 100; ++k) {
    lrs.push_back(volt::callbacks::lr_finder_rate(o, k));
    losses.push_back(curve.add(raw[static_cast<size_t>(k)], k + 1));
  }
  volt::tuner::LRFinderResult result(o, lrs, losses, false);
  TempDir dir("volt_lr_plot");
  result.save_plot(dir.file("lr_find"));
  std::ifstream svg(dir.file("lr_find.svg"));
  std::stringstream text;
  text << svg.rdbuf();
  EXPECT_NE(text.str().find("<svg"), std::string::npos);
  EXPECT_NE(text.str().find("fill=\"red\""), std::string::npos);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "suggestion %.3g", *result.suggestion());
  EXPECT_NE(text.str().find(buf), std::string::npos);
  EXPECT_NE(text.str().find("Learning rate (log scale)"), std::string::npos);
  std::ifstream png(dir.file("lr_find.png"), std::ios::binary);
  std::string head(8, '\0');
  png.read(head.data(), 8);
  EXPECT_EQ(head, std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(volt::testing::files_under(dir.str()), (std::vector<std::string>{"lr_find.png", "lr_find.svg"}));
  // A folder that is not there: refused, nothing written.
  EXPECT_THROW(result.save_plot(dir.file("missing/lr_find")), volt::ConfigError);
  EXPECT_EQ(volt::testing::files_under(dir.str()).size(), 2u);
}

TEST(TunerCli, TunerLrFindTrueSetsTheLearningRateBeforeFit) {
  TempDir dir("volt_lr_cli");
  volt::cli::Cli cli("prog", "", lr_options(dir.str()));
  const char* argv[] = {"prog",
                        "--tuner.lr_find",
                        "true",
                        "--tuner.lr_find_num_training",
                        "40",
                        "--tuner.lr_find_mode=linear",
                        "--tuner.lr_find_max_lr",
                        "0.1"};
  ASSERT_TRUE(cli.parse(8, argv));
  const volt::TrainerOptions& t = cli.trainer_options();
  EXPECT_TRUE(t.tuner_lr_find);
  EXPECT_EQ(t.tuner_lr_find_num_training, 40);
  EXPECT_EQ(t.tuner_lr_find_mode, "linear");
  EXPECT_EQ(t.tuner_lr_find_max_lr, 0.1);
  torch::manual_seed(6);
  Mlp model(16, 32, 4, 1e-3);
  TensorDataModule data(volt::testing::blobs(1024, 16, 4, 8), 32);
  struct LrSpy : volt::callbacks::Callback {
    std::string state_key() const override { return "LrSpy"; }
    void on_fit_start(volt::TrainerView& view) override {
      lr = view.optimizers()[0]->param_groups()[0].options().get_lr();
    }
    double lr = 0;
  };
  auto spy = std::make_shared<LrSpy>();
  volt::Trainer trainer(t, {spy});
  std::ostringstream out;
  const auto lr = volt::Tuner(trainer).tune(model, data, out);
  ASSERT_TRUE(lr.has_value());
  EXPECT_EQ(model.lr(), *lr);
  EXPECT_LE(*lr, 0.1);
  EXPECT_NE(out.str().find("lr_find suggests a learning rate of"), std::string::npos) << out.str();
  EXPECT_EQ(spy->lr, 0.0) << "the sweep ran through the user's Trainer";
  trainer.fit(model, data);
  EXPECT_EQ(spy->lr, *lr) << "fit's optimizer does not have the suggested rate";
}

TEST(TunerCli, BadTunerValuesAreRefusedByTheTrainerNamingTheFlag) {
  const auto refused = [](const std::vector<const char*>& args, const std::string& word) {
    volt::cli::Cli cli("prog");
    std::vector<const char*> argv{"prog"};
    argv.insert(argv.end(), args.begin(), args.end());
    ASSERT_TRUE(cli.parse(static_cast<int>(argv.size()), argv.data()));
    try {
      volt::Trainer trainer(cli.trainer_options());
      ADD_FAILURE() << "accepted; expected a ConfigError naming " << word;
    } catch (const volt::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  };
  refused({"--tuner.lr_find_mode", "cubic"}, "tuner.lr_find_mode='cubic'");
  refused({"--tuner.lr_find_min_lr", "0"}, "tuner.lr_find_min_lr=0");
  refused({"--tuner.lr_find_max_lr", "1e-9"}, "tuner.lr_find_max_lr=");
  refused({"--tuner.lr_find_num_training", "0"}, "tuner.lr_find_num_training=0");
  refused({"--tuner.scale_batch_size", "linear"}, "tuner.scale_batch_size='linear'");
  refused({"--tuner.batch_size_memory_budget", "-5"}, "tuner.batch_size_memory_budget=-5");
}

}  // namespace

namespace {

// Fashion-MNIST (Debian's dataset-fashion-mnist), the 784-128-10 MLP, one epoch: the finder's rate
// against Adam's usual 1e-3. VOLT_LR_FIND_PLOT=<stem> also writes the sweep's plot (docs/tuner.md's).
TEST(TunerSlow, LrFindOnFashionMnistSuggestsARateThatTrainsAsWellAsAHandPickedOne) {
  if (!std::filesystem::exists(std::string(volt::data::kFashionMnistDir) + "/t10k-labels-idx1-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST (dataset-fashion-mnist) is not installed";
  }
  const auto test_set = volt::data::load_mnist_format(volt::data::kFashionMnistDir, /*train=*/false);
  TempDir dir("volt_lr_fashion");
  const auto train = [&](double lr, volt::tuner::LRFinderResult* found) {
    torch::manual_seed(11);
    Mlp model(784, 128, 10, lr);
    volt::data::MnistDataModule data({});
    volt::TrainerOptions o = lr_options(dir.str());
    o.limit_val_batches = volt::BatchLimit::count(0);
    volt::Trainer trainer(o);
    if (found != nullptr) {
      volt::tuner::LRFindOptions f;
      f.update_attr = true;
      *found = volt::Tuner(trainer).lr_find(model, data, f);
    }
    trainer.fit(model, data);
    return std::make_pair(model.lr(), model.accuracy(*test_set));
  };
  volt::tuner::LRFinderResult result;
  const auto [suggested, tuned] = train(1e-3, &result);
  const auto [hand, picked] = train(1e-3, nullptr);
  std::cout << "lr_find suggested " << suggested << " (" << result.lrs().size() << " steps): test accuracy " << tuned
            << "%; hand-picked " << hand << ": " << picked << "%" << std::endl;
  ASSERT_TRUE(result.suggestion().has_value());
  EXPECT_EQ(suggested, *result.suggestion());
  EXPECT_GE(suggested, 1e-5);
  EXPECT_LE(suggested, 1e-1);
  EXPECT_GE(tuned, picked - 1.0);
  if (const char* stem = std::getenv("VOLT_LR_FIND_PLOT")) result.save_plot(stem);
}

}  // namespace
