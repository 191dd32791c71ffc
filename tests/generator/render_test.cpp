// Rendering: every template's files, config.yaml and README commands across an option matrix, and the
// notebook's metadata.
#include <yaml-cpp/yaml.h>

#include <gtest/gtest.h>

#include "support/expect.h"
#include "support/generator_options.h"
#include "volt/generator/generator.h"

namespace gen = volt::generator;
using nlohmann::json;
using volt::testing::contains;

namespace {

using volt::testing::base_options;

YAML::Node config_of(const gen::Project& p) { return YAML::Load(p.files.at("config.yaml")); }

}  // namespace

TEST(GeneratorRender, EveryTemplateIsACompleteVoltProject) {
  for (const auto& t : gen::templates()) {
    const std::string id = t["id"];
    const auto p = gen::render(base_options({{"template", id}}));
    EXPECT_EQ(p.name, "app");
    for (const char* f : {"CMakeLists.txt", "README.md", "config.yaml", "src/main.cpp"}) {
      EXPECT_TRUE(p.files.count(f)) << id << " lacks " << f;
    }
    EXPECT_TRUE(contains(p.files.at("CMakeLists.txt"), "find_package(Volt REQUIRED)")) << id;
    EXPECT_TRUE(contains(p.files.at("CMakeLists.txt"), "add_executable(app src/main.cpp)")) << id;
    EXPECT_TRUE(contains(p.files.at("src/main.cpp"), "volt::cli::Cli")) << id;
    EXPECT_FALSE(p.files.count("run.sbatch")) << id << ": one node and sbatch off";
    for (const char* f : {"CMakeLists.txt", "README.md", "config.yaml"}) {  // the rendered ones; C++ is verbatim
      EXPECT_FALSE(contains(p.files.at(f), "{{")) << id << "/" << f << " has an unrendered tag";
    }
    const auto cfg = config_of(p);
    EXPECT_EQ(cfg["trainer"]["max_epochs"].as<int>(), 3) << id;
    EXPECT_EQ(cfg["trainer"]["strategy"].as<std::string>(), "auto") << id;
    EXPECT_EQ(cfg["trainer"]["devices"].as<std::string>(), "1") << id;
    EXPECT_EQ(cfg["model"]["lr"].as<double>(), id == "gan" ? 0.0002 : 0.001) << id;
    EXPECT_EQ(cfg["data"]["batch_size"].as<int>(), 64) << id;
  }
}

TEST(GeneratorRender, RecordsTheGeneratorVersionAndTheRecreatingCommand) {
  const json o = base_options({{"template", "language-model"}, {"max_epochs", 7}});
  const auto p = gen::render(o);
  const std::string cmd = gen::command_line(o);
  EXPECT_EQ(cmd, "volt new app --template language-model --max-epochs 7");
  for (const char* f : {"README.md", "config.yaml", "CMakeLists.txt"}) {
    EXPECT_TRUE(contains(p.files.at(f), cmd)) << f;
    EXPECT_TRUE(contains(p.files.at(f), gen::version())) << f;
  }
}

TEST(GeneratorRender, TrainingOptionsGoToConfigNotCode) {
  const auto a = gen::render(base_options({{"template", "image-classification"}}));
  const auto b = gen::render(base_options({{"template", "image-classification"}, {"lr", 0.05}, {"max_epochs", 9},
                                   {"optimizer", "sgd"}, {"batch_size", 16}, {"seed", 1}, {"precision", "bf16-mixed"},
                                   {"early_stopping", true}, {"patience", 2}, {"logger", "none"}}));
  EXPECT_EQ(a.files.at("src/main.cpp"), b.files.at("src/main.cpp"));
  EXPECT_EQ(a.files.at("src/project_options.h"), b.files.at("src/project_options.h"));
  const auto cfg = config_of(b);
  EXPECT_EQ(cfg["model"]["lr"].as<double>(), 0.05);
  EXPECT_EQ(cfg["model"]["optimizer"].as<std::string>(), "sgd");
  EXPECT_EQ(cfg["trainer"]["max_epochs"].as<int>(), 9);
  EXPECT_EQ(cfg["trainer"]["precision"].as<std::string>(), "bf16-mixed");
  EXPECT_EQ(cfg["trainer"]["seed"].as<int>(), 1);
  EXPECT_FALSE(cfg["trainer"]["logger"].as<bool>());
  EXPECT_TRUE(cfg["early_stopping"]["enabled"].as<bool>());
  EXPECT_EQ(cfg["early_stopping"]["patience"].as<int>(), 2);
  EXPECT_EQ(cfg["data"]["batch_size"].as<int>(), 16);
  EXPECT_EQ(cfg["data"]["dir"].as<std::string>(), "/usr/share/datasets/fashion-mnist");
}

