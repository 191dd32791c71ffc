// The option schema, the combination rules and the recreating command line.
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "support/expect.h"
#include "support/generator_options.h"
#include "volt/generator/generator.h"

namespace gen = volt::generator;
using nlohmann::json;
using volt::testing::contains;

namespace {

using volt::testing::base_options;

// The messages of the errors about `option`.
std::string errors_for(const gen::Validation& v, const std::string& option) {
  std::string out;
  for (const auto& p : v.errors) {
    if (p.option == option) out += p.message + "\n";
  }
  return out;
}

bool is_forced(const gen::Validation& v, const std::string& option, const std::string& cause) {
  for (const auto& p : v.forced) {
    if (p.option == option && contains(p.message, "forced by " + cause)) return true;
  }
  return false;
}

}  // namespace

TEST(GeneratorSchema, HasEveryOptionOfTheContractWithDashedFlags) {
  std::set<std::string> keys;
  for (const auto& o : gen::option_schema()) {
    keys.insert(o["key"]);
    for (const char* field : {"key", "label", "group", "type", "default", "help", "flag"}) {
      EXPECT_TRUE(o.contains(field)) << o.dump() << " lacks " << field;
    }
    std::string flag = "--" + o["key"].get<std::string>();
    std::replace(flag.begin(), flag.end(), '_', '-');
    EXPECT_EQ(o["flag"], flag);
    const std::set<std::string> groups{"Project", "Training", "Handlers", "Loggers"};
    EXPECT_TRUE(groups.count(o["group"].get<std::string>())) << o.dump();
    if (o["type"] == "enum" || o["type"] == "list") {
      EXPECT_TRUE(o["choices"].is_array() && !o["choices"].empty()) << o.dump();
    }
  }
  for (const char* k : {"template", "name", "accelerator", "distributed", "backend", "nproc_per_node", "nnodes",
                        "node_rank", "master_addr", "master_port", "precision", "max_epochs", "batch_size", "lr",
                        "optimizer", "seed", "deterministic", "save_best", "save_last", "every_n_train_steps",
                        "save_top_k", "early_stopping", "patience", "stop_on_nan", "checkpoint_filename", "max_time",
                        "lr_find", "default_root_dir", "log_every_n_steps", "logger", "profiler", "include_tests"}) {
    EXPECT_TRUE(keys.count(k)) << k;
  }
}

TEST(GeneratorSchema, ListsTheFiveTemplates) {
  std::set<std::string> ids;
  for (const auto& t : gen::templates()) {
    ids.insert(t["id"]);
    EXPECT_FALSE(t["title"].get<std::string>().empty());
    EXPECT_FALSE(t["description"].get<std::string>().empty());
  }
  EXPECT_EQ(ids, (std::set<std::string>{"gan", "image-classification", "language-model", "minimal",
                                        "text-classification"}));
}

TEST(GeneratorValidate, CompletesDefaultsAndReadsTextValues) {
  const auto v = gen::validate(base_options({{"nproc_per_node", "2"}, {"distributed", "launch"}, {"lr", "0.01"},
                                     {"deterministic", "true"}}));
  ASSERT_TRUE(v.errors.empty()) << v.errors[0].message;
  EXPECT_EQ(v.options["nproc_per_node"], 2);
  EXPECT_DOUBLE_EQ(v.options["lr"].get<double>(), 0.01);
  EXPECT_EQ(v.options["deterministic"], true);
  EXPECT_EQ(v.options["max_epochs"], 3);
  EXPECT_EQ(v.options.size(), gen::option_schema().size());
}

TEST(GeneratorValidate, XlaTpuForcesTpuSpawnAndEightProcesses) {
  const auto v = gen::validate(base_options({{"backend", "xla-tpu"}}));
  ASSERT_TRUE(v.errors.empty()) << v.errors[0].message;
  EXPECT_EQ(v.options["accelerator"], "tpu");
  EXPECT_EQ(v.options["distributed"], "spawn");
  EXPECT_EQ(v.options["nproc_per_node"], 8);
  EXPECT_TRUE(is_forced(v, "accelerator", "backend=xla-tpu"));
  EXPECT_TRUE(is_forced(v, "distributed", "backend=xla-tpu"));
  EXPECT_TRUE(is_forced(v, "nproc_per_node", "backend=xla-tpu"));
}

