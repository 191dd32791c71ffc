#include "volt/cli/cli.h"

#include <gtest/gtest.h>

#include "support/expect.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "volt/core/error.h"
#include "volt/core/trainer_flags.h"
#include "volt/core/trainer_options.h"

namespace {

using volt::BatchLimit;
using volt::ConfigError;
using volt::TrainerOptions;
using volt::cli::Cli;

bool parse(Cli& cli, std::vector<std::string> args, std::ostream* out = nullptr) {
  args.insert(args.begin(), "prog");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream sink;
  return cli.parse(static_cast<int>(argv.size()), argv.data(), out ? *out : sink);
}

// The ConfigError message `f` throws, or a marker that fails every comparison.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<no ConfigError thrown>";
}

using volt::testing::contains;

// A file under the test temp dir, named after the running test so tests never share one.
std::string write_file(const std::string& name, const std::string& text) {
  const auto* test = testing::UnitTest::GetInstance()->current_test_info();
  const std::string path = testing::TempDir() + "volt_cli_" + test->name() + "_" + name;
  std::ofstream(path) << text;
  return path;
}

Cli program_cli() {
  Cli cli("train", "Trains a test model.");
  cli.add_option("model.lr", 0.001, "learning rate")
      .add_option("model.hidden", 64, "hidden units")
      .add_option("model.dropout", false, "use dropout")
      .add_option("data.root", "./data", "data directory")
      .add_option("data.batch_size", size_t{32}, "samples per batch");
  return cli;
}

// --- BatchLimit ---

TEST(BatchLimit, ReadsIntegerTextAsACount) {
  EXPECT_EQ(BatchLimit::parse("10", "--f"), BatchLimit::count(10));
  EXPECT_EQ(BatchLimit::parse("0", "--f"), BatchLimit::count(0));
  EXPECT_EQ(BatchLimit::parse("+3", "--f"), BatchLimit::count(3));
  EXPECT_EQ(BatchLimit::parse("-1", "--f"), BatchLimit::count(-1));  // range is the Trainer's
}

TEST(BatchLimit, ReadsDecimalTextAsAFraction) {
  EXPECT_EQ(BatchLimit::parse("0.25", "--f"), BatchLimit::fraction(0.25));
  EXPECT_EQ(BatchLimit::parse("1.0", "--f"), BatchLimit::fraction(1.0));
  EXPECT_EQ(BatchLimit::parse("1e-1", "--f"), BatchLimit::fraction(0.1));
  EXPECT_EQ(BatchLimit::parse(".5", "--f"), BatchLimit::fraction(0.5));
}

TEST(BatchLimit, RejectsNonNumbersNamingTheFlagAndTheValue) {
  for (const std::string bad : {"abc", "", "1.5x", "inf", "nan", "0x10", " 1", "+-1", "1,0",
                                "99999999999999999999", "1e999"}) {
    const std::string message =
        error_of([&] { BatchLimit::parse(bad, "--trainer.limit_val_batches"); });
    EXPECT_TRUE(contains(message, "--trainer.limit_val_batches")) << message;
    EXPECT_TRUE(contains(message, "'" + bad + "'")) << message;
  }
}

TEST(BatchLimit, CountIsCappedByWhatIsAvailable) {
  EXPECT_EQ(BatchLimit::count(10).apply(100), 10);
  EXPECT_EQ(BatchLimit::count(10).apply(4), 4);
  EXPECT_EQ(BatchLimit::count(0).apply(4), 0);
}

TEST(BatchLimit, FractionRoundsDownButKeepsAtLeastOneBatch) {
  EXPECT_EQ(BatchLimit::fraction(0.25).apply(10), 2);
  EXPECT_EQ(BatchLimit::fraction(1.0).apply(7), 7);
  EXPECT_EQ(BatchLimit::fraction(0.01).apply(10), 1);
  EXPECT_EQ(BatchLimit::fraction(0.0).apply(10), 0);
  EXPECT_EQ(BatchLimit::fraction(0.5).apply(0), 0);
}

TEST(BatchLimit, ToStringReadsBackToTheSameLimit) {
  EXPECT_EQ(BatchLimit::count(10).to_string(), "10");
  EXPECT_EQ(BatchLimit::fraction(0.25).to_string(), "0.25");
  EXPECT_EQ(BatchLimit::fraction(1.0).to_string(), "1.0");
  for (const BatchLimit limit : {BatchLimit::count(3), BatchLimit::fraction(1.0),
                                 BatchLimit::fraction(1e-5), BatchLimit::fraction(0.1)}) {
    EXPECT_EQ(BatchLimit::parse(limit.to_string(), "--f"), limit) << limit.to_string();
  }
}

// --- Cli: values ---

