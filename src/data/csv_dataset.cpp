#include "volt/data/csv_dataset.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "volt/core/error.h"

namespace volt::data {
namespace {

struct Field {
  std::string text;
  bool quoted = false;
};

struct Record {
  int64_t line = 0;  // where the record starts, 1-based
  std::vector<Field> fields;
};

std::string quoted_path(const std::string& path) {
  return "'" + path + "'";
}

std::string show(std::string_view text) {
  constexpr size_t kMax = 40;
  std::string out = "'";
  for (char c : text.substr(0, kMax)) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += c;
    }
  }
  if (text.size() > kMax) out += "...";
  return out + "'";
}

std::string read_whole_file(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    throw DataError("CsvDataset: the file " + quoted_path(path) +
                    " does not exist. Pass the path of a CSV or TSV file.");
  }
  if (!std::filesystem::is_regular_file(status)) {
    throw DataError("CsvDataset: " + quoted_path(path) + " is not a regular file (a folder, device or FIFO). " +
                    "Pass the path of a CSV or TSV file.");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw DataError("CsvDataset: the file " + quoted_path(path) + " cannot be opened: " + std::strerror(errno) + ".");
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw DataError("CsvDataset: reading " + quoted_path(path) + " failed.");
  return std::move(buffer).str();
}

// RFC 4180 records: quoted fields hold delimiters, line breaks and doubled quotes; CRLF, LF and
// lone CR end a record; empty lines are skipped.
std::vector<Record> parse_records(const std::string& path, const std::string& data, char delimiter, char quote) {
  std::vector<Record> records;
  size_t pos = 0;
  const size_t n = data.size();
  if (n >= 3 && data.compare(0, 3, "\xEF\xBB\xBF") == 0) pos = 3;
  int64_t line = 1;
  auto at_line_end = [&](size_t p) { return p < n && (data[p] == '\n' || data[p] == '\r'); };
  auto skip_line_end = [&](size_t& p) {
    if (data[p] == '\r' && p + 1 < n && data[p + 1] == '\n') ++p;
    ++p;
    ++line;
  };
  while (pos < n) {
    if (at_line_end(pos)) {  // an empty line
      skip_line_end(pos);
      continue;
    }
    Record record;
    record.line = line;
    while (true) {
      Field field;
      if (data[pos] == quote) {
        field.quoted = true;
        const int64_t start_line = line;
        const size_t column = record.fields.size() + 1;
        ++pos;
        bool closed = false;
        while (pos < n) {
          const char c = data[pos];
          if (c == quote) {
            if (pos + 1 < n && data[pos + 1] == quote) {
              field.text += quote;
              pos += 2;
              continue;
            }
            ++pos;
            closed = true;
            break;
          }
          if (c == '\n' || (c == '\r' && !(pos + 1 < n && data[pos + 1] == '\n'))) ++line;
          field.text += c;
          ++pos;
        }
        if (!closed) {
          throw DataError("CsvDataset: " + quoted_path(path) + " line " + std::to_string(start_line) + ", field " +
                          std::to_string(column) + ": the quoted field opened there is never closed (no " +
                          std::string(1, quote) + " before the end of the file). Close the quote, or double " +
                          "the quote characters inside the field.");
        }
        if (pos < n && data[pos] != delimiter && !at_line_end(pos)) {
          throw DataError("CsvDataset: " + quoted_path(path) + " line " + std::to_string(line) + ", field " +
                          std::to_string(column) + ": text follows the closing quote (" +
                          show(std::string_view(data).substr(pos, 20)) +
                          "). A quoted field ends at its closing quote; write a quote inside it as two quotes.");
        }
      } else {
        const size_t start = pos;
        while (pos < n && data[pos] != delimiter && data[pos] != '\n' && data[pos] != '\r') ++pos;
        field.text.assign(data, start, pos - start);
      }
      record.fields.push_back(std::move(field));
      if (pos >= n) break;
      if (data[pos] == delimiter) {
        ++pos;
        if (pos >= n || at_line_end(pos)) {  // a trailing delimiter: one more, empty field
          record.fields.emplace_back();
          break;
        }
        continue;
      }
      break;  // a line end
    }
    if (pos < n) skip_line_end(pos);
    records.push_back(std::move(record));
  }
  return records;
}

