#include "volt/profilers/profiler.h"

#include <iostream>

#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/core/error.h"
#include "volt/profilers/advanced_profiler.h"
#include "volt/profilers/pytorch_profiler.h"
#include "volt/profilers/simple_profiler.h"

namespace volt::profilers {

ActionId Profiler::action_id(const std::string& action) {
  auto it = ids_.find(action);
  if (it != ids_.end()) return it->second;
  const auto id = static_cast<ActionId>(names_.size());
  names_.push_back(action);
  ids_.emplace(action, id);
  on_new_action(id);
  return id;
}

void Profiler::setup(const std::string& stage, const std::string& log_dir, int64_t rank, int64_t world_size) {
  stage_ = stage;
  log_dir_ = log_dir.empty() ? std::string(".") : log_dir;
  rank_ = rank;
  world_size_ = world_size;
}

std::string Profiler::report_path(const std::string& ext, const std::string& what) const {
  std::string name = stage_ + "-" + what;
  // Lightning names each process's file after its rank when several run.
  if (world_size_ > 1) name += "-" + std::to_string(rank_);
  return log_dir_ + "/" + name + ext;
}

void Profiler::describe() {
  const std::string text = summary();
  if (is_global_zero()) std::cout << "\n" << text << std::flush;
  const std::string path = report_path(".txt");
  checkpoint_io::atomic_write(path, text.data(), text.size());
}

ProfilerRegistry& profiler_registry() {
  static ProfilerRegistry* registry = [] {
    auto* r = new ProfilerRegistry("profiler");
    r->add("simple", "mean, count and total time of every action (Lightning's SimpleProfiler)",
           [] { return std::make_shared<SimpleProfiler>(); });
    r->add("advanced", "per-call statistics of every action: min, max, mean, stddev, p50/p90/p99",
           [] { return std::make_shared<AdvancedProfiler>(); });
    r->add("pytorch", "LibTorch operators over a wait/warmup/active schedule: Chrome trace and top operators",
           [] { return std::make_shared<PyTorchProfiler>(); });
    return r;
  }();
  return *registry;
}

void register_profiler(const std::string& key, std::string description, ProfilerRegistry::Factory factory) {
  if (key.empty()) throw ConfigError("register_profiler: the key is empty; \"\" means profiling off. Give a name.");
  if (!factory) throw ConfigError("register_profiler('" + key + "'): the factory is empty.");
  profiler_registry().add(key, std::move(description), std::move(factory));
}

std::shared_ptr<Profiler> make_profiler(const std::string& name) {
  if (name.empty()) return nullptr;
  auto p = profiler_registry().create(name);
  if (!p) throw ConfigError("the factory of profiler='" + name + "' returned no profiler.");
  return p;
}

}  // namespace volt::profilers
