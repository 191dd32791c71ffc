#include "volt/profilers/simple_profiler.h"

#include <algorithm>
#include <cstdio>

#include "profilers/detail/table.h"
#include "volt/core/error.h"

namespace volt::profilers {

void SimpleProfiler::setup(const std::string& stage, const std::string& log_dir, int64_t rank, int64_t world_size) {
  Profiler::setup(stage, log_dir, rank, world_size);
  for (Slot& s : slots_) s = Slot{};
  setup_ns_ = now_ns();
}

void SimpleProfiler::on_new_action(ActionId id) {
  if (slots_.size() <= id) slots_.resize(id + 1);
}

void SimpleProfiler::on_start(ActionId id) {
  Slot& s = slots_[id];
  if (s.started_ns >= 0) {
    throw Error("profiler: start('" + action_name(id) + "') while it is already running; stop it first.");
  }
  s.started_ns = now_ns();
}

void SimpleProfiler::on_stop(ActionId id) {
  const int64_t t = now_ns();
  Slot& s = slots_[id];
  if (s.started_ns < 0) {
    throw Error("profiler: stop('" + action_name(id) + "') but it was not started; call start first.");
  }
  s.total_ns += t - s.started_ns;
  ++s.count;
  s.started_ns = -1;
}

SimpleProfiler::Stats SimpleProfiler::stats(const std::string& action) const {
  for (ActionId id = 0; id < action_names().size(); ++id) {
    if (action_names()[id] == action) return Stats{slots_[id].count, static_cast<double>(slots_[id].total_ns) * 1e-9};
  }
  return {};
}

double SimpleProfiler::elapsed_s() const {
  return static_cast<double>(now_ns() - setup_ns_) * 1e-9;
}

std::string SimpleProfiler::summary() const {
  const double total = elapsed_s();
  std::vector<ActionId> ids;
  int64_t calls = 0;
  for (ActionId id = 0; id < slots_.size(); ++id) {
    if (slots_[id].count == 0) continue;
    ids.push_back(id);
    calls += slots_[id].count;
  }
  std::stable_sort(ids.begin(), ids.end(),
                   [&](ActionId a, ActionId b) { return slots_[a].total_ns > slots_[b].total_ns; });
  detail::Table t({"Action", "Mean duration (s)", "Num calls", "Total time (s)", "Percentage %"});
  t.add({"Total", "-", std::to_string(calls), detail::fmt(total), "100 %"});
  for (ActionId id : ids) {
    const Slot& s = slots_[id];
    const double sec = static_cast<double>(s.total_ns) * 1e-9;
    t.add({action_name(id), detail::fmt(sec / static_cast<double>(s.count)), std::to_string(s.count), detail::fmt(sec),
           detail::fmt(total > 0 ? 100.0 * sec / total : 0.0, "%.3f") + " %"});
  }
  return detail::upper(stage()) + " Profiler Report\n\n" + t.render();
}

void SimpleProfiler::teardown() {
  // The stage's figures stay readable (stats()) until the next setup().
  for (Slot& s : slots_) s.started_ns = -1;
}

}  // namespace volt::profilers