TEST(Cli, DefaultsComeFromTrainerOptionsAndDeclarations) {
  Cli cli = program_cli();
  ASSERT_TRUE(parse(cli, {}));
  const TrainerOptions defaults;
  EXPECT_EQ(cli.trainer_options().max_epochs, defaults.max_epochs);
  EXPECT_EQ(cli.trainer_options().devices, "auto");
  EXPECT_EQ(cli.trainer_options().limit_train_batches, BatchLimit::fraction(1.0));
  EXPECT_EQ(cli.trainer_options().check_val_every_n_epoch, std::optional<int64_t>(1));
  EXPECT_FALSE(cli.trainer_options().seed.has_value());
  EXPECT_DOUBLE_EQ(cli.get_double("model.lr"), 0.001);
  EXPECT_EQ(cli.get_int("model.hidden"), 64);
  EXPECT_FALSE(cli.get_bool("model.dropout"));
  EXPECT_EQ(cli.get_string("data.root"), "./data");
  EXPECT_EQ(cli.get_int("data.batch_size"), 32);
  EXPECT_EQ(cli.get_int("trainer.max_epochs"), -1);
  EXPECT_EQ(cli.get_string("trainer.devices"), "auto");
}

TEST(Cli, ReadsEachValueTypeFromSpaceSeparatedFlags) {
  Cli cli = program_cli();
  ASSERT_TRUE(parse(cli, {"--model.lr", "0.5", "--model.hidden", "-3", "--model.dropout", "true",
                          "--data.root", "/tmp/x y", "--trainer.max_epochs", "7"}));
  EXPECT_DOUBLE_EQ(cli.get_double("model.lr"), 0.5);
  EXPECT_EQ(cli.get_int("model.hidden"), -3);
  EXPECT_TRUE(cli.get_bool("model.dropout"));
  EXPECT_EQ(cli.get_string("data.root"), "/tmp/x y");
  EXPECT_EQ(cli.trainer_options().max_epochs, 7);
}

TEST(Cli, AcceptsTheEqualsForm) {
  Cli cli = program_cli();
  ASSERT_TRUE(parse(cli, {"--model.lr=2", "--data.root=a=b", "--trainer.precision=bf16-mixed",
                          "--data.root=", "--model.dropout=yes"}));
  EXPECT_DOUBLE_EQ(cli.get_double("model.lr"), 2.0);
  EXPECT_EQ(cli.get_string("data.root"), "");  // the later flag wins
  EXPECT_EQ(cli.trainer_options().precision, "bf16-mixed");
  EXPECT_TRUE(cli.get_bool("model.dropout"));
}

TEST(Cli, BareBoolFlagMeansTrueAndEqualsFalseMeansFalse) {
  Cli cli = program_cli();
  ASSERT_TRUE(parse(cli, {"--trainer.deterministic", "--trainer.enable_progress_bar=false",
                          "--model.dropout", "--trainer.logger", "False"}));
  EXPECT_TRUE(cli.trainer_options().deterministic);
  EXPECT_FALSE(cli.trainer_options().enable_progress_bar);
  EXPECT_TRUE(cli.get_bool("model.dropout"));
  EXPECT_FALSE(cli.trainer_options().logger);
}

TEST(Cli, OptionalTrainerFieldsAcceptNull) {
  Cli cli("prog");
  ASSERT_TRUE(parse(cli, {"--trainer.seed", "42", "--trainer.check_val_every_n_epoch=null"}));
  EXPECT_EQ(cli.trainer_options().seed, std::optional<uint64_t>(42));
  EXPECT_FALSE(cli.trainer_options().check_val_every_n_epoch.has_value());
  ASSERT_TRUE(parse(cli, {"--trainer.seed", "None"}));
  EXPECT_FALSE(cli.trainer_options().seed.has_value());
}

TEST(Cli, BatchLimitFieldsReadCountsAndFractions) {
  Cli cli("prog");
  ASSERT_TRUE(parse(cli, {"--trainer.limit_train_batches", "10", "--trainer.limit_val_batches=0.25",
                          "--trainer.val_check_interval", "1.0"}));
  EXPECT_EQ(cli.trainer_options().limit_train_batches, BatchLimit::count(10));
  EXPECT_EQ(cli.trainer_options().limit_val_batches, BatchLimit::fraction(0.25));
  EXPECT_EQ(cli.trainer_options().val_check_interval, BatchLimit::fraction(1.0));
}

TEST(Cli, DevicesAcceptCountsAutoAndIdLists) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"2", "2"},   {"-1", "-1"},      {"auto", "auto"}, {"0,1", "0,1"},
      {"2,", "2,"}, {"[0, 1]", "0,1"}, {"[3]", "3,"},    {"0, 1", "0,1"}};
  for (const auto& [given, stored] : cases) {
    Cli cli("prog");
    ASSERT_TRUE(parse(cli, {"--trainer.devices", given}));
    EXPECT_EQ(cli.trainer_options().devices, stored) << given;
  }
  Cli cli("prog");
  EXPECT_EQ(error_of([&] {
              parse(cli, {"--trainer.devices", "gpu0"});
            }),
            "--trainer.devices expects a device count (2, or -1 for all), auto, or device ids "
            "(0,1), got 'gpu0'");
}