TEST(GeneratorValidate, XlaTpuOnFourChipHostsRunsFourProcesses) {
  const auto v = gen::validate(base_options({{"backend", "xla-tpu"}, {"tpu_chips_per_host", 4}}));
  ASSERT_TRUE(v.errors.empty());
  EXPECT_EQ(v.options["nproc_per_node"], 4);
}

TEST(GeneratorValidate, TpuAcceleratorForcesXlaBackend) {
  const auto v = gen::validate(base_options({{"accelerator", "tpu"}}));
  ASSERT_TRUE(v.errors.empty());
  EXPECT_EQ(v.options["backend"], "xla-tpu");
  EXPECT_TRUE(is_forced(v, "backend", "accelerator=tpu"));
}

TEST(GeneratorValidate, NcclForcesGpu) {
  const auto v = gen::validate(base_options({{"backend", "nccl"}, {"distributed", "launch"}, {"nproc_per_node", 4}}));
  ASSERT_TRUE(v.errors.empty());
  EXPECT_EQ(v.options["accelerator"], "gpu");
  EXPECT_TRUE(is_forced(v, "accelerator", "backend=nccl"));
}

// Each rejected combination, with the option blamed and the allowed values named.
struct Rejection {
  const char* what;
  json options;
  const char* option;
  const char* says;
};

