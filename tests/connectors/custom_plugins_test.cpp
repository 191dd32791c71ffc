// Plug-ins of the user's own: a custom accelerator, strategy, cluster environment, precision,
// CheckpointIO and logger, registered by name and passed as objects, each training a small
// module and recording that it was used; conflicting choices refused naming both; unknown
// names listing the known ones; `volt info` listing what the registries hold.
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "support/boring_module.h"
#include "support/expect.h"
#include "volt/accelerators/accelerator_registry.h"
#include "volt/accelerators/cpu_accelerator.h"
#include "volt/checkpoint_io/async_checkpoint_io.h"
#include "volt/checkpoint_io/checkpoint_io_registry.h"
#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/core/error.h"
#include "volt/core/registry.h"
#include "volt/environments/default_environment.h"
#include "volt/environments/environment_registry.h"
#include "volt/loggers/logger_registry.h"
#include "volt/precision/precision_registry.h"
#include "volt/profilers/profiler.h"
#include "volt/strategies/ddp_strategy.h"
#include "volt/strategies/single_device_strategy.h"
#include "volt/strategies/strategy_registry.h"
#include "volt/trainer/plugins.h"
#include "volt/trainer/trainer.h"

namespace {

namespace fs = std::filesystem;
using volt::ConfigError;
using volt::Trainer;
using volt::TrainerOptions;
using volt::TrainerPlugins;
using volt::strategies::StrategyParts;
using volt::testing::BoringModule;
using volt::testing::files_under;
using volt::testing::mentions;
using volt::testing::quiet_options;
using volt::testing::random_loader;
using volt::testing::ScratchDir;

// ------------------------------------------------------------ the recording plug-ins

struct Uses {
  std::atomic<int> accelerator_built{0}, setup_device{0}, strategy_setup{0}, connects{0}, environment_built{0},
      precision_backward{0}, saves{0}, loads{0}, rows{0};
};

class RecordingAccelerator : public volt::accelerators::CPUAccelerator {
 public:
  explicit RecordingAccelerator(Uses& uses, std::string name = "recording_cpu")
      : CPUAccelerator(1), uses_(uses), name_(std::move(name)) {}
  std::string name() const override { return name_; }
  void setup_device(const c10::Device& device) override {
    ++uses_.setup_device;
    CPUAccelerator::setup_device(device);
  }

 private:
  Uses& uses_;
  std::string name_;
};

class RecordingStrategy : public volt::strategies::SingleDeviceStrategy {
 public:
  RecordingStrategy(const StrategyParts& p, Uses& uses)
      : SingleDeviceStrategy(p.root_device, p.accelerator, p.precision, p.environment, p.checkpoint_io), uses_(uses) {}
  std::string name() const override { return "recording_single"; }
  void setup(volt::Module& module) override {
    ++uses_.strategy_setup;
    SingleDeviceStrategy::setup(module);
  }

 private:
  Uses& uses_;
};

/// A strategy object built without its parts: the accelerator connector connects them.
class ObjectStrategy : public volt::strategies::Strategy {
 public:
  explicit ObjectStrategy(Uses& uses, std::shared_ptr<volt::checkpoint_io::CheckpointIO> own_io = nullptr)
      : uses_(uses) {
    checkpoint_io_ = std::move(own_io);
  }
  std::string name() const override { return "object_single"; }
  c10::Device root_device() const override { return device_; }
  void connect(const StrategyParts& parts) override {
    Strategy::connect(parts);
    device_ = parts.root_device;
    ++uses_.connects;
  }
  void setup(volt::Module& module) override {
    ++uses_.strategy_setup;
    Strategy::setup(module);
  }

 private:
  Uses& uses_;
  c10::Device device_{c10::kCPU};
};

class RecordingEnvironment : public volt::environments::DefaultEnvironment {
 public:
  explicit RecordingEnvironment(std::string name = "recording_env")
      : DefaultEnvironment(volt::Environ()), name_(std::move(name)) {}
  std::string name() const override { return name_; }

 private:
  std::string name_;
};

class RecordingPrecision : public volt::precision::Precision {
 public:
  explicit RecordingPrecision(Uses& uses, std::string name = "recording_32") : uses_(uses), name_(std::move(name)) {}
  std::string name() const override { return name_; }
  void backward(const at::Tensor& loss) override {
    ++uses_.precision_backward;
    Precision::backward(loss);
  }

