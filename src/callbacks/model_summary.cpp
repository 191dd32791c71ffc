#include "volt/callbacks/model_summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_set>
#include <utility>
#include <vector>

#include <torch/nn/module.h>

#include "volt/core/error.h"
#include "volt/core/module.h"

namespace volt::callbacks {
namespace {

struct Counts {
  int64_t trainable = 0;
  int64_t frozen = 0;
  double bytes = 0;
};

// Shared parameters appear once per owner in C++'s parameters(); Python dedupes them by
// identity and so do we, or tied embeddings would be counted twice.
Counts count_parameters(const torch::nn::Module& module) {
  Counts counts;
  std::unordered_set<const void*> seen;
  for (const auto& p : module.parameters(/*recurse=*/true)) {
    if (!p.defined() || !seen.insert(p.unsafeGetTensorImpl()).second) continue;
    (p.requires_grad() ? counts.trainable : counts.frozen) += p.numel();
    counts.bytes += static_cast<double>(p.numel()) * static_cast<double>(p.element_size());
  }
  return counts;
}

// "torch::nn::LinearImpl" -> "Linear"; namespaces inside template arguments stay.
std::string short_type(const std::string& full) {
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < full.size(); ++i) {
    const char c = full[i];
    if (c == '<' || c == '(') ++depth;
    if (c == '>' || c == ')') --depth;
    if (depth == 0 && c == ':' && i + 1 < full.size() && full[i + 1] == ':') start = i + 2;
  }
  std::string name = full.substr(start);
  const std::string impl = "Impl";
  if (name.size() > impl.size() &&
      name.compare(name.size() - impl.size(), impl.size(), impl) == 0) {
    name.resize(name.size() - impl.size());
  }
  return name;
}

// Lightning's get_human_readable_count: 55, 1.2 K, 123 K, 3.4 M.
std::string human_count(int64_t n) {
  static const char* const kUnits[] = {"", "K", "M", "B", "T"};
  if (n < 1000) return std::to_string(n);
  const int digits = static_cast<int>(std::floor(std::log10(static_cast<double>(n)))) + 1;
  const int groups = std::min((digits + 2) / 3, 5);
  const double scaled = static_cast<double>(n) / std::pow(10.0, 3 * (groups - 1));
  char buf[32];
  if (scaled >= 100) {
    std::snprintf(buf, sizeof(buf), "%d %s", static_cast<int>(scaled), kUnits[groups - 1]);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f %s", scaled, kUnits[groups - 1]);
  }
  return buf;
}

struct Row {
  std::string name;
  std::string type;
  std::string params;
};

void collect_rows(const torch::nn::Module& module, const std::string& prefix, int depth,
                  int max_depth, std::vector<Row>& rows) {
  if (max_depth >= 0 && depth > max_depth) return;
  for (const auto& child : module.named_children()) {
    const std::string name = prefix.empty() ? child.key() : prefix + "." + child.key();
    const auto counts = count_parameters(*child.value());
    rows.push_back({name, short_type(child.value()->name()),
                    human_count(counts.trainable + counts.frozen)});
    collect_rows(*child.value(), name, depth + 1, max_depth, rows);
  }
}

std::string pad(const std::string& s, size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

std::string rstrip(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

}  // namespace

std::string summarize(const torch::nn::Module& module, int max_depth) {
  std::vector<Row> rows;
  if (max_depth != 0) collect_rows(module, "", 1, max_depth, rows);

  std::vector<std::vector<std::string>> table;
  table.push_back({"", "Name", "Type", "Params"});
  for (size_t i = 0; i < rows.size(); ++i) {
    table.push_back({std::to_string(i), rows[i].name, rows[i].type, rows[i].params});
  }
  std::vector<size_t> widths(4, 0);
  for (const auto& line : table) {
    for (size_t c = 0; c < 4; ++c) widths[c] = std::max(widths[c], line[c].size());
  }
  std::vector<std::string> lines;
  for (const auto& line : table) {
    std::string text;
    for (size_t c = 0; c < 4; ++c) text += (c > 0 ? " | " : "") + pad(line[c], widths[c]);
    lines.push_back(text);
  }
  const std::string rule(lines.front().size(), '-');

  std::string out = rstrip(lines.front()) + "\n" + rule + "\n";
  for (size_t i = 1; i < lines.size(); ++i) out += rstrip(lines[i]) + "\n";
  if (lines.size() > 1) out += rule + "\n";

  const Counts counts = count_parameters(module);
  char size[32];
  std::snprintf(size, sizeof(size), "%.3f", counts.bytes / 1e6);
  out += pad(human_count(counts.trainable), 10) + "Trainable params\n";
  out += pad(human_count(counts.frozen), 10) + "Non-trainable params\n";
  out += pad(human_count(counts.trainable + counts.frozen), 10) + "Total params\n";
  out += pad(size, 10) + "Total estimated model params size (MB)\n";
  return out;
}

ModelSummary::ModelSummary(int max_depth, std::ostream* out) : max_depth_(max_depth), out_(out) {
  if (max_depth < -1) {
    throw ConfigError("ModelSummary got max_depth=" + std::to_string(max_depth) +
                      "; use -1 for all levels, 0 to print nothing, or a positive depth.");
  }
  if (out_ == nullptr) throw ConfigError("ModelSummary got a null output stream.");
}

void ModelSummary::on_fit_start(TrainerView& view) {
  if (max_depth_ == 0 || !view.state().is_global_zero) return;
  *out_ << summarize(view.module(), max_depth_) << std::flush;
}

}  // namespace volt::callbacks
