#include "volt/profilers/pytorch_profiler.h"

#include <ATen/record_function.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <map>
#include <mutex>

#include <unistd.h>

#include "profilers/detail/table.h"
#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/core/error.h"

namespace volt::profilers {

/// The events of one recording, filled by RecordFunction observers on any thread.
struct PyTorchProfiler::Recorder {
  int64_t origin_ns = 0;
  std::atomic<bool> keep{false};  ///< false during warmup: observers run, events are dropped
  at::CallbackHandle handle = 0;
  mutable std::mutex mutex;
  std::vector<Event> events;
};

struct PyTorchProfiler::Range {
  explicit Range(ActionId action) : id(action), rf(at::RecordScope::USER_SCOPE) {}
  ActionId id;
  at::RecordFunction rf;
};

namespace {

std::mutex g_active_mutex;
std::shared_ptr<PyTorchProfiler::Recorder> g_active;  // guarded by g_active_mutex

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Time spent in direct children of the open ranges of this thread, innermost last.
thread_local std::vector<int64_t> t_child_ns;
std::atomic<uint64_t> g_next_thread{1};
thread_local uint64_t t_thread = 0;

uint64_t this_thread_id() {
  if (t_thread == 0) t_thread = g_next_thread++;
  return t_thread;
}

struct RangeContext : at::ObserverContext {
  std::shared_ptr<PyTorchProfiler::Recorder> recorder;
  int64_t start_ns = 0;
  size_t depth = 0;
};

const char* category_of(at::RecordScope scope) {
  switch (scope) {
    case at::RecordScope::FUNCTION:
      return "cpu_op";
    case at::RecordScope::BACKWARD_FUNCTION:
      return "autograd";
    case at::RecordScope::USER_SCOPE:
      return "user_annotation";
    default:
      return "other";
  }
}

std::unique_ptr<at::ObserverContext> on_range_start(const at::RecordFunction&) {
  auto ctx = std::make_unique<RangeContext>();
  {
    std::lock_guard<std::mutex> lock(g_active_mutex);
    ctx->recorder = g_active;
  }
  if (!ctx->recorder) return nullptr;
  ctx->depth = t_child_ns.size();
  t_child_ns.push_back(0);
  ctx->start_ns = steady_ns();
  return ctx;
}

void on_range_end(const at::RecordFunction& fn, at::ObserverContext* raw) {
  const int64_t end = steady_ns();
  auto* ctx = static_cast<RangeContext*>(raw);
  if (ctx == nullptr || !ctx->recorder) return;
  const int64_t duration = end - ctx->start_ns;
  int64_t children = 0;
  if (ctx->depth < t_child_ns.size()) {
    children = t_child_ns[ctx->depth];
    t_child_ns.resize(ctx->depth);
  }
  if (!t_child_ns.empty()) t_child_ns.back() += duration;
  auto& rec = *ctx->recorder;
  if (!rec.keep.load(std::memory_order_relaxed)) return;
  PyTorchProfiler::Event e{fn.name() ? fn.name() : "",
                           category_of(fn.scope()),
                           this_thread_id(),
                           ctx->start_ns - rec.origin_ns,
                           duration,
                           std::max<int64_t>(0, duration - children)};
  std::lock_guard<std::mutex> lock(rec.mutex);
  rec.events.push_back(std::move(e));
}

}  // namespace

PyTorchProfiler::PyTorchProfiler(PyTorchProfilerOptions options) : options_(options) {
  if (options_.wait < 0 || options_.warmup < 0 || options_.active < 1 || options_.row_limit < 1) {
    throw ConfigError("PyTorchProfiler schedule wait=" + std::to_string(options_.wait) +
                      " warmup=" + std::to_string(options_.warmup) + " active=" + std::to_string(options_.active) +
                      " row_limit=" + std::to_string(options_.row_limit) +
                      " is not valid: wait and warmup must be 0 or more, active and row_limit 1 or more.");
  }
}

PyTorchProfiler::~PyTorchProfiler() {
  open_.clear();
  stop_recorder();
}

void PyTorchProfiler::setup(const std::string& stage, const std::string& log_dir, int64_t rank, int64_t world_size) {
  Profiler::setup(stage, log_dir, rank, world_size);
  steps_ = 0;
  stop_recorder();
  recorder_.reset();
  update_recording();
}

void PyTorchProfiler::start_recorder(bool keep) {
  if (recorder_ && recorder_->handle != 0) {
    recorder_->keep = keep;
    return;
  }
  {
    std::lock_guard<std::mutex> lock(g_active_mutex);
    if (g_active) {
      throw Error(
          "a pytorch profiler is already recording in this process; one records at a time. Use one "
          "Trainer with profiler=\"pytorch\" at a time.");
    }
    recorder_ = std::make_shared<Recorder>();
    recorder_->origin_ns = steady_ns();
    recorder_->keep = keep;
    g_active = recorder_;
  }
  recorder_->handle = at::addGlobalCallback(
      at::RecordFunctionCallback(&on_range_start, &on_range_end)
          .needsInputs(false)
          .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION, at::RecordScope::USER_SCOPE}));
}

void PyTorchProfiler::stop_recorder() {
  if (!recorder_ || recorder_->handle == 0) return;
  at::removeCallback(recorder_->handle);
  recorder_->handle = 0;
  recorder_->keep = false;
  std::lock_guard<std::mutex> lock(g_active_mutex);
  if (g_active == recorder_) g_active.reset();
}