TEST(GeneratorRender, CheckpointOptionsGoToConfig) {
  const auto cfg = config_of(gen::render(base_options({{"save_best", false}, {"save_last", false},
                                               {"every_n_train_steps", 100}, {"save_top_k", -1}})));
  EXPECT_EQ(cfg["checkpoint"]["monitor"].as<std::string>(), "");
  EXPECT_FALSE(cfg["checkpoint"]["save_last"].as<bool>());
  EXPECT_EQ(cfg["checkpoint"]["every_n_train_steps"].as<int>(), 100);
  EXPECT_EQ(cfg["checkpoint"]["save_top_k"].as<int>(), -1);
  EXPECT_EQ(config_of(gen::render(base_options()))["checkpoint"]["monitor"].as<std::string>(), "val_loss");
}

TEST(GeneratorRender, TheLearningRateFinderGoesToConfigAndEveryTemplateButTheGanCallsTheTuner) {
  EXPECT_FALSE(config_of(gen::render(base_options()))["tuner"]["lr_find"].as<bool>());
  for (const auto& t : gen::templates()) {
    const std::string id = t["id"];
    if (id == "gan") continue;  // two optimizers: refused (GeneratorValidate)
    const auto p = gen::render(base_options({{"template", id}, {"lr_find", true}}));
    EXPECT_TRUE(config_of(p)["tuner"]["lr_find"].as<bool>()) << id;
    EXPECT_TRUE(contains(p.files.at("README.md"), "config.yaml turns on the learning-rate finder")) << id;
    const std::string main = p.files.at("src/main.cpp");
    EXPECT_TRUE(contains(main, "project::tune(*trainer, model, data);")) << id;
    EXPECT_TRUE(contains(main, "void set_lr(double lr) { lr_ = lr; }")) << id;
    EXPECT_TRUE(contains(main, "save_hyperparameters(") && contains(main, "{\"lr\", std::to_string(lr)}")) << id
        << ": the tuner writes its suggestion into the lr hyperparameter";
  }
  EXPECT_TRUE(contains(gen::render(base_options({{"distributed", "launch"}, {"nproc_per_node", 2}, {"lr_find", true}}))
                           .files.at("config.yaml"),
                       "lr_find: true"));
}

TEST(GeneratorRender, TheTimeLimitGoesToConfigAndTheReadme) {
  const auto none = gen::render(base_options());
  EXPECT_FALSE(config_of(none)["trainer"]["max_time"]) << "no limit by default";
  EXPECT_TRUE(contains(none.files.at("config.yaml"), "# max_time: \"00:01:00:00\""))
      << "the commented line shows where it goes";
  EXPECT_FALSE(contains(none.files.at("README.md"), "trainer.max_time"));
  const auto p = gen::render(base_options({{"max_time", "00:02:15:00"}}));
  EXPECT_EQ(config_of(p)["trainer"]["max_time"].as<std::string>(), "00:02:15:00");
  EXPECT_TRUE(contains(p.files.at("README.md"), "config.yaml limits training to `00:02:15:00`"));
  EXPECT_EQ(gen::command_line(base_options({{"max_time", "00:02:15:00"}})), "volt new app --template minimal --max-time 00:02:15:00");
}

