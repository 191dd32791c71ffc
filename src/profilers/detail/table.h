#pragma once
// The profilers' text tables: Lightning's layout (a row of | cells |, dashes above and below the header).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace volt::profilers::detail {

inline std::string fmt(double v, const char* f = "%.6g") {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

inline std::string upper(std::string s) {
  for (char& c : s) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return s;
}

class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)), width_(header_.size()) {
    widen(header_);
  }
  void add(std::vector<std::string> row) {
    row.resize(header_.size());
    widen(row);
    rows_.push_back(std::move(row));
  }
  std::string render() const {
    size_t line = 1;
    for (size_t w : width_) line += w + 5;
    const std::string dashes(line, '-');
    std::string out = dashes + "\n" + row(header_) + dashes + "\n";
    for (const auto& r : rows_) out += row(r);
    return out + dashes + "\n";
  }

 private:
  void widen(const std::vector<std::string>& r) {
    for (size_t i = 0; i < r.size(); ++i) width_[i] = std::max(width_[i], r[i].size());
  }
  std::string row(const std::vector<std::string>& r) const {
    std::string out = "|";
    for (size_t i = 0; i < r.size(); ++i) out += "  " + r[i] + std::string(width_[i] - r[i].size(), ' ') + "  |";
    return out + "\n";
  }
  std::vector<std::string> header_;
  std::vector<size_t> width_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace volt::profilers::detail