 private:
  Uses& uses_;
  std::string name_;
};

class RecordingCheckpointIO : public volt::checkpoint_io::TorchCheckpointIO {
 public:
  explicit RecordingCheckpointIO(Uses& uses) : uses_(uses) {}
  void save_checkpoint(const volt::Checkpoint& checkpoint, const std::string& path) override {
    ++uses_.saves;
    TorchCheckpointIO::save_checkpoint(checkpoint, path);
  }
  volt::Checkpoint load_checkpoint(const std::string& path) override {
    ++uses_.loads;
    return TorchCheckpointIO::load_checkpoint(path);
  }

 private:
  Uses& uses_;
};

class RecordingLogger : public volt::loggers::Logger {
 public:
  RecordingLogger(Uses& uses, std::string dir) : uses_(uses), dir_(std::move(dir)) {}
  std::string name() const override { return "recording_logger"; }
  std::string version() override { return "version_0"; }
  std::string log_dir() override { return dir_; }
  void log_hyperparams(const std::map<std::string, std::string>&) override {}
  void log_metrics(const volt::MetricMap& m, int64_t) override {
    if (m.count("train_loss") != 0) ++uses_.rows;
  }

 private:
  Uses& uses_;
  std::string dir_;
};

/// Registers one custom key of each kind for the life of a test, and removes them after.
class CustomNames {
 public:
  explicit CustomNames(Uses& uses) {
    using volt::strategies::LauncherKind;
    volt::accelerators::register_accelerator(
        "recording_cpu", "the CPU, counting its set-ups", {.device_type = "cpu"},
        [&uses](const volt::accelerators::AcceleratorContext&) -> std::shared_ptr<volt::accelerators::Accelerator> {
          ++uses.accelerator_built;
          return std::make_shared<RecordingAccelerator>(uses);
        });
    volt::strategies::register_strategy(
        {"recording_single", "single_device, counting its set-ups", LauncherKind::kNone, {"cpu"}, false, true, false},
        [&uses](const StrategyParts& p) { return std::make_shared<RecordingStrategy>(p, uses); });
    volt::environments::register_environment("recording_env", "one local process, counted", {},
                                             [&uses](const volt::environments::EnvironmentContext&) {
                                               ++uses.environment_built;
                                               return std::make_shared<RecordingEnvironment>();
                                             });
    volt::precision::register_precision(
        "recording_32", "32-true, counting backward passes",
        [&uses](const std::string&) { return std::make_shared<RecordingPrecision>(uses); });
    volt::checkpoint_io::register_checkpoint_io("recording_io", "torch files, counted",
                                                [&uses] { return std::make_shared<RecordingCheckpointIO>(uses); });
    volt::loggers::register_logger("recording_logger", "counts train_loss rows", [&uses](const TrainerOptions& o) {
      return std::make_shared<RecordingLogger>(uses, o.default_root_dir);
    });
  }
  ~CustomNames() {
    volt::accelerators::accelerator_registry().remove("recording_cpu");
    volt::strategies::strategy_registry().remove("recording_single");
    volt::environments::environment_registry().remove("recording_env");
    volt::precision::precision_registry().remove("recording_32");
    volt::checkpoint_io::checkpoint_io_registry().remove("recording_io");
    volt::loggers::logger_registry().remove("recording_logger");
  }
  CustomNames(const CustomNames&) = delete;
  CustomNames& operator=(const CustomNames&) = delete;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const volt::Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<std::string> ckpt_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& f : files_under(dir)) {
    if (fs::path(f).extension() == ".ckpt") out.push_back(f);
  }
  return out;
}

// ------------------------------------------------------------ by name