TEST(GeneratorRender, NoRenderedFileHasARunOfBlankLines) {
  const std::vector<json> variants = {
      json::object(),
      {{"distributed", "launch"}, {"nproc_per_node", 2}},
      {{"distributed", "launch"}, {"nnodes", 2}, {"master_addr", "10.0.0.1"}, {"node_rank", 1}},
      {{"distributed", "spawn"}, {"nproc_per_node", 2}, {"sbatch", true}},
      {{"backend", "xla-tpu"}, {"accelerator", "tpu"}, {"distributed", "spawn"}, {"nproc_per_node", 8}},
      {{"logger", "csv,tensorboard"}, {"profiler", "simple"}, {"max_time", "00:01:00:00"}},
      {{"logger", "none"}, {"profiler", "pytorch"}, {"include_tests", false}, {"save_last", false},
       {"save_best", false}},
      {{"early_stopping", true}, {"every_n_train_steps", 50}},
  };
  for (const auto& t : gen::templates()) {
    for (json v : variants) {
      v["template"] = t["id"];
      const auto check = gen::validate(base_options(v));
      if (!check.errors.empty()) continue;  // e.g. early stopping on the GAN
      const auto p = gen::render(base_options(v));
      for (const auto& [path, text] : p.files) {
        if (path.size() > 4 && path.substr(path.size() - 4) == ".cpp") continue;  // verbatim C++
        EXPECT_FALSE(contains(text, "\n\n\n")) << t["id"] << " " << v.dump() << ": " << path
                                                << " has two blank lines in a row";
        EXPECT_FALSE(text.size() >= 2 && text.substr(text.size() - 2) == "\n\n")
            << t["id"] << " " << v.dump() << ": " << path << " ends in a blank line";
      }
    }
  }
}

TEST(GeneratorRender, TheReadmeResumesFromTheQuickChecksLastCheckpointByPath) {
  const auto csv = gen::render(base_options()).files.at("README.md");
  EXPECT_TRUE(contains(csv, "--fit.ckpt_path lightning_logs/version_0/checkpoints/last.ckpt\n")) << csv;
  EXPECT_TRUE(contains(csv, "Checkpoints go to `lightning_logs/version_N/checkpoints/`"));
  EXPECT_TRUE(contains(csv, "in a new run it\nfinds nothing")) << "says why `last` is not the way in a new run";
  const auto none = gen::render(base_options({{"logger", "none"}})).files.at("README.md");
  EXPECT_TRUE(contains(none, "--fit.ckpt_path checkpoints/last.ckpt\n")) << none;
  EXPECT_TRUE(contains(none, "Checkpoints go to `checkpoints/`")) << "no logger: ModelCheckpoint's folder is ./checkpoints";
  const auto no_last = gen::render(base_options({{"save_last", false}})).files.at("README.md");
  EXPECT_FALSE(contains(no_last, "--fit.ckpt_path")) << "nothing to resume from without last.ckpt";
}

