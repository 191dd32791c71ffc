#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "volt/data/dataset.h"

namespace volt::data {

/// How a CSV column's text becomes a number.
enum class ColumnType {
  /// A decimal or scientific number (strtod's syntax; "inf" and "nan" words are missing values, see
  /// CsvOptions::missing_values). Features: float32; target: a float32 scalar.
  kFloat,
  /// A whole number (optional sign, digits). Features: converted to float32; target: an int64 scalar.
  kInt,
  /// Any text; the value is the index of the text among the column's distinct values sorted as byte
  /// strings (pandas' `astype("category").cat.codes`). Target: an int64 scalar.
  kCategory,
};

struct CsvOptions {
  /// The field separator. 0: '\t' for files ending in .tsv or .tab, ',' otherwise.
  char delimiter = 0;
  /// Fields may be enclosed in this character (RFC 4180): inside, the delimiter and line breaks are
  /// text and a doubled quote is one quote character.
  char quote = '"';
  /// The first record names the columns. Without a header the columns are named "0", "1", ...
  bool header = true;
  /// The columns stacked into the features tensor, in this order. Empty: every column except the
  /// target, in file order.
  std::vector<std::string> feature_columns;
  /// The column that becomes the target. Empty: examples hold the features only.
  std::string target_column;
  /// Column types by name; a column not listed is kFloat, except the target, which defaults to
  /// target_type.
  std::map<std::string, ColumnType> column_types;
  /// The target column's type when column_types does not name it.
  ColumnType target_type = ColumnType::kInt;
  /// Field texts that mean "no value" (compared exactly, after removing surrounding spaces of
  /// numeric fields). The default is pandas' default na_values list.
  std::vector<std::string> missing_values = {"",     "#N/A",   "#N/A N/A", "#NA",  "-1.#IND", "-1.#QNAN", "-NaN",
                                             "-nan", "1.#IND", "1.#QNAN",  "<NA>", "N/A",     "NA",       "NULL",
                                             "NaN",  "None",   "n/a",      "nan",  "null"};
  /// A missing value in a selected column is replaced by this value (for a category column: the
  /// code, e.g. -1 as pandas' codes have it). Unset: a missing value is a DataError naming the
  /// file, line and column.
  std::optional<double> fill_value;
  /// Per-column fill values, taking precedence over fill_value.
  std::map<std::string, double> fill_values;
};

/// A map-style data set read from a CSV or TSV file: one example per record,
/// {features float32 [F], target scalar} (or {features} without a target column). The file is
/// read, checked and converted once, at construction; get() and get_batch() index the tensors.
///
/// Records are RFC 4180: quoted fields may hold the delimiter, line breaks and doubled quotes;
/// lines may end in CRLF; a UTF-8 byte order mark is skipped; empty lines are skipped (as pandas
/// skips them). Every refusal is a DataError (ConfigError for options that do not fit the file)
/// thrown by the constructor, naming the file and, for a bad field, the line (1-based, where the
/// record starts) and the column (name and 1-based position).
class CsvDataset : public Dataset {
 public:
  explicit CsvDataset(std::string path, CsvOptions options = {});

  int64_t size() const override { return features_.size(0); }
  Batch get(int64_t index) const override;
  Batch get_batch(const std::vector<int64_t>& indices) const override;

  /// Every column name of the file, in file order.
  const std::vector<std::string>& columns() const { return columns_; }
  /// The feature columns, in the order of the features tensor.
  const std::vector<std::string>& feature_columns() const { return feature_columns_; }
  /// All features [N, F] float32 and the targets [N] (float32 or int64; undefined without a target).
  const at::Tensor& features() const { return features_; }
  const at::Tensor& targets() const { return targets_; }
  /// A category column's values, sorted; the code of a value is its position. Throws ConfigError
  /// for a column that is not a selected category column.
  const std::vector<std::string>& categories(const std::string& column) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<std::string> columns_;
  std::vector<std::string> feature_columns_;
  std::map<std::string, std::vector<std::string>> categories_;
  at::Tensor features_;
  at::Tensor targets_;
  std::shared_ptr<TensorDataset> rows_;
};

}  // namespace volt::data