TEST(CustomPlugins, EachKindRegisteredByNameTrainsAndIsUsed) {
  ScratchDir dir;
  Uses uses;
  CustomNames names(uses);
  TrainerOptions o = quiet_options(dir.path());
  o.accelerator = "Recording_CPU";  // names match in any case
  o.strategy = "recording_single";
  o.cluster_environment = "recording_env";
  o.precision = "recording_32";
  o.checkpoint_io = "recording_io";
  o.logger = "recording_logger";
  o.log_every_n_steps = 1;
  o.enable_checkpointing = true;
  Trainer trainer(o);
  EXPECT_EQ(trainer.plan().accelerator, "recording_cpu");
  EXPECT_EQ(trainer.plan().strategy, "recording_single");
  EXPECT_EQ(trainer.plan().cluster_env, "recording_env");
  EXPECT_EQ(trainer.plan().precision, "recording_32");
  EXPECT_EQ(trainer.plan().checkpoint_io, "recording_io");
  BoringModule model;
  trainer.fit(model, random_loader(16, 4, 1));
  EXPECT_EQ(trainer.global_step(), 4);
  // Built once (the connector's), set up for the stage.
  EXPECT_EQ(uses.accelerator_built.load(), 1);
  EXPECT_GE(uses.setup_device.load(), 1);
  EXPECT_EQ(&trainer.strategy().accelerator(), trainer.strategy().accelerator_part().get());
  EXPECT_EQ(trainer.strategy().accelerator().name(), "recording_cpu");
  EXPECT_EQ(trainer.strategy().name(), "recording_single");
  EXPECT_EQ(uses.strategy_setup.load(), 1);
  EXPECT_EQ(uses.environment_built.load(), 1);
  EXPECT_EQ(trainer.strategy().cluster_environment().name(), "recording_env");
  EXPECT_EQ(uses.precision_backward.load(), 4);
  EXPECT_GE(uses.saves.load(), 1);  // ModelCheckpoint wrote through it
  EXPECT_EQ(ckpt_files(dir.path()).size(), 1u);
  EXPECT_EQ(uses.rows.load(), 4);
}

TEST(CustomPlugins, AsyncCheckpointWrapsACheckpointIOChosenByName) {
  ScratchDir dir;
  Uses uses;
  CustomNames names(uses);
  TrainerOptions o = quiet_options(dir.path());
  o.checkpoint_io = "recording_io";
  o.async_checkpoint = true;
  o.enable_checkpointing = true;
  Trainer trainer(o);
  EXPECT_NE(dynamic_cast<volt::checkpoint_io::AsyncCheckpointIO*>(&trainer.strategy().checkpoint_io()), nullptr);
  BoringModule model;
  trainer.fit(model, random_loader(8, 4, 1));
  EXPECT_GE(uses.saves.load(), 1);  // the background thread wrote through the custom one
  EXPECT_EQ(ckpt_files(dir.path()).size(), 1u);
}

TEST(CustomPlugins, RegisteredEnvironmentIsDetectedInItsOrder) {
  Uses uses;
  volt::environments::register_environment(
      "always_here", "detected whenever VOLT_TEST_ALWAYS is set",
      {.detect = [](const volt::environments::EnvironmentContext& c) { return c.env.has("VOLT_TEST_ALWAYS"); },
       .detection_order = 50},
      [](const volt::environments::EnvironmentContext&) {
        return std::make_shared<RecordingEnvironment>("always_here");
      });
  const auto names = volt::environments::environment_names();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front(), "always_here");
  EXPECT_EQ(names.back(), "default");
  TrainerOptions o;
  o.accelerator = "cpu";
  o.devices = "1";
  const auto probe = volt::accelerators::HardwareProbe::assume("cpu", volt::Environ());
  EXPECT_EQ(volt::connectors::AcceleratorConnector(
                o, volt::Environ(std::map<std::string, std::string>{{"VOLT_TEST_ALWAYS", "1"}}), probe)
                .plan()
                .cluster_env,
            "always_here");
  // torchrun's variables outrank it no more: the order decides.
  EXPECT_EQ(volt::connectors::AcceleratorConnector(o, volt::Environ(std::map<std::string, std::string>{}), probe)
                .plan()
                .cluster_env,
            "default");
  volt::environments::environment_registry().remove("always_here");
  EXPECT_EQ(volt::environments::environment_names().front(), "torchelastic");
}

// ------------------------------------------------------------ as objects