std::string_view strip_spaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

const char* type_name(ColumnType type) {
  switch (type) {
    case ColumnType::kFloat:
      return "float";
    case ColumnType::kInt:
      return "int";
    case ColumnType::kCategory:
      return "category";
  }
  return "?";
}

struct Column {
  std::string name;
  size_t index = 0;  // position in the record
  ColumnType type = ColumnType::kFloat;
  std::optional<double> fill;
};

std::string list_names(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", '" : "'") + names[i] + "'";
  return out;
}

}  // namespace

CsvDataset::CsvDataset(std::string path, CsvOptions options) : path_(std::move(path)) {
  char delimiter = options.delimiter;
  if (delimiter == 0) {
    std::string lower = std::filesystem::path(path_).extension().string();
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    delimiter = lower == ".tsv" || lower == ".tab" ? '\t' : ',';
  }
  if (delimiter == '\n' || delimiter == '\r' || delimiter == options.quote) {
    throw ConfigError("CsvDataset: the delimiter " + show(std::string(1, delimiter)) +
                      " cannot be a line break or the quote character " + show(std::string(1, options.quote)) +
                      ". Use e.g. ',' or '\\t'.");
  }
  const std::string data = read_whole_file(path_);
  std::vector<Record> records = parse_records(path_, data, delimiter, options.quote);
  if (records.empty()) {
    throw DataError("CsvDataset: " + quoted_path(path_) + " holds no records (it is empty or only blank lines).");
  }

  size_t width = records.front().fields.size();
  size_t first_data = 0;
  if (options.header) {
    first_data = 1;
    std::set<std::string> seen;
    for (size_t i = 0; i < width; ++i) {
      std::string name = records.front().fields[i].text;
      if (name.empty()) name = "Unnamed: " + std::to_string(i);  // pandas' name for it
      if (!seen.insert(name).second) {
        throw DataError("CsvDataset: " + quoted_path(path_) + " line " + std::to_string(records.front().line) +
                        ": the header names the column '" + name + "' twice (fields " +
                        std::to_string(std::find(columns_.begin(), columns_.end(), name) - columns_.begin() + 1) +
                        " and " + std::to_string(i + 1) + "). Give every column its own name.");
      }
      columns_.push_back(std::move(name));
    }
  } else {
    for (size_t i = 0; i < width; ++i) columns_.push_back(std::to_string(i));
  }
  if (records.size() == first_data) {
    throw DataError("CsvDataset: " + quoted_path(path_) + " has a header (line " +
                    std::to_string(records.front().line) + ") but no records below it.");
  }

  auto column_index = [&](const std::string& name, const char* what) {
    auto it = std::find(columns_.begin(), columns_.end(), name);
    if (it == columns_.end()) {
      throw ConfigError("CsvDataset: the " + std::string(what) + " '" + name + "' is not a column of " +
                        quoted_path(path_) + ". Its columns are " + list_names(columns_) + ".");
    }
    return static_cast<size_t>(it - columns_.begin());
  };
  for (const auto& [name, type] : options.column_types) (void)type, column_index(name, "column in column_types");
  for (const auto& [name, value] : options.fill_values) (void)value, column_index(name, "column in fill_values");

  std::optional<size_t> target;
  if (!options.target_column.empty()) target = column_index(options.target_column, "target column");
  if (options.feature_columns.empty()) {
    for (size_t i = 0; i < columns_.size(); ++i)
      if (!target || i != *target) feature_columns_.push_back(columns_[i]);
  } else {
    std::set<std::string> seen;
    for (const auto& name : options.feature_columns) {
      column_index(name, "feature column");
      if (!seen.insert(name).second) {
        throw ConfigError("CsvDataset: feature_columns names '" + name + "' twice. Name each column once.");
      }
      if (target && name == options.target_column) {
        throw ConfigError("CsvDataset: '" + name + "' is both the target column and a feature column of " +
                          quoted_path(path_) + ". Leave it out of feature_columns.");
      }
      feature_columns_.push_back(name);
    }
  }
  if (feature_columns_.empty()) {
    throw ConfigError("CsvDataset: " + quoted_path(path_) + " has no column left for the features (its columns: " +
                      list_names(columns_) + ", target '" + options.target_column + "').");
  }

  auto make_column = [&](const std::string& name, bool is_target) {
    Column c;
    c.name = name;
    c.index = column_index(name, "column");
    auto type = options.column_types.find(name);
    c.type = type != options.column_types.end() ? type->second : is_target ? options.target_type : ColumnType::kFloat;
    auto fill = options.fill_values.find(name);
    c.fill = fill != options.fill_values.end() ? std::optional<double>(fill->second) : options.fill_value;
    if (c.fill && c.type != ColumnType::kFloat && std::nearbyint(*c.fill) != *c.fill) {
      throw ConfigError("CsvDataset: the fill value " + std::to_string(*c.fill) + " of the " + type_name(c.type) +
                        " column '" + name + "' is not a whole number. Give an integral fill value.");
    }
    return c;
  };
  std::vector<Column> features;
  for (const auto& name : feature_columns_) features.push_back(make_column(name, false));
  std::optional<Column> target_column;
  if (target) target_column = make_column(options.target_column, true);

  const std::set<std::string> missing(options.missing_values.begin(), options.missing_values.end());
  const auto rows = static_cast<int64_t>(records.size() - first_data);
  for (size_t r = first_data; r < records.size(); ++r) {
    if (records[r].fields.size() != width) {
      throw DataError("CsvDataset: " + quoted_path(path_) + " line " + std::to_string(records[r].line) + " has " +
                      std::to_string(records[r].fields.size()) + " fields but " +
                      (options.header ? "the header (line " + std::to_string(records.front().line) + ")"
                                      : "the first record (line " + std::to_string(records.front().line) + ")") +
                      " has " + std::to_string(width) +
                      ". Every record needs one field per column (quote fields that contain the delimiter).");
    }
  }

  auto where = [&](const Record& record, const Column& c) {
    return "CsvDataset: " + quoted_path(path_) + " line " + std::to_string(record.line) + ", column '" + c.name +
           "' (" + std::to_string(c.index + 1) + ")";
  };
  auto is_missing = [&](std::string_view text) { return missing.count(std::string(text)) > 0; };
  auto missing_error = [&](const Record& record, const Column& c, const Field& f) {
    return DataError(where(record, c) + " has no value (" + show(f.text) +
                     "). Fill the field, drop the record, or set CsvOptions::fill_value (or fill_values['" + c.name +
                     "']) to replace missing values.");
  };
  // Category codes: the distinct values of the column sorted as byte strings.
  auto category_codes = [&](const Column& c) {
    std::set<std::string> values;
    for (size_t r = first_data; r < records.size(); ++r) {
      const Field& f = records[r].fields[c.index];
      if (!is_missing(f.text)) values.insert(f.text);
    }
    categories_[c.name] = std::vector<std::string>(values.begin(), values.end());
    std::unordered_map<std::string, int64_t> codes;
    int64_t code = 0;
    for (const auto& v : values) codes.emplace(v, code++);
    return codes;
  };
  // Numeric fields: surrounding spaces are ignored, a leading '+' is accepted (as pandas does).
  auto numeric_text = [&](const Record& record, const Column& c, std::string_view* digits) {
    const Field& f = record.fields[c.index];
    std::string_view text = strip_spaces(f.text);
    if (is_missing(text)) {
      if (!c.fill) throw missing_error(record, c, f);
      return false;
    }
    *digits = text;
    if (text.size() > 1 && text.front() == '+' && text[1] != '-' && text[1] != '+') digits->remove_prefix(1);
    return true;
  };
  auto parse_int = [&](const Record& record, const Column& c) -> int64_t {
    std::string_view digits;
    if (!numeric_text(record, c, &digits)) return static_cast<int64_t>(*c.fill);
    int64_t value = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    const std::string_view text = strip_spaces(record.fields[c.index].text);
    if (ec == std::errc::result_out_of_range) {
      throw DataError(where(record, c) + ": " + show(text) + " does not fit in a 64-bit integer.");
    }
    if (ec != std::errc() || end != digits.data() + digits.size()) {
      throw DataError(where(record, c) + ": " + show(text) + " is not a whole number. Fix the field, or " +
                      "declare the column kFloat (column_types) if it holds fractions.");
    }
    return value;
  };
  auto parse_float = [&](const Record& record, const Column& c) -> double {
    std::string_view digits;
    if (!numeric_text(record, c, &digits)) return *c.fill;
    double value = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (ec == std::errc::result_out_of_range) {
      // from_chars reports overflow and underflow alike; strtod gives the inf or 0 pandas gives.
      value = std::strtod(std::string(digits).c_str(), nullptr);
    } else if (ec != std::errc() || end != digits.data() + digits.size()) {
      throw DataError(where(record, c) + ": " + show(strip_spaces(record.fields[c.index].text)) +
                      " is not a number. Fix the field, list it in missing_values, or declare the column " +
                      "kCategory (column_types) if it holds names.");
    }
    return value;
  };
  auto parse_double = [&](const Record& record, const Column& c) -> double {
    return c.type == ColumnType::kInt ? static_cast<double>(parse_int(record, c)) : parse_float(record, c);
  };

  features_ = at::empty({rows, static_cast<int64_t>(features.size())}, at::kFloat);
  float* out = features_.data_ptr<float>();
  for (const Column& c : features) {
    const size_t j = static_cast<size_t>(&c - features.data());
    const size_t stride = features.size();
    if (c.type == ColumnType::kCategory) {
      const auto codes = category_codes(c);
      for (size_t r = first_data; r < records.size(); ++r) {
        const Field& f = records[r].fields[c.index];
        float v;
        if (is_missing(f.text)) {
          if (!c.fill) throw missing_error(records[r], c, f);
          v = static_cast<float>(*c.fill);
        } else {
          v = static_cast<float>(codes.at(f.text));
        }
        out[(r - first_data) * stride + j] = v;
      }
    } else {
      for (size_t r = first_data; r < records.size(); ++r)
        out[(r - first_data) * stride + j] = static_cast<float>(parse_double(records[r], c));
    }
  }
  if (target_column) {
    const Column& c = *target_column;
    if (c.type == ColumnType::kFloat) {
      targets_ = at::empty({rows}, at::kFloat);
      float* t = targets_.data_ptr<float>();
      for (size_t r = first_data; r < records.size(); ++r)
        t[r - first_data] = static_cast<float>(parse_double(records[r], c));
    } else {
      targets_ = at::empty({rows}, at::kLong);
      int64_t* t = targets_.data_ptr<int64_t>();
      if (c.type == ColumnType::kCategory) {
        const auto codes = category_codes(c);
        for (size_t r = first_data; r < records.size(); ++r) {
          const Field& f = records[r].fields[c.index];
          if (is_missing(f.text)) {
            if (!c.fill) throw missing_error(records[r], c, f);
            t[r - first_data] = static_cast<int64_t>(*c.fill);
          } else {
            t[r - first_data] = codes.at(f.text);
          }
        }
      } else {
        for (size_t r = first_data; r < records.size(); ++r) t[r - first_data] = parse_int(records[r], c);
      }
    }
  }
  std::vector<at::Tensor> tensors{features_};
  if (targets_.defined()) tensors.push_back(targets_);
  rows_ = std::make_shared<TensorDataset>(std::move(tensors));
}

Batch CsvDataset::get(int64_t index) const {
  return rows_->get(index);
}

Batch CsvDataset::get_batch(const std::vector<int64_t>& indices) const {
  return rows_->get_batch(indices);
}

const std::vector<std::string>& CsvDataset::categories(const std::string& column) const {
  auto it = categories_.find(column);
  if (it == categories_.end()) {
    std::vector<std::string> names;
    for (const auto& [name, values] : categories_) (void)values, names.push_back(name);
    throw ConfigError("CsvDataset::categories: '" + column + "' is not a selected category column of " +
                      quoted_path(path_) +
                      (names.empty() ? std::string(" (it has none)") : ". Those are " + list_names(names)) + ".");
  }
  return it->second;
}

}  // namespace volt::data