TEST(Cli, EveryTrainerFieldIsSettableByFlag) {
  Cli cli("prog");
  ASSERT_TRUE(parse(cli, {"--trainer.accelerator=cpu",
                          "--trainer.devices=3",
                          "--trainer.strategy=ddp",
                          "--trainer.precision=64-true",
                          "--trainer.num_nodes=2",
                          "--trainer.num_threads=4",
                          "--trainer.cluster_environment=slurm",
                          "--trainer.slurm_auto_detect=false",
                          "--trainer.slurm_auto_requeue=false",
                          "--trainer.slurm_requeue_signal=SIGTERM",
                          "--trainer.slurm_requeue_command=echo requeue",
                          "--trainer.process_group_backend=gloo",
                          "--trainer.process_group_timeout_s=12.5",
                          "--trainer.rendezvous_timeout_s=7",
                          "--trainer.ddp_bucket_cap_mb=4",
                          "--trainer.ddp_first_bucket_cap_mb=0.5",
                          "--trainer.ddp_gradient_as_bucket_view=true",
                          "--trainer.max_epochs=5",
                          "--trainer.min_epochs=1",
                          "--trainer.max_steps=100",
                          "--trainer.min_steps=10",
                          "--trainer.limit_train_batches=11",
                          "--trainer.limit_val_batches=12",
                          "--trainer.limit_test_batches=13",
                          "--trainer.limit_predict_batches=14",
                          "--trainer.val_check_interval=0.5",
                          "--trainer.check_val_every_n_epoch=3",
                          "--trainer.num_sanity_val_steps=-1",
                          "--trainer.fast_dev_run=2",
                          "--trainer.accumulate_grad_batches=4",
                          "--trainer.gradient_clip_val=0.5",
                          "--trainer.gradient_clip_algorithm=value",
                          "--trainer.seed=9",
                          "--trainer.deterministic=true",
                          "--trainer.default_root_dir=out",
                          "--trainer.enable_progress_bar=false",
                          "--trainer.enable_checkpointing=false",
                          "--trainer.enable_model_summary=false",
                          "--trainer.logger=false",
                          "--trainer.log_every_n_steps=7"}));
  const TrainerOptions& o = cli.trainer_options();
  EXPECT_EQ(o.accelerator, "cpu");
  EXPECT_EQ(o.devices, "3");
  EXPECT_EQ(o.strategy, "ddp");
  EXPECT_EQ(o.precision, "64-true");
  EXPECT_EQ(o.num_nodes, 2);
  EXPECT_EQ(o.num_threads, 4);
  EXPECT_EQ(o.cluster_environment, "slurm");
  EXPECT_FALSE(o.slurm_auto_detect);
  EXPECT_FALSE(o.slurm_auto_requeue);
  EXPECT_EQ(o.slurm_requeue_signal, "SIGTERM");
  EXPECT_EQ(o.slurm_requeue_command, "echo requeue");
  EXPECT_EQ(o.process_group_backend, "gloo");
  EXPECT_DOUBLE_EQ(o.process_group_timeout_s, 12.5);
  EXPECT_DOUBLE_EQ(o.rendezvous_timeout_s, 7.0);
  EXPECT_DOUBLE_EQ(o.ddp_bucket_cap_mb, 4.0);
  EXPECT_DOUBLE_EQ(o.ddp_first_bucket_cap_mb, 0.5);
  EXPECT_TRUE(o.ddp_gradient_as_bucket_view);
  EXPECT_EQ(o.max_epochs, 5);
  EXPECT_EQ(o.min_epochs, 1);
  EXPECT_EQ(o.max_steps, 100);
  EXPECT_EQ(o.min_steps, 10);
  EXPECT_EQ(o.limit_train_batches, BatchLimit::count(11));
  EXPECT_EQ(o.limit_val_batches, BatchLimit::count(12));
  EXPECT_EQ(o.limit_test_batches, BatchLimit::count(13));
  EXPECT_EQ(o.limit_predict_batches, BatchLimit::count(14));
  EXPECT_EQ(o.val_check_interval, BatchLimit::fraction(0.5));
  EXPECT_EQ(o.check_val_every_n_epoch, std::optional<int64_t>(3));
  EXPECT_EQ(o.num_sanity_val_steps, -1);
  EXPECT_EQ(o.fast_dev_run, 2);
  EXPECT_EQ(o.accumulate_grad_batches, 4);
  EXPECT_DOUBLE_EQ(o.gradient_clip_val, 0.5);
  EXPECT_EQ(o.gradient_clip_algorithm, "value");
  EXPECT_EQ(o.seed, std::optional<uint64_t>(9));
  EXPECT_TRUE(o.deterministic);
  EXPECT_EQ(o.default_root_dir, "out");
  EXPECT_FALSE(o.enable_progress_bar);
  EXPECT_FALSE(o.enable_checkpointing);
  EXPECT_FALSE(o.enable_model_summary);
  EXPECT_FALSE(o.logger);
  EXPECT_EQ(o.log_every_n_steps, 7);
}