TEST(CustomPlugins, ObjectsPassedAsPluginsTrainAndAreUsed) {
  ScratchDir dir;
  Uses uses;
  CustomNames names(uses);  // the recording logger
  TrainerOptions o = quiet_options(dir.path());
  o.accelerator = "auto";
  o.logger = true;
  o.log_every_n_steps = 1;
  o.enable_checkpointing = true;
  auto strategy = std::make_shared<ObjectStrategy>(uses);
  auto accelerator = std::make_shared<RecordingAccelerator>(uses, "object_cpu");
  auto environment = std::make_shared<RecordingEnvironment>("object_env");
  auto precision = std::make_shared<RecordingPrecision>(uses, "object_32");
  auto io = std::make_shared<RecordingCheckpointIO>(uses);
  auto logger = std::make_shared<RecordingLogger>(uses, dir.path());
  Trainer trainer(o, TrainerPlugins{strategy, accelerator, {environment, precision, io}}, {}, {logger});
  EXPECT_EQ(&trainer.strategy(), strategy.get());
  EXPECT_EQ(uses.connects.load(), 1);
  EXPECT_EQ(&trainer.strategy().accelerator(), accelerator.get());
  EXPECT_EQ(&trainer.strategy().precision(), precision.get());
  EXPECT_EQ(&trainer.strategy().cluster_environment(), environment.get());
  EXPECT_EQ(&trainer.strategy().checkpoint_io(), io.get());
  EXPECT_EQ(trainer.plan().accelerator, "object_cpu");
  EXPECT_EQ(trainer.plan().strategy, "object_single");
  EXPECT_EQ(trainer.plan().cluster_env, "object_env");
  EXPECT_EQ(trainer.plan().precision, "object_32");
  EXPECT_EQ(trainer.plan().checkpoint_io, "object");
  BoringModule model;
  trainer.fit(model, random_loader(16, 4, 1));
  EXPECT_EQ(trainer.global_step(), 4);
  EXPECT_GE(uses.setup_device.load(), 1);
  EXPECT_EQ(uses.strategy_setup.load(), 1);
  EXPECT_EQ(uses.precision_backward.load(), 4);
  EXPECT_GE(uses.saves.load(), 1);
  EXPECT_EQ(ckpt_files(dir.path()).size(), 1u);
  EXPECT_EQ(uses.rows.load(), 4);
  EXPECT_EQ(environment->world_size(), 1);  // told the plan's layout
}

TEST(CustomPlugins, DdpStrategyObjectGetsItsPartsFromTheConnector) {
  ScratchDir dir;
  Uses uses;
  volt::strategies::DDPOptions ddp;
  ddp.bucket_cap_mb = 5.0;
  auto strategy = std::make_shared<volt::strategies::DDPStrategy>(ddp);
  auto precision = std::make_shared<RecordingPrecision>(uses);
  TrainerOptions o = quiet_options(dir.path());
  o.accelerator = "auto";
  Trainer trainer(o, TrainerPlugins{.strategy = strategy, .plugins = {precision}});
  EXPECT_EQ(&trainer.strategy(), strategy.get());
  EXPECT_EQ(trainer.plan().strategy, "ddp");
  EXPECT_EQ(trainer.strategy().accelerator().name(), "cpu");
  EXPECT_EQ(trainer.strategy().cluster_environment().name(), "default");
  EXPECT_EQ(&trainer.strategy().precision(), precision.get());
  EXPECT_EQ(strategy->ddp_options().bucket_cap_mb, 5.0);  // its own settings stay
  EXPECT_EQ(trainer.strategy().world_size(), 1);
  BoringModule model;
  trainer.fit(model, random_loader(8, 4, 1));
  EXPECT_EQ(trainer.global_step(), 2);
  EXPECT_EQ(uses.precision_backward.load(), 2);
  EXPECT_THROW(volt::strategies::DDPStrategy(ddp, "single_device"), ConfigError);
}

// ------------------------------------------------------------ conflicts