TEST(GeneratorValidate, RejectsEveryImpossibleCombinationAndNamesWhatIsAllowed) {
  const std::vector<Rejection> cases = {
      {"xla-tpu with gpu", {{"backend", "xla-tpu"}, {"accelerator", "gpu"}}, "accelerator", "allowed: accelerator tpu"},
      {"xla-tpu with cpu", {{"backend", "xla-tpu"}, {"accelerator", "cpu"}}, "accelerator", "allowed: accelerator tpu"},
      {"xla-tpu with launch", {{"backend", "xla-tpu"}, {"distributed", "launch"}}, "distributed",
       "allowed: distributed spawn"},
      {"xla-tpu with off", {{"backend", "xla-tpu"}, {"distributed", "off"}}, "distributed", "allowed: distributed spawn"},
      {"xla-tpu with 4 processes on an 8-chip host", {{"backend", "xla-tpu"}, {"nproc_per_node", 4}},
       "nproc_per_node", "tpu_chips_per_host=4"},
      {"xla-tpu with 16-mixed", {{"backend", "xla-tpu"}, {"precision", "16-mixed"}}, "precision",
       "allowed: 32-true, bf16-mixed, 64-true"},
      {"xla-tpu on several hosts", {{"backend", "xla-tpu"}, {"nnodes", 2}, {"master_addr", "10.0.0.1"}}, "nnodes",
       "allowed: 1"},
      {"xla-tpu with a SLURM script", {{"backend", "xla-tpu"}, {"sbatch", true}}, "sbatch", "allowed: false"},
      {"a 6-chip TPU host", {{"backend", "xla-tpu"}, {"tpu_chips_per_host", 6}}, "tpu_chips_per_host", "allowed: 8"},
      {"nccl on cpu", {{"backend", "nccl"}, {"accelerator", "cpu"}}, "accelerator", "allowed: gpu"},
      {"nccl on tpu", {{"backend", "nccl"}, {"accelerator", "tpu"}}, "accelerator", "allowed with nccl: gpu"},
      {"gloo on tpu", {{"backend", "gloo"}, {"accelerator", "tpu"}}, "accelerator", "allowed with gloo: auto, cpu, gpu"},
      {"16-mixed on cpu", {{"accelerator", "cpu"}, {"precision", "16-mixed"}}, "precision", "allowed on CPU"},
      {"2 nodes without a master address", {{"distributed", "launch"}, {"nnodes", 2}}, "master_addr",
       "--master-addr"},
      {"2 nodes with a loopback master", {{"distributed", "launch"}, {"nnodes", 2}, {"master_addr", "127.0.0.1"}},
       "master_addr", "node 0's address"},
      {"a master address with a space", {{"master_addr", "a b"}}, "master_addr", "not a host name"},
      {"2 processes with distributed off", {{"nproc_per_node", 2}}, "nproc_per_node", "allowed: 1"},
      {"2 nodes with distributed off", {{"nnodes", 2}, {"master_addr", "10.0.0.1"}}, "nnodes", "allowed: 1"},
      {"2 nodes with spawn", {{"distributed", "spawn"}, {"nnodes", 2}, {"master_addr", "10.0.0.1"}}, "nnodes",
       "use distributed=launch"},
      {"node rank beyond nnodes",
       {{"distributed", "launch"}, {"nnodes", 2}, {"master_addr", "10.0.0.1"}, {"node_rank", 2}}, "node_rank",
       "allowed: 0 to 1"},
      {"top 3 without save_best", {{"save_best", false}, {"save_top_k", 3}}, "save_top_k", "allowed without it"},
      {"gan with save_best", {{"template", "gan"}, {"save_best", true}}, "save_best", "template=gan"},
      {"gan with early stopping", {{"template", "gan"}, {"early_stopping", true}}, "early_stopping", "template=gan"},
      {"an unknown option", {{"epochs", 3}}, "epochs", "the options are: template, name"},
      {"an unknown template", {{"template", "resnet"}}, "template", "not one of: "},
      {"an unknown backend", {{"backend", "mpi"}}, "backend", "not one of: gloo, nccl, xla-tpu"},
      {"a word for an integer", {{"max_epochs", "three"}}, "max_epochs", "expects an integer"},
      {"zero epochs", {{"max_epochs", 0}}, "max_epochs", "below the minimum 1"},
      {"a port out of range", {{"master_port", 70000}}, "master_port", "above the maximum 65535"},
      {"a bad boolean", {{"save_last", "maybe"}}, "save_last", "expects true or false"},
      {"a negative learning rate", {{"lr", -1}}, "lr", "below the minimum"},
      {"an unknown logger", {{"logger", "wandb"}}, "logger", "'wandb' is not one of: csv, tensorboard"},
      {"an unknown profiler",
       {{"profiler", "fast"}},
       "profiler",
       "'fast' is not one of: none, simple, advanced, pytorch"},
      {"a checkpoint name with a folder", {{"checkpoint_filename", "ckpts/{epoch}"}}, "checkpoint_filename",
       "no folders ('/')"},
      {"a checkpoint name with a quote", {{"checkpoint_filename", "it's-{epoch}"}}, "checkpoint_filename",
       "quotes or shell characters"},
      {"a checkpoint name with an open brace", {{"checkpoint_filename", "{epoch-{step}"}}, "checkpoint_filename",
       "unbalanced braces"},
      {"an absolute output folder", {{"default_root_dir", "/srv/runs"}}, "default_root_dir",
       "not a folder inside the project"},
      {"an output folder above the project", {{"default_root_dir", "../runs"}}, "default_root_dir", "without '..'"},
      {"an empty output folder", {{"default_root_dir", ""}}, "default_root_dir", "e.g. runs"},
      {"logging every 0 steps", {{"log_every_n_steps", 0}}, "log_every_n_steps", "below the minimum 1"},
      {"lr_find on the gan", {{"template", "gan"}, {"lr_find", true}}, "lr_find", "tunes one; allowed: false"},
      {"lr_find with spawn", {{"distributed", "spawn"}, {"nproc_per_node", 2}, {"lr_find", true}}, "lr_find",
       "use distributed=off or launch"},
      {"lr_find on a TPU host", {{"backend", "xla-tpu"}, {"lr_find", true}}, "lr_find", "(backend xla-tpu)"},
      {"a time limit in minutes", {{"max_time", "90m"}}, "max_time", "'90m' is not a time limit: give DD:HH:MM:SS"},
      {"a time limit with three fields", {{"max_time", "01:30:00"}}, "max_time", "e.g. 00:01:30:00"},
      {"a time limit of zero", {{"max_time", "00:00:00:00"}}, "max_time", "not all zero"},
      {"a time limit with a sign", {{"max_time", "00:-1:00:00"}}, "max_time", "whole numbers"},
  };
  for (const auto& c : cases) {
    const auto v = gen::validate(base_options(c.options));
    const std::string msg = errors_for(v, c.option);
    EXPECT_TRUE(contains(msg, c.says)) << c.what << ": errors for " << c.option << ": '" << msg << "'";
    EXPECT_THROW(gen::render(base_options(c.options)), gen::GeneratorError) << c.what;
  }
}