TEST(GeneratorRender, HandlerAndLoggerOptionsGoToConfigAndThePathsFollowTheOutputFolder) {
  const auto p = gen::render(base_options({{"template", "text-classification"}, {"stop_on_nan", true},
                                           {"checkpoint_filename", "best-{epoch}-{val_acc:.3f}"},
                                           {"default_root_dir", "runs/a"}, {"log_every_n_steps", 7}}));
  const auto cfg = config_of(p);
  EXPECT_TRUE(cfg["stop_on_nan"]["enabled"].as<bool>());
  EXPECT_EQ(cfg["stop_on_nan"]["monitor"].as<std::string>(), "train_loss");
  EXPECT_EQ(cfg["checkpoint"]["filename"].as<std::string>(), "best-{epoch}-{val_acc:.3f}");
  EXPECT_EQ(cfg["trainer"]["default_root_dir"].as<std::string>(), "runs/a");
  EXPECT_EQ(cfg["trainer"]["log_every_n_steps"].as<int>(), 7);
  const std::string& readme = p.files.at("README.md");
  EXPECT_TRUE(contains(readme, "Checkpoints go to `runs/a/lightning_logs/version_N/checkpoints/`"));
  EXPECT_TRUE(contains(readme, "--fit.ckpt_path runs/a/lightning_logs/version_0/checkpoints/last.ckpt"));
  EXPECT_TRUE(contains(readme, "volt plot runs/a/lightning_logs/version_0 --out"));
  EXPECT_FALSE(contains(readme, " lightning_logs/")) << "every path is under the output folder";
  const std::string& code = p.files.at("src/project_options.h");
  EXPECT_TRUE(contains(code, "nan.check_finite = true;"));
  EXPECT_TRUE(contains(code, "cli.get_string(\"checkpoint.filename\")"));
  // The GAN logs d_loss on step and epoch: its step-level key is d_loss_step.
  EXPECT_EQ(config_of(gen::render(base_options({{"template", "gan"}, {"stop_on_nan", true}})))["stop_on_nan"]["monitor"]
                .as<std::string>(),
            "d_loss_step");
  // No logger: the profile and the checkpoints are in the output folder itself.
  const auto q = gen::render(base_options({{"default_root_dir", "out"}, {"logger", "none"}, {"profiler", "simple"}}));
  EXPECT_TRUE(contains(q.files.at("README.md"), "cat out/fit-profile.txt"));
  EXPECT_TRUE(contains(q.files.at("README.md"), "--fit.ckpt_path out/checkpoints/last.ckpt"));
}

// One row of the matrix: the options, and what config.yaml, the README and the notebook must say.
struct MatrixRow {
  json options;
  std::string accelerator, strategy, devices;
  int num_nodes;
  std::vector<std::string> readme_has, readme_lacks;
  std::string notebook_accelerator;  // "" = absent
  bool sbatch;
};