TEST(CustomPlugins, ConflictingChoicesAreRefusedNamingBothBeforeAnythingRuns) {
  ScratchDir dir;
  Uses uses;
  TrainerOptions o = quiet_options(dir.path());
  o.logger = true;
  o.enable_checkpointing = true;
  o.accelerator = "auto";
  auto refused = [&](TrainerOptions options, TrainerPlugins plugins) {
    return error_of([&] { Trainer trainer(options, std::move(plugins)); });
  };
  auto env = [](const std::string& name) { return std::make_shared<RecordingEnvironment>(name); };
  auto io = [&] { return std::make_shared<RecordingCheckpointIO>(uses); };

  TrainerOptions mixed = o;
  mixed.precision = "16-mixed";
  EXPECT_TRUE(mentions(refused(mixed, {.plugins = {std::make_shared<RecordingPrecision>(uses, "mine")}}),
                       {"precision='16-mixed'", "'mine'", "RecordingPrecision", "both given"}));
  EXPECT_TRUE(mentions(refused(o, {.plugins = {std::make_shared<RecordingPrecision>(uses, "a"),
                                               std::make_shared<RecordingPrecision>(uses, "b")}}),
                       {"2 precision plug-ins", "'a'", "'b'"}));
  EXPECT_TRUE(mentions(refused(o, {.plugins = {env("first_env"), env("second_env")}}),
                       {"2 ClusterEnvironments", "'first_env'", "'second_env'"}));
  TrainerOptions slurm = o;
  slurm.cluster_environment = "slurm";
  EXPECT_TRUE(
      mentions(refused(slurm, {.plugins = {env("mine_env")}}), {"cluster_environment='slurm'", "'mine_env'", "both"}));
  TrainerOptions ddp = o;
  ddp.strategy = "ddp";
  EXPECT_TRUE(mentions(refused(ddp, {.strategy = std::make_shared<ObjectStrategy>(uses)}),
                       {"strategy='ddp'", "'object_single'", "ObjectStrategy", "both given"}));
  EXPECT_TRUE(mentions(
      refused(o, {.strategy = std::make_shared<ObjectStrategy>(uses, io()), .plugins = {io()}}),
      {"CheckpointIO in plugins", "RecordingCheckpointIO", "another in the strategy object", "'object_single'"}));
  EXPECT_TRUE(mentions(refused(o, {.plugins = {io(), io()}}), {"2 CheckpointIOs", "RecordingCheckpointIO"}));
  TrainerOptions async = o;
  async.checkpoint_io = "async";
  EXPECT_TRUE(mentions(refused(async, {.plugins = {io()}}), {"checkpoint_io='async'", "RecordingCheckpointIO"}));
  TrainerOptions cpu = o;
  cpu.accelerator = "cpu";
  EXPECT_TRUE(mentions(refused(cpu, {.accelerator = std::make_shared<RecordingAccelerator>(uses, "obj_cpu")}),
                       {"accelerator='cpu'", "'obj_cpu'", "both given"}));
  EXPECT_TRUE(mentions(refused(o, {.plugins = {std::shared_ptr<volt::precision::Precision>()}}),
                       {"plugins[0]", "null", "Precision"}));
  // The options' own conflicts (as before): loggers given and named.
  TrainerOptions named = o;
  named.logger = "csv";
  EXPECT_TRUE(mentions(
      error_of([&] { Trainer t(named, TrainerPlugins{}, {}, {std::make_shared<RecordingLogger>(uses, dir.path())}); }),
      {"logger='csv'", "names loggers too"}));
  // Nothing ran: no version folder, no checkpoint, no strategy set up.
  EXPECT_TRUE(files_under(dir.path()).empty());
  EXPECT_EQ(uses.strategy_setup.load(), 0);
  EXPECT_EQ(uses.connects.load(), 0);
}

// ------------------------------------------------------------ unknown names, bad registrations

TEST(CustomPlugins, UnknownNamesListTheKnownOnesCustomIncluded) {
  ScratchDir dir;
  Uses uses;
  CustomNames names(uses);
  const TrainerOptions base = quiet_options(dir.path());
  auto refused = [&](const std::function<void(TrainerOptions&)>& change) {
    TrainerOptions o = base;
    change(o);
    return error_of([&] { Trainer trainer(o); });
  };
  EXPECT_TRUE(mentions(refused([](TrainerOptions& o) { o.accelerator = "npu"; }),
                       {"accelerator='npu'", "auto", "cpu", "cuda", "tpu", "recording_cpu"}));
  EXPECT_TRUE(mentions(refused([](TrainerOptions& o) { o.strategy = "warp"; }),
                       {"strategy='warp'", "auto", "ddp_spawn", "single_device", "recording_single"}));
  EXPECT_TRUE(mentions(refused([](TrainerOptions& o) { o.precision = "8-true"; }),
                       {"precision='8-true'", "bf16-mixed", "recording_32"}));
  EXPECT_TRUE(mentions(refused([](TrainerOptions& o) { o.cluster_environment = "pbs"; }),
                       {"cluster_environment='pbs'", "slurm", "torchelastic", "recording_env"}));
  EXPECT_TRUE(mentions(refused([](TrainerOptions& o) { o.checkpoint_io = "s3"; }),
                       {"checkpoint_io='s3'", "torch", "async", "recording_io"}));
  EXPECT_TRUE(mentions(refused([](TrainerOptions& o) { o.logger = "wandb"; }),
                       {"logger='wandb'", "csv", "tensorboard", "recording_logger"}));
  EXPECT_TRUE(files_under(dir.path()).empty());
}