// --- Cli: config files ---

TEST(Cli, ReadsSectionsFromAConfigFile) {
  const std::string path = write_file("run.yaml",
                                      "trainer:\n  max_epochs: 3\n  devices: [0, 1]\n"
                                      "  seed: ~\n  limit_val_batches: 0.5\n"
                                      "model: {lr: 0.01, dropout: yes}\n"
                                      "data:\n  root: /data\n");
  Cli cli = program_cli();
  ASSERT_TRUE(parse(cli, {"--config", path}));
  EXPECT_EQ(cli.trainer_options().max_epochs, 3);
  EXPECT_EQ(cli.trainer_options().devices, "0,1");
  EXPECT_FALSE(cli.trainer_options().seed.has_value());
  EXPECT_EQ(cli.trainer_options().limit_val_batches, BatchLimit::fraction(0.5));
  EXPECT_DOUBLE_EQ(cli.get_double("model.lr"), 0.01);
  EXPECT_TRUE(cli.get_bool("model.dropout"));
  EXPECT_EQ(cli.get_string("data.root"), "/data");
  EXPECT_EQ(cli.get_int("model.hidden"), 64);  // not in the file: default
}

TEST(Cli, ConfigFileSingleDeviceListMeansThatDeviceId) {
  Cli cli("prog");
  ASSERT_TRUE(parse(cli, {"--config=" + write_file("d.yaml", "trainer: {devices: [1]}\n")}));
  EXPECT_EQ(cli.trainer_options().devices, "1,");  // device id 1, not one device
}

TEST(Cli, LaterConfigFilesOverrideEarlierOnes) {
  const std::string first = write_file("a.yaml", "trainer: {max_epochs: 3, max_steps: 50}\n");
  const std::string second = write_file("b.yaml", "trainer: {max_epochs: 4}\n");
  Cli cli("prog");
  ASSERT_TRUE(parse(cli, {"--config", first, "--config", second}));
  EXPECT_EQ(cli.trainer_options().max_epochs, 4);
  EXPECT_EQ(cli.trainer_options().max_steps, 50);
}

TEST(Cli, FlagsOverrideConfigFileWhateverTheOrder) {
  const std::string path = write_file("run.yaml", "trainer: {max_epochs: 3, max_steps: 50}\n");
  Cli before("prog");
  ASSERT_TRUE(parse(before, {"--trainer.max_epochs", "9", "--config", path}));
  EXPECT_EQ(before.trainer_options().max_epochs, 9);
  EXPECT_EQ(before.trainer_options().max_steps, 50);
  Cli after("prog");
  ASSERT_TRUE(parse(after, {"--config", path, "--trainer.max_epochs=9"}));
  EXPECT_EQ(after.trainer_options().max_epochs, 9);
}

TEST(Cli, EmptyConfigFileOrSectionSetsNothing) {
  Cli cli = program_cli();
  ASSERT_TRUE(parse(cli, {"--config", write_file("empty.yaml", ""), "--config",
                          write_file("s.yaml", "model:\n")}));
  EXPECT_EQ(cli.get_int("model.hidden"), 64);
}

// --- Cli: --print-config ---

TEST(Cli, PrintConfigRoundTripsThroughAConfigFile) {
  Cli cli = program_cli();
  cli.add_option("data.tricky", "", "a string that YAML would misread unquoted");
  std::ostringstream printed;
  EXPECT_FALSE(parse(cli,
                     {"--trainer.devices=[2]", "--trainer.seed=7", "--trainer.logger=false",
                      "--trainer.limit_train_batches=0.1", "--trainer.val_check_interval=5",
                      "--trainer.check_val_every_n_epoch=null", "--trainer.gradient_clip_val=1",
                      "--model.lr=1e-7", "--data.root=", "--data.tricky=true",
                      "--trainer.default_root_dir=null", "--trainer.strategy=3", "--print-config"},
                     &printed));
  EXPECT_EQ(printed.str(), cli.to_yaml());
  EXPECT_EQ(cli.trainer_options().seed, std::optional<uint64_t>(7));  // parsed before printing

  const std::string path = write_file("printed.yaml", printed.str());
  Cli again = program_cli();
  again.add_option("data.tricky", "", "a string that YAML would misread unquoted");
  ASSERT_TRUE(parse(again, {"--config", path}));
  EXPECT_EQ(again.to_yaml(), printed.str());
  const TrainerOptions& o = again.trainer_options();
  EXPECT_EQ(o.devices, "2,");
  EXPECT_EQ(o.seed, std::optional<uint64_t>(7));
  EXPECT_FALSE(o.logger);
  EXPECT_EQ(o.limit_train_batches, BatchLimit::fraction(0.1));
  EXPECT_EQ(o.val_check_interval, BatchLimit::count(5));
  EXPECT_FALSE(o.check_val_every_n_epoch.has_value());
  EXPECT_DOUBLE_EQ(o.gradient_clip_val, 1.0);
  EXPECT_EQ(o.default_root_dir, "null");
  EXPECT_EQ(o.strategy, "3");
  EXPECT_DOUBLE_EQ(again.get_double("model.lr"), 1e-7);
  EXPECT_EQ(again.get_string("data.root"), "");
  EXPECT_EQ(again.get_string("data.tricky"), "true");
}