TEST(GeneratorRender, OptionMatrixConfigReadmeAndNotebook) {
  const std::string run = "./build/app --config config.yaml";
  const std::string one = " --trainer.strategy auto --trainer.devices 1 --trainer.num_nodes 1";
  const std::vector<MatrixRow> rows = {
      {base_options(), "auto", "auto", "1", 1, {run + " --trainer.max_epochs 1"}, {"volt launch", "## Run with spawn",
       "TPU VM", "sbatch"}, "", false},
      {base_options({{"accelerator", "cpu"}, {"distributed", "launch"}, {"nproc_per_node", 2}}), "cpu", "ddp", "2", 1,
       {"volt launch --nproc-per-node 2 -- " + run, run + one + " --trainer.max_epochs 1"},
       {"--node-rank", "TPU VM"}, "", false},
      {base_options({{"distributed", "launch"}, {"nproc_per_node", 4}, {"nnodes", 3}, {"master_addr", "10.0.0.1"},
             {"master_port", 29600}, {"backend", "nccl"}}),
       "gpu", "ddp", "4", 3,
       {"--nnodes 3 --node-rank 0 --master-addr 10.0.0.1 --master-port 29600 -- " + run,
        "--nnodes 3 --node-rank 1 --master-addr 10.0.0.1", "--nnodes 3 --node-rank 2 --master-addr 10.0.0.1",
        "sbatch run.sbatch"},
       {"--node-rank 3", "TPU VM"}, "GPU", true},
      {base_options({{"distributed", "spawn"}, {"nproc_per_node", 3}}), "auto", "ddp_spawn", "3", 1,
       {"## Run with spawn", "ddp_spawn"}, {"volt launch", "TPU VM"}, "", false},
      {base_options({{"accelerator", "gpu"}}), "gpu", "auto", "1", 1, {run}, {"volt launch"}, "GPU", false},
      {base_options({{"backend", "xla-tpu"}}), "tpu", "xla", "8", 1,
       {"## Run on a TPU VM", "--accelerator-type v2-8", "tpu-vm create app-tpu ", "scp --recurse . app-tpu:~/app ",
        "VOLT_TPU_RUNTIME_LIBRARY=$TPU_RUNTIME " + run,
        "VOLT_TPU_EMULATION=lazy VOLT_TPU_EMULATION_HOST=v2-8 " + run,
        run + " --trainer.accelerator auto" + one + " --trainer.max_epochs 1"},
       {"volt launch", "sbatch", "PJRT_DEVICE"}, "TPU", false},
      {base_options({{"backend", "xla-tpu"}, {"tpu_chips_per_host", 4}}), "tpu", "xla", "4", 1, {"--accelerator-type v4-8", "VOLT_TPU_EMULATION_HOST=v4-8 "},
       {}, "TPU", false},
      {base_options({{"sbatch", true}, {"distributed", "launch"}, {"nproc_per_node", 2}}), "auto", "ddp", "2", 1,
       {"sbatch run.sbatch"}, {}, "", true},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(r.options.dump());
    const auto p = gen::render(r.options);
    const auto cfg = config_of(p);
    EXPECT_EQ(cfg["trainer"]["accelerator"].as<std::string>(), r.accelerator);
    EXPECT_EQ(cfg["trainer"]["strategy"].as<std::string>(), r.strategy);
    EXPECT_EQ(cfg["trainer"]["devices"].as<std::string>(), r.devices);
    EXPECT_EQ(cfg["trainer"]["num_nodes"].as<int>(), r.num_nodes);
    const std::string& readme = p.files.at("README.md");
    for (const auto& s : r.readme_has) EXPECT_TRUE(contains(readme, s)) << "README lacks: " << s << "\n" << readme;
    for (const auto& s : r.readme_lacks) EXPECT_FALSE(contains(readme, s)) << "README has: " << s;
    EXPECT_EQ(p.files.count("run.sbatch"), r.sbatch ? 1u : 0u);
    if (r.sbatch) {
      const std::string& s = p.files.at("run.sbatch");
      EXPECT_TRUE(contains(s, "#SBATCH --nodes=" + std::to_string(r.num_nodes)));
      EXPECT_TRUE(contains(s, "#SBATCH --ntasks-per-node=" + r.devices));
      EXPECT_EQ(contains(s, "--gpus-per-node"), r.notebook_accelerator == "GPU");
    }
    const json nb = json::parse(gen::notebook(p, r.options));
    EXPECT_EQ(nb["nbformat"], 4);
    if (r.notebook_accelerator.empty()) {
      EXPECT_FALSE(nb["metadata"].contains("accelerator"));
    } else {
      EXPECT_EQ(nb["metadata"]["accelerator"], r.notebook_accelerator);
    }
  }
}

namespace {

/// Every code cell's source, joined (each cell's source must be a list of lines, with outputs).
std::string notebook_code(const json& nb) {
  std::string code;
  for (const auto& cell : nb["cells"]) {
    EXPECT_TRUE(cell["source"].is_array());
    if (cell["cell_type"] == "code") {
      EXPECT_TRUE(cell["outputs"].is_array());
      for (const auto& line : cell["source"]) code += line.get<std::string>();
    }
  }
  return code;
}

}  // namespace

TEST(GeneratorNotebook, CarriesTheProjectAndTheChosenLaunch) {
  const json o = base_options({{"distributed", "launch"}, {"nproc_per_node", 2}});
  const auto p = gen::render(o);
  const json nb = json::parse(gen::notebook(p, o));
  const std::string code = notebook_code(nb);
  EXPECT_TRUE(contains(code, "run([os.path.join(ROOT, 'volt-prefix', 'bin', 'volt'), 'launch', '--nproc-per-node', "
                            "'2', '--', os.path.join(PROJECT, 'build', 'app'), '--config', 'config.yaml'] + TRAIN_ARGS, "
                            "cwd=PROJECT)"))
      << code;
  EXPECT_TRUE(contains(code, "run(['cmake', '--build', os.path.join(PROJECT, 'build')"));
  EXPECT_TRUE(contains(code, "apt-get"));
  // The files are embedded: the config text is there, JSON-escaped.
  EXPECT_TRUE(contains(code, json(p.files.at("config.yaml")).dump()));
  EXPECT_EQ(nb["metadata"]["volt"]["command"], gen::command_line(o));
}