TEST(CustomPlugins, BadRegistrationsAreRefused) {
  using volt::strategies::LauncherKind;
  auto cpu = [](const volt::accelerators::AcceleratorContext&) -> std::shared_ptr<volt::accelerators::Accelerator> {
    return std::make_shared<volt::accelerators::CPUAccelerator>(1);
  };
  EXPECT_TRUE(mentions(error_of([&] { volt::accelerators::register_accelerator("", "x", {}, cpu); }), {"empty"}));
  EXPECT_TRUE(mentions(error_of([&] { volt::accelerators::register_accelerator("Auto", "x", {}, cpu); }),
                       {"accelerator='Auto'", "Choose another name"}));
  EXPECT_TRUE(mentions(error_of([&] { volt::accelerators::register_accelerator("npu", "x", {}, nullptr); }),
                       {"accelerator='npu'", "factory is empty"}));
  EXPECT_TRUE(
      mentions(error_of([&] { volt::accelerators::register_accelerator("npu", "x", {.device_type = "npu"}, cpu); }),
               {"device_type='npu'", "cpu", "cuda", "tpu"}));
  EXPECT_TRUE(mentions(error_of([] {
                         volt::strategies::register_strategy(
                             {"mine", "x", LauncherKind::kNone, {}, false, false, false},
                             [](const StrategyParts&) { return nullptr; });
                       }),
                       {"mine", "no accelerators"}));
  EXPECT_TRUE(mentions(
      error_of([] { volt::precision::register_precision("16", "x", [](const std::string&) { return nullptr; }); }),
      {"precision='16'", "Choose another name"}));
  // register_strategy_factory replaces the class of a known name only.
  EXPECT_TRUE(mentions(error_of([] {
                         volt::strategies::register_strategy_factory("nope",
                                                                     [](const StrategyParts&) { return nullptr; });
                       }),
                       {"strategy='nope'", "ddp"}));
  for (const std::string key : {"npu", "mine"}) {
    EXPECT_FALSE(volt::accelerators::accelerator_registry().contains(key));
    EXPECT_FALSE(volt::strategies::strategy_registry().contains(key));
  }
}

TEST(CustomPlugins, AFactoryReturningNullIsAnErrorNamingIt) {
  ScratchDir dir;
  volt::checkpoint_io::register_checkpoint_io("null_io", "returns nothing", [] { return nullptr; });
  TrainerOptions o = quiet_options(dir.path());
  o.checkpoint_io = "null_io";
  EXPECT_TRUE(mentions(error_of([&] { Trainer trainer(o); }), {"checkpoint_io='null_io'", "null"}));
  volt::checkpoint_io::checkpoint_io_registry().remove("null_io");
}

// ------------------------------------------------------------ the registries themselves

TEST(Registry, InfoTravelsWithTheEntryAndRemoveForgetsIt) {
  struct Info {
    int order = 0;
  };
  volt::InfoRegistry<Info, int> registry("thing", {"auto"});
  registry.add("b", "second", Info{2}, [] { return std::make_shared<int>(2); });
  registry.add("a", "first", Info{1}, [] { return std::make_shared<int>(1); });
  registry.add("plan_only", "known, not built", Info{3}, nullptr, /*allow_empty_factory=*/true);
  EXPECT_EQ(registry.info("B").order, 2);
  EXPECT_EQ(registry.entries().front().key, "b");  // registration order
  EXPECT_EQ(registry.known_keys(), "auto, a, b, plan_only");
  EXPECT_FALSE(registry.has_factory("plan_only"));
  EXPECT_THROW(registry.create("plan_only"), volt::NotSupportedError);
  EXPECT_TRUE(mentions(error_of([&] { registry.create("c"); }), {"thing='c'", "auto, a, b, plan_only"}));
  EXPECT_TRUE(registry.remove("A"));
  EXPECT_FALSE(registry.remove("a"));
  EXPECT_FALSE(registry.contains("a"));
}