TEST(Cli, PrintConfigListsEverySectionAndKey) {
  Cli cli = program_cli();
  std::ostringstream printed;
  EXPECT_FALSE(parse(cli, {"--print-config"}, &printed));
  const std::string yaml = printed.str();
  for (const std::string key :
       {"trainer:", "model:", "data:", "  max_epochs: -1", "  devices: auto",
        "  limit_val_batches: 1.0", "  seed: null", "  check_val_every_n_epoch: 1",
        "  gradient_clip_val: 0.0", "  log_every_n_steps: 50", "  lr: 0.001", "  hidden: 64",
        "  dropout: false", "  root: ./data", "  batch_size: 32"}) {
    EXPECT_TRUE(contains(yaml, key + "\n") || contains(yaml, key)) << key << "\n" << yaml;
  }
  EXPECT_LT(yaml.find("trainer:"), yaml.find("model:"));
  EXPECT_LT(yaml.find("model:"), yaml.find("data:"));
}

// --- Cli: --help ---

TEST(Cli, HelpReturnsFalseAndListsEveryOptionWithItsDefaultAndHelp) {
  Cli cli = program_cli();
  std::ostringstream out;
  EXPECT_FALSE(parse(cli, {"--help"}, &out));
  const std::string help = out.str();
  EXPECT_TRUE(contains(help, "usage: train")) << help;
  EXPECT_TRUE(contains(help, "Trains a test model.")) << help;
  EXPECT_TRUE(contains(help, "--config FILE.yaml")) << help;
  EXPECT_TRUE(contains(help, "--print-config")) << help;
  EXPECT_TRUE(contains(help, "--model.lr FLOAT")) << help;
  EXPECT_TRUE(contains(help, "learning rate (default: 0.001)")) << help;
  EXPECT_TRUE(contains(help, "--trainer.max_epochs INT")) << help;
  EXPECT_TRUE(contains(help, "--trainer.seed UINT|null")) << help;
  EXPECT_TRUE(contains(help, "(default: auto)")) << help;
  for (const std::string key : {"trainer.accelerator", "trainer.log_every_n_steps",
                                "trainer.limit_predict_batches", "data.root", "model.dropout"}) {
    EXPECT_TRUE(contains(help, "--" + key + " ")) << key;
  }
  EXPECT_EQ(help, cli.usage());
}

// --help wraps long help over lines: compare with runs of blanks and line breaks as one space.
std::string one_line(const std::string& text) {
  std::string out;
  for (char c : text) {
    const bool blank = c == ' ' || c == '\n';
    if (blank && (out.empty() || out.back() == ' ')) continue;
    out += blank ? ' ' : c;
  }
  return out;
}

TEST(Cli, HelpShowsEveryFlagOfTheTableWithItsTypeHelpAndDefault) {
  const TrainerOptions defaults;
  const std::string help = one_line(Cli("prog").usage());
  for (const auto& flag : volt::trainer_flags()) {
    const std::string name = flag.name;
    EXPECT_TRUE(contains(help, "--" + volt::flag_cli_key(flag) + " " + volt::flag_type_metavar(flag.type))) << name;
    const std::string default_text = volt::flag_value_text(flag.get(defaults));
    EXPECT_TRUE(contains(help, one_line(flag.help) + " (default: " + (default_text.empty() ? "\"\"" : default_text) +
                                   ")"))
        << name << ": " << flag.help;
  }
}

TEST(Cli, TrainerSectionHoldsExactlyTheTablesFlagsInItsOrder) {
  std::ostringstream out;
  Cli cli("prog");
  EXPECT_FALSE(parse(cli, {"--print-config"}, &out));
  // The table's rows in the trainer section, then its tuner.* rows in the tuner section, its ddp.* rows in ddp,
  // its fsdp.* rows in fsdp.
  std::vector<std::string> keys;
  std::istringstream lines(out.str());
  std::string section;
  for (std::string line; std::getline(lines, line);) {
    if (line == "trainer:" || line == "tuner:" || line == "ddp:" || line == "fsdp:") {
      section = line.substr(0, line.size() - 1);
    }
    else if (!line.empty() && line[0] != ' ') section.clear();
    else if (!section.empty()) keys.push_back(section + "." + line.substr(2, line.find(':') - 2));
  }
  std::vector<std::string> names;
  for (const auto& flag : volt::trainer_flags()) names.push_back(volt::flag_cli_key(flag));
  EXPECT_EQ(keys, names);
}

