// CsvDataset: CSV/TSV files (RFC 4180 quoting, header, types, missing values). The input's first byte chooses
// the options (header or not, the delimiter, a target column and its type, a category column, a fill value);
// the rest is the file. An accepted file's tensors must have one row per example and categories' codes must
// index their category lists.
#include <string>

#include <ATen/core/Tensor.h>

#include "fuzz_target.h"
#include "volt/core/error.h"
#include "volt/data/csv_dataset.h"

namespace {
constexpr const char* kTarget = "csv";
}  // namespace

VOLT_FUZZ_TARGET(csv) {
  if (size < 1) return 0;
  const uint8_t opts = data[0];
  const std::string path = volt::fuzz::scratch_path((opts & 0x03) == 1 ? "input.tsv" : "input.csv");
  volt::fuzz::write_file(path, data + 1, size - 1);
  volt::data::CsvOptions o;
  o.header = (opts & 0x04) == 0;
  static const char kDelimiters[] = {0, 0, ';', '|'};
  o.delimiter = kDelimiters[opts & 0x03];
  const std::string first = o.header ? "a" : "0";
  if (opts & 0x08) {
    o.target_column = first;
    static const volt::data::ColumnType kTypes[] = {volt::data::ColumnType::kInt, volt::data::ColumnType::kFloat,
                                                    volt::data::ColumnType::kCategory,
                                                    volt::data::ColumnType::kCategory};
    o.target_type = kTypes[(opts >> 4) & 0x03];
  } else if (opts & 0x10) {
    o.column_types[first] = volt::data::ColumnType::kCategory;
  }
  if (opts & 0x40) o.fill_value = -1;
  if (opts & 0x80) o.missing_values = {};
  try {
    volt::data::CsvDataset ds(path, o);
    const int64_t n = ds.size();
    const at::Tensor& f = ds.features();
    if (n < 1 || f.dim() != 2 || f.size(0) != n || f.size(1) != static_cast<int64_t>(ds.feature_columns().size()) ||
        f.size(1) < 1) {
      volt::fuzz::crash(kTarget, "an accepted file gave features of the wrong shape");
    }
    if (ds.targets().defined() && (ds.targets().dim() != 1 || ds.targets().size(0) != n)) {
      volt::fuzz::crash(kTarget, "an accepted file gave targets of the wrong shape");
    }
    if (!o.target_column.empty() && o.target_type == volt::data::ColumnType::kCategory) {
      const auto count = static_cast<int64_t>(ds.categories(o.target_column).size());
      const int64_t* t = ds.targets().data_ptr<int64_t>();
      for (int64_t i = 0; i < n; ++i) {
        if (t[i] >= count || (t[i] < 0 && t[i] != -1)) volt::fuzz::crash(kTarget, "a category code out of range");
      }
    }
    for (int64_t i = 0; i < std::min<int64_t>(n, 8); ++i) (void)ds.get(i);
  } catch (const volt::Error&) {
    return 0;
  } catch (const std::exception& e) {
    volt::fuzz::crash_on_exception(kTarget, e);
  }
  return 0;
}