TEST(Registry, ConcurrentRegistrationAndLookupAreSafe) {
  volt::Registry<int, int> registry("counter");
  registry.add("base", "", [](int x) { return std::make_shared<int>(x); });
  std::atomic<int> created{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        registry.add("k" + std::to_string(t) + "_" + std::to_string(i % 10), "d",
                     [](int x) { return std::make_shared<int>(x + 1); });
        created += *registry.create("base", 1);
        (void)registry.known_keys();
        registry.remove("k" + std::to_string(t) + "_" + std::to_string((i + 5) % 10));
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(created.load(), 2000);
  EXPECT_TRUE(registry.contains("base"));
}

TEST(Registry, EveryKindListsItsBuiltIns) {
  const std::map<std::string, std::vector<std::string>> built_in = {
      {"accelerator", {"cpu", "cuda", "tpu"}},
      {"strategy",
       {"single_device", "ddp", "ddp_find_unused_parameters_true", "ddp_find_unused_parameters_false", "ddp_spawn",
        "ddp_spawn_find_unused_parameters_true", "ddp_spawn_find_unused_parameters_false", "dp", "xla", "single_xla"}},
      {"precision", {"32-true", "64-true", "16-mixed", "bf16-mixed", "16-true", "bf16-true"}},
      {"cluster_environment", {"torchelastic", "slurm", "kubeflow", "lsf", "mpi", "tpu", "default"}},
      {"checkpoint_io", {"torch", "async"}},
      {"logger", {"csv", "tensorboard"}},
      {"profiler", {"simple", "advanced", "pytorch"}},
  };
  std::map<std::string, std::vector<std::string>> listed;
  for (const auto& row : volt::registry_rows()) {
    EXPECT_FALSE(row.description.empty()) << row.kind << " " << row.key;
    listed[row.kind].push_back(row.key);
  }
  for (const auto& [kind, keys] : built_in) {
    for (const auto& key : keys) {
      EXPECT_NE(std::find(listed[kind].begin(), listed[kind].end(), key), listed[kind].end()) << kind << " " << key;
    }
  }
  EXPECT_EQ(listed["cluster_environment"], built_in.at("cluster_environment"));  // detection order
  const std::string text = volt::describe_registries();
  EXPECT_NE(text.find("strategy:\n  single_device: one process on one device\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  dp: one process splits each batch over the GPUs of one node [plan only]\n"),
            std::string::npos);
}

TEST(Registry, KeyRegisteredAtRunTimeIsListed) {
  Uses uses;
  CustomNames names(uses);
  const std::string text = volt::describe_registries();
  for (const std::string line :
       {"  recording_cpu: the CPU, counting its set-ups\n", "  recording_single: single_device, counting its set-ups\n",
        "  recording_env: one local process, counted\n", "  recording_32: 32-true, counting backward passes\n",
        "  recording_io: torch files, counted\n", "  recording_logger: counts train_loss rows\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << " missing in\n" << text;
  }
}

#ifdef VOLT_CORE_CLI
/// stdout of `volt-core info`.
std::string volt_info() {
  std::string out;
  FILE* pipe = ::popen((std::string("'") + VOLT_CORE_CLI + "' info 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  EXPECT_EQ(::pclose(pipe), 0);
  return out;
}

TEST(VoltInfo, ListsExactlyWhatTheRegistriesHold) {
  const std::string info = volt_info();
  const std::string heading = "registered plug-ins (kind, key, description):\n";
  const auto at = info.find(heading);
  ASSERT_NE(at, std::string::npos) << info;
  // This process holds the built-ins only (volt info is another program: it cannot see keys
  // registered here, so the built-ins are what both list).
  EXPECT_EQ(info.substr(at + heading.size()), volt::describe_registries()) << info;
  for (const std::string key : {"cpu", "cuda", "tpu", "ddp_spawn", "single_xla", "bf16-true", "slurm", "kubeflow",
                                "torch", "async", "tensorboard", "pytorch"}) {
    EXPECT_NE(info.find("  " + key + ": "), std::string::npos) << key;
  }
}
#endif

}  // namespace
