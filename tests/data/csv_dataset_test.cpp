#include <ATen/ops/equal.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "data/text_reference.h"
#include "support/temp_dir.h"
#include "volt/core/error.h"
#include "volt/data/csv_dataset.h"

namespace {

using volt::data::ColumnType;
using volt::data::CsvDataset;
using volt::data::CsvOptions;
using volt::testing::TempDir;

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// Every value of `ds` equals what pandas.read_csv reads from the same file with the same selection.
void expect_equal_to_pandas(const CsvDataset& ds, const nlohmann::json& spec) {
  const nlohmann::json ref = volt::testing::run_text_reference("csv " + volt::testing::shell_quote(ds.path()) + " " +
                                                               volt::testing::shell_quote(spec.dump()));
  EXPECT_EQ(ds.columns(), ref["columns"].get<std::vector<std::string>>());
  const auto& rows = ref["features"];
  ASSERT_EQ(ds.size(), static_cast<int64_t>(rows.size()));
  const at::Tensor f = ds.features();
  ASSERT_EQ(f.size(1), static_cast<int64_t>(rows[0].size()));
  for (int64_t r = 0; r < f.size(0); ++r) {
    for (int64_t c = 0; c < f.size(1); ++c) {
      EXPECT_EQ(static_cast<double>(f[r][c].item<float>()), rows[r][c].get<double>())
          << "row " << r << " feature " << ds.feature_columns()[c];
    }
  }
  if (ref.contains("target")) {
    const at::Tensor t = ds.targets();
    ASSERT_EQ(t.size(0), static_cast<int64_t>(ref["target"].size()));
    for (int64_t r = 0; r < t.size(0); ++r) {
      if (t.scalar_type() == at::kFloat) {
        EXPECT_EQ(static_cast<double>(t[r].item<float>()), ref["target"][r].get<double>()) << "row " << r;
      } else {
        EXPECT_EQ(t[r].item<int64_t>(), ref["target"][r].get<int64_t>()) << "row " << r;
      }
    }
  }
  for (const auto& [name, values] : ref["categories"].items()) {
    EXPECT_EQ(ds.categories(name), values.get<std::vector<std::string>>()) << name;
  }
}

// RFC 4180's hard parts and pandas' conveniences in one file: a byte order mark, CRLF and LF, a
// blank line, quoted delimiters, a quoted line break, doubled quotes, spaces around numbers, '+',
// exponents, a missing value, a category column, a float target.
const char* kTrickyCsv =
    "\xEF\xBB\xBF"
    "id,height,weight,colour,note,score\r\n"
    "1,1.75,70.5,red,\"plain\",0.25\r\n"
    "2, 1.6 ,+65,blue,\"with, comma\",1e-3\n"
    "\n"
    "3,1.8e0,80,\"green\",\"two\nlines\",-2.5\n"
    "4,.5,-0.0,red,\"a \"\"quote\"\"\",3\n"
    "5,,90,\"blue\",,1E2\n"
    "6,2.000001,100.125,Red,x,0.1\n";

TEST(CsvDataset, ValuesEqualPandasReadCsvOnTheSameFile) {
  if (const std::string why = volt::testing::python_module_missing("pandas", "python3-pandas"); !why.empty()) {
    GTEST_SKIP() << why;
  }
  TempDir dir;
  write(dir / "people.csv", kTrickyCsv);
  CsvOptions options;
  options.feature_columns = {"height", "weight", "colour", "id"};
  options.target_column = "score";
  options.target_type = ColumnType::kFloat;
  options.column_types = {{"colour", ColumnType::kCategory}, {"id", ColumnType::kInt}};
  options.fill_value = -1;
  CsvDataset ds(dir / "people.csv", options);
  EXPECT_EQ(ds.size(), 6);
  EXPECT_EQ(ds.categories("colour"), (std::vector<std::string>{"Red", "blue", "green", "red"}));
  expect_equal_to_pandas(ds, {{"features", options.feature_columns},
                              {"target", "score"},
                              {"target_type", "float"},
                              {"types", {{"colour", "category"}, {"id", "int"}}},
                              {"fill", -1}});

  // The same table as TSV (chosen by the extension), without a header, an int category target.
  std::string tsv = "0.5\t3\tcat\n-1.25\t4\tdog\n\"7\"\t5\tcat\n1e10\t6\tbird\n";
  write(dir / "animals.tsv", tsv);
  CsvOptions headerless;
  headerless.header = false;
  headerless.target_column = "2";
  headerless.column_types = {{"2", ColumnType::kCategory}, {"1", ColumnType::kInt}};
  CsvDataset animals(dir / "animals.tsv", headerless);
  EXPECT_EQ(animals.columns(), (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(animals.targets().scalar_type(), at::kLong);
  expect_equal_to_pandas(
      animals, {{"sep", "\t"}, {"header", false}, {"target", "2"}, {"types", {{"2", "category"}, {"1", "int"}}}});

  // A semicolon-separated file with decimals that round differently to float32.
  std::string semi = "x;y\n";
  for (int i = 0; i < 200; ++i) {
    semi += std::to_string(i) + "." + std::to_string((i * 7919) % 1000003) + "e-" + std::to_string(i % 30) + ";" +
            std::to_string(i % 3) + "\n";
  }
  write(dir / "semi.txt", semi);
  CsvOptions semi_options;
  semi_options.delimiter = ';';
  semi_options.target_column = "y";
  CsvDataset semis(dir / "semi.txt", semi_options);
  expect_equal_to_pandas(semis, {{"sep", ";"}, {"target", "y"}});
}

TEST(CsvDataset, ExamplesAreFeaturesAndTargetAndBatchesGatherRows) {
  TempDir dir;
  write(dir / "t.csv", "a,b,label\n1,2,0\n3,4,1\n5,6,2\n");
  CsvOptions options;
  options.target_column = "label";
  CsvDataset ds(dir / "t.csv", options);
  EXPECT_EQ(ds.feature_columns(), (std::vector<std::string>{"a", "b"}));
  const volt::Batch example = ds.get(1);
  ASSERT_EQ(example.size(), 2u);
  EXPECT_EQ(example[0].scalar_type(), at::kFloat);
  EXPECT_EQ(example[0].sizes(), (std::vector<int64_t>{2}));
  EXPECT_EQ(example[0][0].item<float>(), 3.0f);
  EXPECT_EQ(example[1].scalar_type(), at::kLong);
  EXPECT_EQ(example[1].dim(), 0);
  EXPECT_EQ(example[1].item<int64_t>(), 1);
  const volt::Batch batch = ds.get_batch({2, 0});
  EXPECT_EQ(batch[0].sizes(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(batch[0][0][1].item<float>(), 6.0f);
  EXPECT_EQ(batch[1][1].item<int64_t>(), 0);
  EXPECT_THROW(ds.get(3), volt::Error);
  EXPECT_THROW(ds.get(-1), volt::Error);

  CsvDataset features_only(dir / "t.csv");
  EXPECT_EQ(features_only.get(0).size(), 1u);
  EXPECT_EQ(features_only.get(0)[0].size(0), 3);
  EXPECT_FALSE(features_only.targets().defined());
}

TEST(CsvDataset, MissingValuesAreFilledGloballyOrPerColumn) {
  TempDir dir;
  write(dir / "m.csv", "a,b,c\n1,NA,x\n,2,\n3,null,y\n");
  CsvOptions options;
  options.column_types = {{"c", ColumnType::kCategory}};
  options.fill_value = -1;
  options.fill_values = {{"b", 0.5}};
  CsvDataset ds(dir / "m.csv", options);
  const at::Tensor f = ds.features();
  EXPECT_EQ(f[1][0].item<float>(), -1.0f);
  EXPECT_EQ(f[0][1].item<float>(), 0.5f);
  EXPECT_EQ(f[2][1].item<float>(), 0.5f);
  EXPECT_EQ(f[1][2].item<float>(), -1.0f);  // a missing category gets the fill as its code
  EXPECT_EQ(f[2][2].item<float>(), 1.0f);

  options.missing_values = {"", "?"};  // "NA" is now text, and text is not a number
  try {
    CsvDataset strict(dir / "m.csv", options);
    FAIL() << "NA accepted as a number";
  } catch (const volt::DataError& e) {
    EXPECT_NE(std::string(e.what()).find("line 2, column 'b' (2): 'NA' is not a number"), std::string::npos)
        << e.what();
  }
}

std::string error_of(const std::string& path, const CsvOptions& options = {}) {
  try {
    CsvDataset ds(path, options);
  } catch (const volt::Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CsvDataset, BadFieldsAreRefusedNamingFileLineAndColumn) {
  TempDir dir;
  const std::string p = dir / "bad.csv";
  auto expect_error = [&](const std::string& bytes, const std::string& expected, CsvOptions options = {}) {
    write(p, bytes);
    const std::string message = error_of(p, options);
    EXPECT_NE(message.find(expected), std::string::npos) << "file:\n" << bytes << "\nerror: " << message;
    EXPECT_NE(message.find(p), std::string::npos) << message;
  };
  // Lines count from the header; a quoted line break moves the next record's line down.
  CsvOptions names;
  names.column_types = {{"a", ColumnType::kCategory}};
  expect_error("a,b\n1,2\n\"x\ny\",3\n4,five\n", "line 5, column 'b' (2): 'five' is not a number", names);
  expect_error("a,b\n1,2\n\"x\ny\",3\n", "line 3, column 'a' (1): 'x\\ny' is not a number");
  expect_error("a,b\n1,2\n3,\n", "line 3, column 'b' (2) has no value");
  expect_error("a,b\n1,2\n3,4,5\n", "line 3 has 3 fields but the header (line 1) has 2");
  expect_error("a,b\n1,2\n3\n", "line 3 has 1 fields but the header (line 1) has 2");
  expect_error("a,b\n1,2\n\"3,4\n5,6\n", "line 3, field 1: the quoted field opened there is never closed");
  expect_error("a,b\n1,\"2\"x\n", "line 2, field 2: text follows the closing quote");
  expect_error("a,a\n1,2\n", "names the column 'a' twice (fields 1 and 2)");
  expect_error("a,b\n", "has a header (line 1) but no records");
  expect_error("\n\n", "holds no records");
  CsvOptions ints;
  ints.column_types = {{"b", ColumnType::kInt}};
  expect_error("a,b\n1,2\n3,4.5\n", "line 3, column 'b' (2): '4.5' is not a whole number", ints);
  expect_error("a,b\n1,99999999999999999999\n", "line 2, column 'b' (2): '99999999999999999999' does not fit", ints);
  CsvOptions unknown;
  unknown.target_column = "label";
  expect_error("a,b\n1,2\n", "the target column 'label' is not a column of", unknown);
  expect_error("a,b\n1,2\n", "Its columns are 'a', 'b'", unknown);
  CsvOptions both;
  both.target_column = "a";
  both.feature_columns = {"a", "b"};
  expect_error("a,b\n1,2\n", "'a' is both the target column and a feature column", both);
  CsvOptions cat_target;
  cat_target.target_column = "b";
  cat_target.column_types = {{"b", ColumnType::kCategory}};
  expect_error("a,b\n1,x\n2,\n", "line 3, column 'b' (2) has no value", cat_target);

  EXPECT_NE(error_of(dir / "absent.csv").find("does not exist"), std::string::npos);
  EXPECT_NE(error_of(dir.str()).find("is not a regular file"), std::string::npos);
  CsvOptions same;
  same.delimiter = '"';
  EXPECT_NE(error_of(p, same).find("cannot be a line break or the quote character"), std::string::npos);
}

}  // namespace