TEST(Cli, ShortHelpWinsOverOtherwiseInvalidArguments) {
  Cli cli("prog");
  std::ostringstream out;
  EXPECT_FALSE(parse(cli, {"--no-such-flag", "stray", "-h"}, &out));
  EXPECT_TRUE(contains(out.str(), "usage: prog"));
}

TEST(Cli, ParseStartsFromDefaultsEachTime) {
  Cli cli = program_cli();
  ASSERT_TRUE(parse(cli, {"--model.hidden", "5", "--trainer.max_epochs", "2"}));
  ASSERT_TRUE(parse(cli, {}));
  EXPECT_EQ(cli.get_int("model.hidden"), 64);
  EXPECT_EQ(cli.trainer_options().max_epochs, -1);
}

TEST(Cli, FailedParseKeepsThePreviousValues) {
  Cli cli = program_cli();
  ASSERT_TRUE(parse(cli, {"--model.hidden", "5"}));
  const std::string bad = write_file("bad.yaml", "model: {hidden: many}\n");
  EXPECT_THROW(parse(cli, {"--model.hidden", "6", "--config", bad}), ConfigError);
  EXPECT_EQ(cli.get_int("model.hidden"), 5);
}

// --- Cli: errors ---

TEST(Cli, UnknownFlagSuggestsTheNearestName) {
  Cli cli("prog");
  EXPECT_EQ(error_of([&] {
              parse(cli, {"--trainer.max_epoch", "3"});
            }),
            "unknown option --trainer.max_epoch; did you mean --trainer.max_epochs?");
  EXPECT_EQ(error_of([&] { parse(cli, {"--trainer.max-epochs=3"}); }),
            "unknown option --trainer.max-epochs; did you mean --trainer.max_epochs?");
  EXPECT_EQ(error_of([&] { parse(cli, {"--print_config"}); }),
            "unknown option --print_config; did you mean --print-config?");
}

TEST(Cli, UnknownFlagWithoutItsSectionSuggestsTheFullName) {
  Cli cli = program_cli();
  EXPECT_EQ(error_of([&] {
              parse(cli, {"--lr", "0.1"});
            }),
            "unknown option --lr; did you mean --model.lr?");
}

TEST(Cli, UnknownFlagFarFromEveryNameSaysHowToListThem) {
  Cli cli("prog");
  EXPECT_EQ(error_of([&] { parse(cli, {"--zzzzzzzzzzzzzzzz"}); }),
            "unknown option --zzzzzzzzzzzzzzzz; run with --help to list the options");
  EXPECT_TRUE(contains(error_of([&] { parse(cli, {"-x"}); }), "unknown option -x"));
}

TEST(Cli, WrongTypeOnTheCommandLineSaysWhatWasExpectedAndGiven) {
  Cli cli = program_cli();
  EXPECT_EQ(error_of([&] {
              parse(cli, {"--trainer.max_epochs", "abc"});
            }),
            "--trainer.max_epochs expects an integer, got 'abc'");
  EXPECT_EQ(error_of([&] { parse(cli, {"--trainer.max_epochs=1.5"}); }),
            "--trainer.max_epochs expects an integer, got '1.5'");
  EXPECT_EQ(error_of([&] {
              parse(cli, {"--model.lr", "fast"});
            }),
            "--model.lr expects a number, got 'fast'");
  EXPECT_EQ(error_of([&] { parse(cli, {"--trainer.seed=-1"}); }),
            "--trainer.seed expects a non-negative integer or null, got '-1'");
  EXPECT_EQ(error_of([&] { parse(cli, {"--model.dropout=maybe"}); }),
            "--model.dropout expects a boolean (true or false), got 'maybe'");
  const std::string limit = error_of([&] { parse(cli, {"--trainer.limit_val_batches", "x"}); });
  EXPECT_TRUE(contains(limit, "--trainer.limit_val_batches")) << limit;
  EXPECT_TRUE(contains(limit, "'x'")) << limit;
}

TEST(Cli, BoolFlagFollowedByAWordThatIsNotABoolIsAnError) {
  Cli cli("prog");
  EXPECT_EQ(error_of([&] {
              parse(cli, {"--trainer.deterministic", "ture"});
            }),
            "--trainer.deterministic expects a boolean (true or false), got 'ture'");
}

TEST(Cli, MissingValueNamesTheFlag) {
  Cli cli("prog");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--trainer.max_epochs"},
        std::vector<std::string>{"--trainer.max_epochs", "--trainer.max_steps", "3"}}) {
    EXPECT_EQ(error_of([&] { parse(cli, args); }),
              "missing value for --trainer.max_epochs, which expects an integer: write "
              "--trainer.max_epochs VALUE or --trainer.max_epochs=VALUE");
  }
  EXPECT_EQ(error_of([&] { parse(cli, {"--config"}); }),
            "missing value for --config: write --config FILE.yaml");
}