TEST(GeneratorNotebook, XlaTrainsWithTheRuntimeLibraryOrSaysItFallsBackToTheEmulation) {
  const json o = base_options({{"backend", "xla-tpu"}, {"tpu_chips_per_host", 4}});
  const auto p = gen::render(o);
  const json nb = json::parse(gen::notebook(p, o));
  const std::string code = notebook_code(nb);
  EXPECT_EQ(nb["metadata"]["accelerator"], "TPU");
  EXPECT_TRUE(contains(code, "os.environ.get('VOLT_TPU_RUNTIME_LIBRARY')")) << code;
  EXPECT_TRUE(contains(code, "training on the emulated TPU")) << code;
  EXPECT_TRUE(contains(code, "ENV['VOLT_TPU_EMULATION_HOST'] = 'v4-8'")) << code;
  EXPECT_TRUE(contains(code, "run([os.path.join(PROJECT, 'build', 'app'), '--config', 'config.yaml'] + TRAIN_ARGS")) << code;
  EXPECT_FALSE(contains(code, "torch_xla")) << "Volt does not use torch_xla";
}

TEST(GeneratorRender, TheTpuVmNameIsOneGcloudAccepts) {
  // gcloud: lowercase letters, digits and hyphens, starting with a letter.
  const auto p = gen::render(base_options({{"name", "My_App2"}, {"backend", "xla-tpu"}}));
  const std::string& readme = p.files.at("README.md");
  EXPECT_TRUE(contains(readme, "tpu-vm create my-app2-tpu ")) << readme;
  EXPECT_TRUE(contains(readme, "tpu-vm ssh my-app2-tpu ")) << readme;
  EXPECT_FALSE(contains(readme, "My_App2-tpu")) << readme;
}

TEST(GeneratorRender, TestsAreOptional) {
  EXPECT_TRUE(contains(gen::render(base_options()).files.at("CMakeLists.txt"), "add_test("));
  const auto p = gen::render(base_options({{"include_tests", false}}));
  EXPECT_FALSE(contains(p.files.at("CMakeLists.txt"), "add_test("));
  EXPECT_FALSE(contains(p.files.at("README.md"), "ctest"));
}

TEST(GeneratorRender, MinimalIsOneSourceFile) {
  const auto p = gen::render(base_options());
  std::vector<std::string> sources;
  for (const auto& [path, content] : p.files) {
    if (path.rfind("src/", 0) == 0) sources.push_back(path);
  }
  EXPECT_EQ(sources, std::vector<std::string>{"src/main.cpp"});
  EXPECT_FALSE(contains(p.files.at("src/main.cpp"), "#include \"project_options.h\""));
}

TEST(GeneratorRender, ManyNodesGetACommandForEveryRank) {
  const auto p = gen::render(base_options({{"distributed", "launch"}, {"nnodes", 6}, {"node_rank", 5},
                                   {"master_addr", "node0.cluster"}, {"nproc_per_node", 2}}));
  const std::string& readme = p.files.at("README.md");
  EXPECT_TRUE(contains(readme, "--nnodes 6 --node-rank 3 --master-addr node0.cluster"));
  EXPECT_TRUE(contains(readme, "--nnodes 6 --node-rank $NODE_RANK --master-addr node0.cluster"));
  EXPECT_TRUE(contains(readme, "This machine was generated as node 5"));
  EXPECT_TRUE(contains(p.files.at("run.sbatch"), "#SBATCH --nodes=6"));
}

TEST(GeneratorRender, RecordedCommandLeavesForcedOptionsOut) {
  const json o = base_options({{"backend", "xla-tpu"}});
  const auto p = gen::render(o);
  const std::string cmd = "volt new app --template minimal --backend xla-tpu";
  EXPECT_EQ(gen::command_line(o), cmd);
  EXPECT_TRUE(contains(p.files.at("README.md"), cmd + "\n"));
  EXPECT_EQ(json::parse(gen::notebook(p, o))["metadata"]["volt"]["command"], cmd);
}