void PyTorchProfiler::update_recording() {
  const int64_t warm_from = options_.wait;
  const int64_t active_from = warm_from + options_.warmup;
  const int64_t done_at = active_from + options_.active;
  if (steps_ < warm_from) return;
  if (steps_ < active_from) {
    start_recorder(/*keep=*/false);
  } else if (steps_ < done_at) {
    start_recorder(/*keep=*/true);
  } else {
    stop_recorder();
  }
}

void PyTorchProfiler::step() {
  ++steps_;
  update_recording();
}

void PyTorchProfiler::on_start(ActionId id) {
  auto range = std::make_unique<Range>(id);
  // Active only while a recorder (this or another RecordFunction observer) listens; the
  // range ends when it is destroyed in on_stop.
  if (range->rf.isActive()) range->rf.before(action_name(id));
  open_.push_back(std::move(range));
}

void PyTorchProfiler::on_stop(ActionId id) {
  for (auto it = open_.rbegin(); it != open_.rend(); ++it) {
    if ((*it)->id != id) continue;
    open_.erase(std::next(it).base());
    return;
  }
  throw Error("profiler: stop('" + action_name(id) + "') but it was not started; call start first.");
}

std::vector<PyTorchProfiler::Event> PyTorchProfiler::events() const {
  if (!recorder_) return {};
  std::lock_guard<std::mutex> lock(recorder_->mutex);
  auto out = recorder_->events;
  std::sort(out.begin(), out.end(), [](const Event& a, const Event& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.duration_ns > b.duration_ns;
  });
  return out;
}

std::string PyTorchProfiler::chrome_trace() const {
  nlohmann::json trace_events = nlohmann::json::array();
  const int pid = static_cast<int>(::getpid());
  for (const Event& e : events()) {
    trace_events.push_back({{"ph", "X"},
                            {"name", e.name},
                            {"cat", e.category},
                            {"pid", pid},
                            {"tid", e.thread},
                            {"ts", static_cast<double>(e.start_ns) * 1e-3},
                            {"dur", static_cast<double>(e.duration_ns) * 1e-3},
                            {"args", {{"self_us", static_cast<double>(e.self_ns) * 1e-3}}}});
  }
  nlohmann::json doc = {
      {"traceEvents", std::move(trace_events)},
      {"displayTimeUnit", "ms"},
      {"otherData",
       {{"producer", "volt PyTorchProfiler"},
        {"stage", stage()},
        {"schedule", {{"wait", options_.wait}, {"warmup", options_.warmup}, {"active", options_.active}}}}}};
  // Operator names are ASCII; a user's action name with invalid UTF-8 is replaced, not fatal.
  return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string PyTorchProfiler::summary() const {
  struct Row {
    const char* category = "";
    int64_t calls = 0, self_ns = 0, total_ns = 0;
  };
  std::map<std::string, Row> rows;
  int64_t all_self = 0;
  for (const Event& e : events()) {
    Row& r = rows[e.name];
    r.category = e.category;
    ++r.calls;
    r.self_ns += e.self_ns;
    r.total_ns += e.duration_ns;
    all_self += e.self_ns;
  }
  std::vector<std::pair<std::string, Row>> sorted(rows.begin(), rows.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second.self_ns > b.second.self_ns; });
  detail::Table t({"Name", "Kind", "Self CPU %", "Self CPU (ms)", "CPU total (ms)", "Calls"});
  const size_t n = std::min(sorted.size(), static_cast<size_t>(options_.row_limit));
  for (size_t i = 0; i < n; ++i) {
    const Row& r = sorted[i].second;
    t.add({sorted[i].first, r.category,
           detail::fmt(all_self ? 100.0 * static_cast<double>(r.self_ns) / static_cast<double>(all_self) : 0.0, "%.2f"),
           detail::fmt(static_cast<double>(r.self_ns) * 1e-6, "%.3f"),
           detail::fmt(static_cast<double>(r.total_ns) * 1e-6, "%.3f"), std::to_string(r.calls)});
  }
  const int64_t recorded = std::max<int64_t>(
      0, std::min(steps_, options_.wait + options_.warmup + options_.active) - options_.wait - options_.warmup);
  return detail::upper(stage()) + " PyTorch Profiler Report: top " + std::to_string(n) + " of " +
         std::to_string(rows.size()) + " names by self time, " + std::to_string(recorded) + " of " +
         std::to_string(options_.active) + " active steps recorded (schedule wait=" + std::to_string(options_.wait) +
         " warmup=" + std::to_string(options_.warmup) + " active=" + std::to_string(options_.active) + ")\n\n" +
         t.render();
}

void PyTorchProfiler::describe() {
  stop_recorder();
  Profiler::describe();
  const std::string trace = chrome_trace();
  const std::string path = report_path(".json", "trace");
  checkpoint_io::atomic_write(path, trace.data(), trace.size());
  if (is_global_zero())
    std::cout << "volt: Chrome trace written to " << path
              << " (open it in https://ui.perfetto.dev or chrome://tracing)\n";
}

void PyTorchProfiler::teardown() {
  stop_recorder();
}

}  // namespace volt::profilers