TEST(Cli, PositionalArgumentIsRejected) {
  Cli cli("prog");
  const std::string message = error_of([&] { parse(cli, {"--trainer.max_epochs", "3", "fit"}); });
  EXPECT_TRUE(contains(message, "unexpected argument 'fit'")) << message;
  EXPECT_TRUE(contains(message, "--section.key VALUE")) << message;
}

TEST(Cli, MissingConfigFileIsNamed) {
  Cli cli("prog");
  const std::string message = error_of([&] { parse(cli, {"--config", "/nonexistent/run.yaml"}); });
  EXPECT_TRUE(contains(message, "config file '/nonexistent/run.yaml'")) << message;
  EXPECT_TRUE(contains(message, "cannot be opened")) << message;
}

TEST(Cli, NumbersBeyondTheirTypeSayWhyNotJustWhat) {
  Cli cli = program_cli();
  const std::string big = error_of([&] { parse(cli, {"--trainer.max_epochs", "99999999999999999999"}); });
  EXPECT_TRUE(contains(big, "--trainer.max_epochs expects an integer, got '99999999999999999999'")) << big;
  EXPECT_TRUE(contains(big, "too large: the largest whole number here is 9223372036854775807")) << big;
  const std::string seed = error_of([&] { parse(cli, {"--trainer.seed", "18446744073709551616"}); });
  EXPECT_TRUE(contains(seed, "trainer.seed=18446744073709551616 is too large")) << seed;
  const std::string huge = error_of([&] { parse(cli, {"--model.lr", "1e999"}); });
  EXPECT_TRUE(contains(huge, "model.lr=1e999 is out of the range of a double")) << huge;
}

TEST(Cli, NanAndInfinityAreNotNumbers) {
  Cli cli = program_cli();
  for (const std::string bad : {"nan", "inf", "-inf", "NaN", "infinity"}) {
    const std::string message = error_of([&] { parse(cli, {"--trainer.gradient_clip_val", bad}); });
    EXPECT_TRUE(contains(message, "--trainer.gradient_clip_val expects a number, got '" + bad + "'")) << message;
    EXPECT_TRUE(contains(message, "trainer.gradient_clip_val=" + bad + " is not a finite number")) << message;
  }
  const std::string path = write_file("nan.yaml", "model: {lr: nan}\n");
  EXPECT_TRUE(contains(error_of([&] { parse(cli, {"--config", path}); }), "not a finite number"));
}

TEST(Cli, KeyRepeatedInAConfigFileIsRefusedNamingBothLines) {
  Cli cli = program_cli();
  const std::string path = write_file("twice.yaml", "trainer:\n  max_epochs: 3\n  devices: 1\n  max_epochs: 5\n");
  const std::string message = error_of([&] { parse(cli, {"--config", path}); });
  EXPECT_TRUE(contains(message, "has the key 'trainer.max_epochs' twice, on lines 2 and 4")) << message;
  EXPECT_TRUE(contains(message, path)) << message;
}

TEST(Cli, SectionRepeatedInAConfigFileIsRefusedNamingBothLines) {
  Cli cli = program_cli();
  const std::string path =
      write_file("sections.yaml", "model:\n  lr: 0.1\ntrainer: {max_epochs: 3}\nmodel:\n  hidden: 8\n");
  const std::string message = error_of([&] { parse(cli, {"--config", path}); });
  EXPECT_TRUE(contains(message, "has the section 'model' twice, on lines 1 and 4")) << message;
}

TEST(Cli, SameKeyInTwoSectionsOrTwoFilesIsFine) {
  Cli cli = program_cli();
  cli.add_option("optim.lr", 0.5, "another lr");
  const std::string a = write_file("a.yaml", "model: {lr: 0.1}\noptim: {lr: 0.2}\n");
  const std::string b = write_file("b.yaml", "model: {lr: 0.3}\n");
  ASSERT_TRUE(parse(cli, {"--config", a, "--config", b}));
  EXPECT_DOUBLE_EQ(cli.get_double("model.lr"), 0.3);
  EXPECT_DOUBLE_EQ(cli.get_double("optim.lr"), 0.2);
}

TEST(Cli, ConfigThatIsAFolderIsNamedAsAFolder) {
  Cli cli("prog");
  const std::string message = error_of([&] { parse(cli, {"--config", testing::TempDir()}); });
  EXPECT_TRUE(contains(message, "is a folder, not a regular file")) << message;
}

TEST(Cli, ConfigThatIsAFifoIsRefusedWithoutBlocking) {
  Cli cli("prog");
  const auto* test = testing::UnitTest::GetInstance()->current_test_info();
  const std::string path = testing::TempDir() + "volt_cli_" + test->name() + "_pipe.yaml";
  ::unlink(path.c_str());
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  // open() of a FIFO without a writer blocks: the parse must return at once with the reason.
  const std::string message = error_of([&] { parse(cli, {"--config", path}); });
  ::unlink(path.c_str());
  EXPECT_TRUE(contains(message, "is a FIFO (named pipe), not a regular file")) << message;
}