TEST(GeneratorValidate, NullIsAnErrorNamingTheOptionNotItsDefault) {
  for (const char* key : {"template", "max_epochs", "lr", "deterministic", "master_addr", "logger", "profiler"}) {
    const auto v = gen::validate(base_options({{key, nullptr}}));
    EXPECT_TRUE(contains(errors_for(v, key), "got null; leave the option out to get its default")) << key;
  }
}

TEST(GeneratorValidate, OutOfRangeNumbersAreReportedAsGiven) {
  // Read as int64, 2^64 - 1 was -1, and 1e20 cast to int64 was -2^63: the message named a value nobody gave.
  const std::vector<std::pair<json, std::string>> cases = {
      {json(18446744073709551615ull), "18446744073709551615 is above the maximum 4294967295"},
      {json(1e20), "1e+20 is above the maximum 4294967295"},
      {json(-5), "-5 is below the minimum 0"},
      {json("99999999999999999999"), "got '99999999999999999999', which is too large"},
      {json("4294967296"), "got '4294967296', which is above the maximum 4294967295"},
      {json(2.5), "expects an integer, got 2.5"},
  };
  for (const auto& [given, says] : cases) {
    const std::string msg = errors_for(gen::validate(base_options({{"seed", given}})), "seed");
    EXPECT_TRUE(contains(msg, says)) << given.dump() << ": '" << msg << "'";
  }
  EXPECT_EQ(gen::validate(base_options({{"seed", "4294967295"}})).options["seed"], 4294967295LL);
}

TEST(GeneratorValidate, NanInfinityAndOverflowAreNoLearningRate) {
  for (const char* bad : {"nan", "inf", "-inf", "1e999"}) {
    const std::string msg = errors_for(gen::validate(base_options({{"lr", bad}})), "lr");
    EXPECT_TRUE(contains(msg, std::string("got '") + bad + "'")) << msg;
  }
}

TEST(GeneratorValidate, NeverThrowsForInputThatIsNotAnObject) {
  for (const json& bad : {json(3), json::array({1, 2}), json("x"), json(nullptr)}) {
    gen::Validation v;
    EXPECT_NO_THROW(v = gen::validate(bad));
    EXPECT_FALSE(v.errors.empty()) << bad.dump();
  }
}

TEST(GeneratorValidate, RejectsUnsafeProjectNames) {
  for (const char* name : {"", "../escape", "a/b", "/abs", ".hidden", "-rf", "x y", "a\\b", "na;me", "1st",
                           "\xc3\xa9t\xc3\xa9"}) {
    const auto v = gen::validate(base_options({{"name", name}}));
    EXPECT_TRUE(contains(errors_for(v, "name"), "a letter, then letters, digits")) << "'" << name << "'";
  }
  EXPECT_FALSE(gen::validate(base_options({{"name", std::string(65, 'a')}})).errors.empty());
  EXPECT_TRUE(gen::validate(base_options({{"name", std::string(64, 'a')}})).errors.empty());
  EXPECT_TRUE(gen::validate(base_options({{"name", "My-app_2"}})).errors.empty());
}

