#include "volt/profilers/advanced_profiler.h"

#include <algorithm>
#include <cmath>

#include "profilers/detail/table.h"
#include "volt/core/error.h"

namespace volt::profilers {

namespace {

/// The q-quantile of sorted values by linear interpolation between closest ranks (numpy's default).
double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0.0;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace

void AdvancedProfiler::setup(const std::string& stage, const std::string& log_dir, int64_t rank, int64_t world_size) {
  Profiler::setup(stage, log_dir, rank, world_size);
  for (Slot& s : slots_) s = Slot{};
}

void AdvancedProfiler::on_new_action(ActionId id) {
  if (slots_.size() <= id) slots_.resize(id + 1);
}

void AdvancedProfiler::on_start(ActionId id) {
  Slot& s = slots_[id];
  if (s.started_ns >= 0) {
    throw Error("profiler: start('" + action_name(id) + "') while it is already running; stop it first.");
  }
  s.started_ns = now_ns();
}

void AdvancedProfiler::on_stop(ActionId id) {
  const int64_t t = now_ns();
  Slot& s = slots_[id];
  if (s.started_ns < 0) {
    throw Error("profiler: stop('" + action_name(id) + "') but it was not started; call start first.");
  }
  s.durations_s.push_back(static_cast<double>(t - s.started_ns) * 1e-9);
  s.started_ns = -1;
}

AdvancedProfiler::Stats AdvancedProfiler::compute(ActionId id) const {
  Stats st;
  std::vector<double> d = slots_[id].durations_s;
  if (d.empty()) return st;
  std::sort(d.begin(), d.end());
  st.count = static_cast<int64_t>(d.size());
  for (double v : d) st.total_s += v;
  st.mean_s = st.total_s / static_cast<double>(d.size());
  double ss = 0.0;
  for (double v : d) ss += (v - st.mean_s) * (v - st.mean_s);
  st.stddev_s = d.size() > 1 ? std::sqrt(ss / static_cast<double>(d.size() - 1)) : 0.0;
  st.min_s = d.front();
  st.max_s = d.back();
  st.p50_s = quantile(d, 0.50);
  st.p90_s = quantile(d, 0.90);
  st.p99_s = quantile(d, 0.99);
  return st;
}

AdvancedProfiler::Stats AdvancedProfiler::stats(const std::string& action) const {
  for (ActionId id = 0; id < action_names().size(); ++id) {
    if (action_names()[id] == action) return compute(id);
  }
  return {};
}

std::string AdvancedProfiler::summary() const {
  std::vector<std::pair<ActionId, Stats>> rows;
  for (ActionId id = 0; id < slots_.size(); ++id) {
    if (!slots_[id].durations_s.empty()) rows.emplace_back(id, compute(id));
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.second.total_s > b.second.total_s; });
  detail::Table t({"Action", "Num calls", "Total (s)", "Mean (s)", "Stddev (s)", "Min (s)", "P50 (s)", "P90 (s)",
                   "P99 (s)", "Max (s)"});
  for (const auto& [id, s] : rows) {
    t.add({action_name(id), std::to_string(s.count), detail::fmt(s.total_s), detail::fmt(s.mean_s),
           detail::fmt(s.stddev_s), detail::fmt(s.min_s), detail::fmt(s.p50_s), detail::fmt(s.p90_s),
           detail::fmt(s.p99_s), detail::fmt(s.max_s)});
  }
  return detail::upper(stage()) + " Profiler Report (per-call statistics)\n\n" + t.render();
}

void AdvancedProfiler::teardown() {
  // The stage's figures stay readable (stats()) until the next setup().
  for (Slot& s : slots_) s.started_ns = -1;
}

}  // namespace volt::profilers
