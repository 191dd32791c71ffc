// What every entry point uses on text from a user: one number parser (overflow, nan/inf, range), text shown
// escaped when it is not UTF-8, and files whose type is checked before they are opened.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "support/temp_dir.h"
#include "volt/core/environ.h"
#include "volt/core/error.h"
#include "volt/core/file_check.h"
#include "volt/core/input_file.h"
#include "volt/core/numbers.h"
#include "volt/core/printable.h"
#include "volt/core/strict_json.h"

namespace {

namespace numbers = volt::numbers;
using volt::testing::TempDir;

TEST(Numbers, ParsesWholeNumbersWithAnOptionalSign) {
  EXPECT_EQ(numbers::parse_int("42").value, 42);
  EXPECT_EQ(numbers::parse_int("+42").value, 42);
  EXPECT_EQ(numbers::parse_int("-7").value, -7);
  EXPECT_EQ(numbers::parse_int("9223372036854775807").value, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(numbers::parse_int("-9223372036854775808").value, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(numbers::parse_uint("18446744073709551615").value, std::numeric_limits<uint64_t>::max());
}

TEST(Numbers, RefusesTextThatIsNotAWholeNumber) {
  for (const char* bad : {"", "abc", "1.5", "1e3", " 1", "1 ", "0x10", "+-1", "--1", "1,000", "٣"}) {
    const auto n = numbers::parse_int(bad);
    EXPECT_FALSE(n) << bad;
    EXPECT_FALSE(n.out_of_range) << bad;
    EXPECT_FALSE(n.problem.empty()) << bad;
  }
  EXPECT_FALSE(numbers::parse_uint("-1"));
}

TEST(Numbers, OverflowIsTooLargeNotAWrappedValue) {
  // std::stoll threw std::out_of_range here, which nothing caught: volt plan died of SIGABRT.
  const auto big = numbers::parse_int("99999999999999999999");
  ASSERT_FALSE(big);
  EXPECT_TRUE(big.out_of_range);
  EXPECT_EQ(big.problem, "is too large: the largest whole number here is 9223372036854775807");
  const auto small = numbers::parse_int("-99999999999999999999", -5, 5);
  EXPECT_EQ(small.problem, "is too small: the smallest whole number here is -5");
  EXPECT_TRUE(numbers::parse_uint("18446744073709551616").out_of_range);
}

TEST(Numbers, RangeIsCheckedAndNamed) {
  EXPECT_EQ(numbers::parse_int("0", 1, 10).problem, "is below the minimum 1");
  EXPECT_EQ(numbers::parse_int("11", 1, 10).problem, "is above the maximum 10");
  EXPECT_TRUE(numbers::parse_int("11", 1, 10).out_of_range);
  EXPECT_EQ(numbers::parse_int("10", 1, 10).value, 10);
  EXPECT_EQ(numbers::parse_double("10.5", 0, 10).problem, "is above the maximum 10");
}

TEST(Numbers, DoublesMustBeFinite) {
  EXPECT_DOUBLE_EQ(*numbers::parse_double("0.25").value, 0.25);
  EXPECT_DOUBLE_EQ(*numbers::parse_double("+1e-3").value, 1e-3);
  EXPECT_DOUBLE_EQ(*numbers::parse_double("3").value, 3.0);
  for (const char* bad : {"nan", "NaN", "inf", "-inf", "infinity"}) {
    const auto d = numbers::parse_double(bad);
    EXPECT_FALSE(d) << bad;
    EXPECT_TRUE(d.out_of_range) << bad;
    EXPECT_EQ(d.problem, "is not a finite number (nan and inf are refused)") << bad;
  }
  EXPECT_TRUE(numbers::parse_double("1e999").out_of_range);
  EXPECT_FALSE(numbers::parse_double("1e999"));
  EXPECT_FALSE(numbers::parse_double("0x1p3"));
  EXPECT_FALSE(numbers::parse_double("fast").out_of_range);
}

TEST(Printable, KeepsUtf8AndEscapesEverythingElse) {
  EXPECT_EQ(volt::printable("run.yaml"), "run.yaml");
  EXPECT_EQ(volt::printable("d\xc3\xa9j\xc3\xa0 \xe2\x82\xac \xf0\x9f\x98\x80"),
            "d\xc3\xa9j\xc3\xa0 \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(volt::printable(std::string("\xff") + "f.yaml"), "\\xfff.yaml");
  EXPECT_EQ(volt::printable("a\nb\tc\x01"), "a\\nb\\tc\\x01");
  EXPECT_EQ(volt::printable("back\\slash"), "back\\\\slash");
  // Overlong, surrogate and truncated sequences are not UTF-8.
  EXPECT_EQ(volt::printable("\xc0\xaf"), "\\xc0\\xaf");
  EXPECT_EQ(volt::printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");
  EXPECT_EQ(volt::printable("\xe2\x82"), "\\xe2\\x82");
  EXPECT_TRUE(volt::is_valid_utf8(volt::printable("\xff\xfe\x80")));
  EXPECT_FALSE(volt::is_valid_utf8("\xff"));
}

TEST(StrictJson, RepeatedKeyIsRefusedWithItsEntry) {
  try {
    volt::parse_strict_json(R"({"a": {"x": 1, "x": 2}})");
    ADD_FAILURE() << "expected a StrictJsonError";
  } catch (const volt::StrictJsonError& e) {
    EXPECT_EQ(e.kind, volt::StrictJsonError::Kind::kRepeatedKey);
    EXPECT_EQ(e.key, "x");
    EXPECT_EQ(e.entry, "a");
  }
  try {
    volt::parse_strict_json(R"({"a": 1, "b": 2, "a": 3})");
    ADD_FAILURE() << "expected a StrictJsonError";
  } catch (const volt::StrictJsonError& e) {
    EXPECT_EQ(e.key, "a");
    EXPECT_EQ(e.entry, "");
  }
  EXPECT_EQ(volt::parse_strict_json(R"({"a": {"x": 1}, "b": {"x": 2}})")["b"]["x"], 2);
}

TEST(StrictJson, NestingBeyondTheLimitIsRefusedBeforeItIsBuilt) {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  EXPECT_THROW(volt::parse_strict_json(deep, 64), volt::StrictJsonError);
  EXPECT_NO_THROW(volt::parse_strict_json(std::string(10, '[') + std::string(10, ']'), 64));
  EXPECT_THROW(volt::parse_strict_json("{\"a\": "), nlohmann::json::parse_error);
}

TEST(InputFile, RegularFileIsReadWhole) {
  TempDir dir;
  const std::string path = dir.file("run.yaml");
  std::ofstream(path) << "trainer: {}\n";
  std::string text;
  EXPECT_EQ(volt::read_input_file(path, text, 1024), "");
  EXPECT_EQ(text, "trainer: {}\n");
}

TEST(InputFile, EveryOtherKindIsNamedBeforeItIsOpened) {
  TempDir dir;
  const std::string fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string text;
  // Would block forever in open() without a writer if it were opened.
  EXPECT_EQ(volt::read_input_file(fifo, text, 1024), "is a FIFO (named pipe), not a regular file");
  EXPECT_EQ(volt::input_file_problem(dir.path().string()), "is a folder, not a regular file");
  EXPECT_EQ(volt::input_file_problem("/dev/null"), "is a character device, not a regular file");
  EXPECT_EQ(volt::input_file_problem(dir.file("missing.yaml")), "does not exist");
  const std::string file = dir.file("plain");
  std::ofstream(file) << "x";
  EXPECT_EQ(volt::input_file_problem(file + "/below"),
            "does not exist (a part of the path before the file name is a file, not a folder)");
  EXPECT_EQ(volt::input_file_problem(""), "is an empty path; give a file name");
}

TEST(InputFile, FileOverTheLimitIsRefused) {
  TempDir dir;
  const std::string path = dir.file("big");
  std::ofstream(path) << std::string(2000, 'x');
  std::string text;
  EXPECT_EQ(volt::read_input_file(path, text, 1000), "has 2000 bytes, more than the 1000 this reader accepts");
  EXPECT_TRUE(text.empty());
}

TEST(Environ, IntegerVariableBeyond64BitsIsAConfigErrorNamingIt) {
  const volt::Environ env(std::map<std::string, std::string>{
      {"WORLD_SIZE", "99999999999999999999"}, {"RANK", "-1"}, {"LOCAL_RANK", " 1"}, {"OK", "+3"}});
  try {
    env.get_int("WORLD_SIZE");
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const volt::ConfigError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("WORLD_SIZE='99999999999999999999'"), std::string::npos) << message;
    EXPECT_NE(message.find("too large"), std::string::npos) << message;
  }
  EXPECT_THROW(env.get_int("RANK"), volt::ConfigError);
  EXPECT_THROW(env.get_int("LOCAL_RANK"), volt::ConfigError);
  EXPECT_EQ(env.get_int("OK"), 3);
  EXPECT_EQ(env.get_int("UNSET"), std::nullopt);
}

TEST(Environ, ValueThatIsNotUtf8IsShownEscaped) {
  const volt::Environ env(std::map<std::string, std::string>{{"RANK", "\xff"}});
  try {
    env.get_int("RANK");
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const volt::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("RANK='\\xff'"), std::string::npos) << e.what();
  }
}

// Volt's own remove_all (volt::remove_tree): a pip PyTorch's libtorch.so exports a copy of
// std::filesystem::remove_all that crashes when it binds in place of libstdc++'s.
TEST(RemoveTree, RemovesAFolderWithEverythingInItButNotWhatLinksPointTo) {
  volt::testing::TempDir dir("volt_remove_tree");
  const std::filesystem::path outside = dir.path() / "outside.txt";
  std::ofstream(outside) << "kept";
  const std::filesystem::path tree = dir.path() / "tree";
  std::filesystem::create_directories(tree / "a" / "b");
  std::ofstream(tree / "a" / "b" / "f1") << "1";
  std::ofstream(tree / "f2") << "2";
  std::filesystem::create_symlink(outside, tree / "a" / "link");
  std::filesystem::create_directory_symlink(dir.path(), tree / "dirlink");  // a loop if it were followed
  std::error_code ec;
  // tree, a, b, f1, f2, link, dirlink
  EXPECT_EQ(volt::remove_tree(tree.string(), ec), 7u);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_FALSE(std::filesystem::exists(tree));
  EXPECT_TRUE(std::filesystem::is_regular_file(outside)) << "a link's target was removed";
  EXPECT_EQ(volt::remove_tree((dir.path() / "missing").string(), ec), 0u);
  EXPECT_FALSE(ec) << "a path that does not exist is not an error";
  EXPECT_EQ(volt::remove_tree(outside.string(), ec), 1u) << "a plain file is removed too";
  EXPECT_FALSE(std::filesystem::exists(outside));
}


}  // namespace