TEST(GeneratorError, ListsEveryProblemOnItsOwnLine) {
  try {
    gen::render(base_options({{"backend", "xla-tpu"}, {"accelerator", "gpu"}, {"precision", "16-mixed"}}));
    FAIL() << "no error";
  } catch (const gen::GeneratorError& e) {
    ASSERT_EQ(e.problems().size(), 2u);
    EXPECT_EQ(std::string(e.what()), e.problems()[0].option + ": " + e.problems()[0].message + "\n" +
                                         e.problems()[1].option + ": " + e.problems()[1].message);
  }
}

namespace {

// Reads `volt new NAME --template T --flag v ...` back into options (values quoted as shell_quote does).
json parse_command(const std::string& command) {
  std::vector<std::string> words;
  std::string w;
  bool quoted = false, any = false;
  for (size_t i = 0; i < command.size(); ++i) {
    const char c = command[i];
    if (c == '\'') {
      quoted = !quoted;
      any = true;
    } else if (c == '\\' && !quoted && i + 1 < command.size()) {
      w += command[++i];
    } else if (c == ' ' && !quoted) {
      if (any || !w.empty()) words.push_back(w);
      w.clear();
      any = false;
    } else {
      w += c;
    }
  }
  if (any || !w.empty()) words.push_back(w);
  json o;
  o["name"] = words.at(2);
  for (size_t i = 3; i + 1 < words.size(); i += 2) {
    std::string key = words[i].substr(2);
    std::replace(key.begin(), key.end(), '-', '_');
    o[key] = words[i + 1];
  }
  return o;
}

}  // namespace

TEST(GeneratorCommandLine, RecreatesTheSameOptions) {
  const std::vector<json> cases = {
      base_options(),
      base_options({{"backend", "xla-tpu"}, {"tpu_chips_per_host", 4}, {"lr", 0.0003}, {"logger", "none"}}),
      base_options({{"template", "gan"}, {"lr", 0.001}, {"distributed", "launch"}, {"nnodes", 3}, {"master_addr", "10.1.2.3"},
            {"nproc_per_node", 2}, {"backend", "nccl"}, {"save_top_k", -1}}),
      base_options({{"template", "text-classification"}, {"early_stopping", true}, {"patience", 5}, {"seed", 7},
            {"deterministic", true}, {"include_tests", false}}),
      base_options({{"logger", "csv,tensorboard"}, {"profiler", "pytorch"}}),
      base_options({{"logger", json::array({"tensorboard", "csv"})}, {"profiler", "simple"}}),
      base_options({{"template", "gan"}, {"logger", json::array()}, {"profiler", "advanced"}}),
  };
  for (const auto& c : cases) {
    const auto before = gen::validate(c);
    ASSERT_TRUE(before.errors.empty()) << c.dump();
    const std::string cmd = gen::command_line(c);
    EXPECT_EQ(cmd.rfind("volt new app --template ", 0), 0u) << cmd;
    const auto after = gen::validate(parse_command(cmd));
    ASSERT_TRUE(after.errors.empty()) << cmd << ": " << after.errors[0].message;
    EXPECT_EQ(after.options, before.options) << cmd;
  }
  EXPECT_EQ(gen::command_line(base_options()), "volt new app --template minimal");
  EXPECT_EQ(gen::command_line(base_options({{"logger", "csv,tensorboard"}, {"profiler", "simple"}})),
            "volt new app --template minimal --logger csv,tensorboard --profiler simple");
  EXPECT_EQ(gen::command_line(base_options({{"logger", json::array()}})),
            "volt new app --template minimal --logger none");
  EXPECT_EQ(gen::command_line(base_options({{"logger", "csv"}, {"profiler", "none"}})),
            "volt new app --template minimal")
      << "the defaults are left out";
}

TEST(GeneratorValidate, TemplateDefaultsYieldToGivenValues) {
  EXPECT_DOUBLE_EQ(gen::validate(base_options({{"template", "gan"}})).options["lr"].get<double>(), 0.0002);
  EXPECT_DOUBLE_EQ(gen::validate(base_options({{"template", "gan"}, {"lr", 0.001}})).options["lr"].get<double>(), 0.001);
  EXPECT_DOUBLE_EQ(gen::validate(base_options()).options["lr"].get<double>(), 0.001);
  EXPECT_EQ(gen::command_line(base_options({{"template", "gan"}})), "volt new app --template gan");
  EXPECT_EQ(gen::command_line(base_options({{"template", "gan"}, {"lr", 0.001}})), "volt new app --template gan --lr 0.001");
}