TEST(GeneratorRender, LoggersAndProfilerGoToTheTrainerSectionOfConfig) {
  const auto trainer = [](const json& extra) { return config_of(gen::render(base_options(extra)))["trainer"]; };
  // true is the Trainer's default, the CSV logger alone; false is none.
  EXPECT_TRUE(trainer(json::object())["logger"].as<bool>());
  EXPECT_TRUE(trainer({{"logger", "csv"}})["logger"].as<bool>());
  EXPECT_FALSE(trainer({{"logger", "none"}})["logger"].as<bool>());
  EXPECT_EQ(trainer({{"logger", "tensorboard"}})["logger"].as<std::string>(), "tensorboard");
  const auto both = trainer({{"logger", "csv,tensorboard"}})["logger"];
  ASSERT_TRUE(both.IsSequence());
  EXPECT_EQ(both.as<std::vector<std::string>>(), (std::vector<std::string>{"csv", "tensorboard"}));
  EXPECT_EQ(trainer({{"logger", "tensorboard,csv"}})["logger"].as<std::vector<std::string>>(),
            (std::vector<std::string>{"tensorboard", "csv"}));
  for (const char* p : {"simple", "advanced", "pytorch"}) {
    EXPECT_EQ(trainer({{"profiler", p}})["profiler"].as<std::string>(), p);
  }
  // Off: no key (the Trainer's default), only a comment that names the choices.
  EXPECT_FALSE(trainer(json::object())["profiler"].IsDefined());
  EXPECT_TRUE(contains(gen::render(base_options()).files.at("config.yaml"), "# profiler: simple"));
  // The C++ stays the same: the choice is read from config.yaml at run time.
  for (const char* t : {"minimal", "image-classification"}) {
    const auto a = gen::render(base_options({{"template", t}}));
    const auto b = gen::render(base_options({{"template", t}, {"logger", "csv,tensorboard"}, {"profiler", "pytorch"}}));
    EXPECT_EQ(a.files.at("src/main.cpp"), b.files.at("src/main.cpp")) << t;
  }
}

TEST(GeneratorRender, ReadmeSaysWhereTheLogsAreAndHowToOpenThemOnlyForWhatWasChosen) {
  struct Row {
    json options;
    std::vector<std::string> has, lacks;
  };
  const std::string plot = "$VOLT_PREFIX/bin/volt plot lightning_logs/version_0 --out curves.png";
  const std::string tensorboard = "tensorboard --logdir lightning_logs\n";
  const std::vector<Row> rows = {
      {json::object(),
       {"## Logs\n", "lightning_logs/version_0/metrics.csv", plot},
       {tensorboard, "fit-profile.txt", "fit-trace.json", "profile"}},
      {{{"logger", "tensorboard"}},
       {"(`events.out.tfevents.*`) into `lightning_logs/version_0`", tensorboard, "pip install tensorboard"},
       {"metrics.csv", "volt plot", "profile"}},
      {{{"logger", "csv,tensorboard"}, {"profiler", "simple"}},
       {"## Logs and the profile", plot, tensorboard, "into the same folder", "simple profiler",
        "```sh\ncat lightning_logs/version_0/fit-profile.txt\n```"},
       {"fit-trace.json", "advanced"}},
      {{{"logger", "none"}, {"profiler", "advanced"}},
       {"## The profile\n", "advanced profiler", "percentiles", "```sh\ncat fit-profile.txt\n```",
        "there is no logger"},
       {"## Logs", "lightning_logs/version_0", "volt plot", "tensorboard", "### The profile"}},
      {{{"logger", "csv"}, {"profiler", "pytorch"}},
       {"`lightning_logs/version_0/fit-trace.json`", "https://ui.perfetto.dev", "chrome://tracing", plot},
       {"fit-profile.txt", tensorboard}},
      {{{"logger", "none"}}, {}, {"## Logs", "## The profile", "volt plot", "tensorboard", "metrics.csv"}},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(r.options.dump());
    const std::string readme = gen::render(base_options(r.options)).files.at("README.md");
    for (const auto& s : r.has) EXPECT_TRUE(contains(readme, s)) << "README lacks: " << s << "\n" << readme;
    for (const auto& s : r.lacks) EXPECT_FALSE(contains(readme, s)) << "README has: " << s << "\n" << readme;
    EXPECT_FALSE(contains(readme, "\n\n\n")) << "runs of empty lines where sections are off:\n" << readme;
    EXPECT_FALSE(contains(readme, "every training option.\n\n")) << "an empty line inside the Files list";
  }
}

