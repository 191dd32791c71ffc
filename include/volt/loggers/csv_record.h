#pragma once
/// Reading metrics.csv back, for the CSVLogger (resuming into an existing file) and for
/// `volt plot`: one RFC 4180 record at a time. Header-only, no LibTorch.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace volt::loggers {

/// One record of `text` starting at `pos` ("a,\"b,\"\"c\"\"\",d": a / b,"c" / d); `pos` moves past its
/// line break (a CR before it is dropped). `lines` grows by the physical lines a quoted field
/// spans beyond its first. `unterminated` says the text ended inside a quoted field.
struct CsvRecord {
  std::vector<std::string> fields;
  int64_t extra_lines = 0;
  bool unterminated = false;
};

inline CsvRecord next_csv_record(const std::string& text, std::size_t& pos) {
  CsvRecord out;
  out.fields.emplace_back();
  bool quoted = false;
  std::size_t i = pos;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        out.fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        if (c == '\n') ++out.extra_lines;
        out.fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.fields.emplace_back();
    } else if (c == '\n') {
      ++i;
      break;
    } else if (c != '\r') {
      out.fields.back() += c;
    }
  }
  out.unterminated = quoted;
  pos = i;
  return out;
}

}  // namespace volt::loggers