TEST(Cli, ConfigThatIsADeviceIsRefused) {
  Cli cli("prog");
  const std::string message = error_of([&] { parse(cli, {"--config", "/dev/zero"}); });
  EXPECT_TRUE(contains(message, "'/dev/zero' (given with --config) cannot be opened: it is a character device"))
      << message;
}

TEST(Cli, ConfigFileNameThatIsNotUtf8IsShownEscaped) {
  Cli cli("prog");
  const std::string message = error_of([&] { parse(cli, {"--config", "/nonexistent/\xff.yaml"}); });
  EXPECT_TRUE(contains(message, "'/nonexistent/\\xff.yaml'")) << message;
}

TEST(Cli, ConfigNestedBeyondTheReadersDepthSaysSo) {
  Cli cli = program_cli();
  const std::string path =
      write_file("deep.yaml", "model: {lr: " + std::string(5000, '[') + std::string(5000, ']') + "}\n");
  const std::string message = error_of([&] { parse(cli, {"--config", path}); });
  EXPECT_TRUE(contains(message, "levels deep")) << message;  // yaml-cpp alone says "bad file"
}

TEST(Cli, MalformedConfigFileIsNamed) {
  Cli cli("prog");
  const std::string path = write_file("broken.yaml", "trainer: [1, 2\n");
  const std::string message = error_of([&] { parse(cli, {"--config", path}); });
  EXPECT_TRUE(contains(message, "config file '" + path + "' is not valid YAML")) << message;
}

TEST(Cli, ConfigFileMustBeAMappingOfSections) {
  Cli cli("prog");
  const std::string list = write_file("list.yaml", "- 1\n- 2\n");
  EXPECT_TRUE(contains(error_of([&] {
                         parse(cli, {"--config", list});
                       }),
                       "must be a mapping of sections"));
  const std::string flat = write_file("flat.yaml", "trainer: 3\n");
  EXPECT_TRUE(contains(error_of([&] {
                         parse(cli, {"--config", flat});
                       }),
                       "section 'trainer' must be a mapping"));
}

TEST(Cli, UnknownConfigKeyNamesTheFileAndSuggestsTheNearest) {
  Cli cli = program_cli();
  const std::string path = write_file("typo.yaml", "trainer:\n  max_epoch: 3\n");
  EXPECT_EQ(error_of([&] {
              parse(cli, {"--config", path});
            }),
            path + ": unknown key trainer.max_epoch; did you mean trainer.max_epochs?");
  const std::string section = write_file("section.yaml", "modle: {lr: 1}\n");
  EXPECT_EQ(error_of([&] {
              parse(cli, {"--config", section});
            }),
            section +
                ": unknown section 'modle'; did you mean 'model'? The sections are: "
                "trainer, tuner, ddp, fsdp, model, data.");
}

TEST(Cli, WrongTypeInAConfigFileNamesTheFileAndKey) {
  Cli cli = program_cli();
  const std::string path = write_file("type.yaml", "trainer: {max_epochs: abc}\n");
  EXPECT_EQ(error_of([&] {
              parse(cli, {"--config", path});
            }),
            path + ": trainer.max_epochs expects an integer, got 'abc'");
  const std::string list = write_file("list.yaml", "model: {lr: [1, 2]}\n");
  EXPECT_EQ(error_of([&] {
              parse(cli, {"--config", list});
            }),
            list + ": model.lr expects a number, got a list");
  const std::string null_string = write_file("null.yaml", "data: {root: }\n");
  EXPECT_TRUE(contains(error_of([&] {
                         parse(cli, {"--config", null_string});
                       }),
                       "data.root expects a string, got null"));
}

TEST(Cli, GettersRejectUnknownKeysAndOtherTypes) {
  Cli cli = program_cli();
  ASSERT_TRUE(parse(cli, {}));
  EXPECT_EQ(error_of([&] { cli.get_double("model.lrr"); }),
            "get_double(\"model.lrr\"): no such option; did you mean \"model.lr\"? Declare "
            "program options with add_option before reading them.");
  EXPECT_EQ(error_of([&] { cli.get_int("model.lr"); }),
            "get_int(\"model.lr\"): the option holds a number; read it with get_double");
  EXPECT_TRUE(contains(error_of([&] { cli.get_int("trainer.seed"); }), "trainer_options()"));
}

TEST(Cli, AddOptionRejectsMalformedDuplicateAndTrainerKeys) {
  Cli cli = program_cli();
  EXPECT_TRUE(contains(error_of([&] { cli.add_option("lr", 1.0, ""); }), "'section.name'"));
  EXPECT_TRUE(contains(error_of([&] { cli.add_option("a.b.c", 1.0, ""); }), "'section.name'"));
  EXPECT_TRUE(contains(error_of([&] { cli.add_option("model.lr", 1.0, ""); }), "twice"));
  EXPECT_TRUE(contains(error_of([&] { cli.add_option("trainer.foo", 1, ""); }), "built in"));
}

}  // namespace