TEST(GeneratorValidate, LoggerTakesOneOrSeveralNamesAsTextOrAList) {
  const std::vector<std::pair<json, json>> cases = {
      {json("csv"), json::array({"csv"})},
      {json("tensorboard"), json::array({"tensorboard"})},
      {json("csv,tensorboard"), json::array({"csv", "tensorboard"})},
      {json(" tensorboard , csv "), json::array({"tensorboard", "csv"})},  // the order given: the first decides
      {json("none"), json::array()},
      {json::array({"tensorboard", "csv"}), json::array({"tensorboard", "csv"})},
      {json::array(), json::array()},
      {json::array({"none"}), json::array()},
  };
  for (const auto& [given, expected] : cases) {
    const auto v = gen::validate(base_options({{"logger", given}}));
    ASSERT_TRUE(v.errors.empty()) << given.dump() << ": " << v.errors[0].message;
    EXPECT_EQ(v.options["logger"], expected) << given.dump();
    // Validated options validate to themselves (the notebook and the page send them back).
    EXPECT_EQ(gen::validate(v.options).options, v.options) << given.dump();
  }
  EXPECT_EQ(gen::validate(base_options()).options["logger"], json::array({"csv"}));
  EXPECT_EQ(gen::validate(base_options()).options["profiler"], "none");
  for (const char* p : {"none", "simple", "advanced", "pytorch"}) {
    const auto v = gen::validate(base_options({{"profiler", p}}));
    ASSERT_TRUE(v.errors.empty()) << p;
    EXPECT_EQ(v.options["profiler"], p);
  }
}

TEST(GeneratorValidate, RefusesBadLoggerValuesNamingThemAndTheKnownLoggers) {
  const std::string how = "give one or several of csv, tensorboard, separated by commas (csv,tensorboard), or none";
  const std::vector<std::pair<json, std::string>> cases = {
      {json("tb"), "'tb' is not one of: csv, tensorboard; " + how},
      {json("csv,tb"), "'tb' is not one of: csv, tensorboard"},
      {json("CSV"), "'CSV' is not one of: csv, tensorboard"},
      {json("csv,csv"), "'csv' is given twice in 'csv,csv'"},
      {json::array({"tensorboard", "tensorboard"}), "'tensorboard' is given twice"},
      {json(""), "got ''; " + how},
      {json("csv,"), "'csv,' has an empty name"},
      {json(",tensorboard"), "',tensorboard' has an empty name"},
      {json("none,csv"), "'none,csv' names none (no logger) together with others"},
      {json::array({"csv", 3}), "expects names as text, got [\"csv\",3]"},
      {json(true), "expects names from csv, tensorboard, separated by commas, or none, got true"},
      {json({{"csv", true}}), "got {\"csv\":true}"},
      {json("\xff"), "'\\xff' is not one of"},
  };
  for (const auto& [given, says] : cases) {
    const auto v = gen::validate(base_options({{"logger", given}}));
    const std::string msg = errors_for(v, "logger");
    EXPECT_TRUE(contains(msg, says)) << given.dump(-1, ' ', false, json::error_handler_t::replace) << ": '" << msg
                                     << "'";
    EXPECT_THROW(gen::render(base_options({{"logger", given}})), gen::GeneratorError);
  }
}

// Found by tests/fuzz (generator_options): a whole number too large for int64 was converted anyway (UB).
TEST(GeneratorValidate, AnIntegerOptionBeyondSixtyFourBitsIsRefusedWithTheValue) {
  const auto v = gen::validate(base_options({{"seed", 6.6e21}}));
  ASSERT_EQ(v.errors.size(), 1u);
  EXPECT_EQ(v.errors[0].option, "seed");
  EXPECT_NE(v.errors[0].message.find("6.6e+21 is above the maximum"), std::string::npos) << v.errors[0].message;
}