TEST(GeneratorNotebook, OpensTensorBoardAndTheProfileOnlyWhenChosen) {
  const auto code_of = [](const json& extra) {
    const json o = base_options(extra);
    return notebook_code(json::parse(gen::notebook(gen::render(o), o)));
  };
  const std::string tb = "%load_ext tensorboard\n%tensorboard --logdir {PROJECT}/lightning_logs";
  EXPECT_TRUE(contains(code_of({{"logger", "tensorboard"}}), tb));
  EXPECT_TRUE(contains(code_of({{"logger", "csv,tensorboard"}}), tb));
  EXPECT_FALSE(contains(code_of({{"logger", "csv"}}), "%tensorboard"));
  EXPECT_FALSE(contains(code_of(json::object()), "%load_ext"));
  EXPECT_FALSE(contains(code_of(json::object()), "fit-profile"));
  // The profile of the latest run: the highest version_N, or the project folder without a logger.
  const std::string simple = code_of({{"profiler", "simple"}});
  EXPECT_TRUE(contains(simple, "glob.glob(os.path.join(PROJECT, 'lightning_logs', 'version_*'))")) << simple;
  EXPECT_TRUE(contains(simple, "path = os.path.join(run_dir, 'fit-profile.txt')")) << simple;
  EXPECT_TRUE(contains(simple, "print(open(path).read())")) << simple;
  const std::string trace = code_of({{"logger", "none"}, {"profiler", "pytorch"}});
  EXPECT_TRUE(contains(trace, "path = os.path.join(PROJECT, 'fit-trace.json')")) << trace;
  EXPECT_TRUE(contains(trace, "files.download(path)")) << trace;
  EXPECT_FALSE(contains(trace, "glob.glob")) << trace;
}

TEST(GeneratorNotebook, CarriesVoltsSourceFoldedAndDrawsTheCurvesOfTheCsvLogger) {
  const json o = base_options({{"logger", "csv"}});
  const json nb = json::parse(gen::notebook(gen::render(o), o));
  const json* packed = nullptr;
  for (const auto& cell : nb["cells"]) {
    if (cell["cell_type"] == "code" && !cell["source"].empty() &&
        cell["source"][0].get<std::string>().rfind("VOLT_ARCHIVE = (", 0) == 0) {
      packed = &cell;
    }
  }
  ASSERT_NE(packed, nullptr) << "no cell packs Volt's source";
  EXPECT_EQ((*packed)["metadata"]["jupyter"]["source_hidden"], true) << "the long cell is not folded";
  // A gzip stream in base64 starts with H4sI (1f 8b 08), and its time field is zeroed: H4sIAAAAAAAA.
  EXPECT_EQ((*packed)["source"][1].get<std::string>().substr(0, 17), "    'H4sIAAAAAAAA");
  EXPECT_GT((*packed)["source"].size(), 1000u) << "a few hundred KB of source in 100-character lines";
  const std::string code = notebook_code(nb);
  EXPECT_TRUE(contains(code, "'plot', logs, '--out'")) << code;
  EXPECT_TRUE(contains(code, "display(Image(filename=")) << code;
  EXPECT_TRUE(contains(code, "'-DVOLT_BUILD_UI=OFF'")) << code;
  EXPECT_FALSE(contains(code, "VOLT_SRC = os.environ")) << "the notebook no longer asks for Volt's sources";
  const json none = base_options({{"logger", "none"}});
  EXPECT_FALSE(contains(notebook_code(json::parse(gen::notebook(gen::render(none), none))), "'plot'"))
      << "no curves without the csv logger";
}
