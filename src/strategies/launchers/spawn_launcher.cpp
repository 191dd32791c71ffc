#include "volt/strategies/launchers/spawn_launcher.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

#include "volt/core/error.h"
#include "volt/core/file_check.h"
#include "volt/strategies/launchers/worker_group.h"

namespace volt::strategies::launchers {
namespace {

namespace fs = std::filesystem;

/// A folder only this user can read, removed when the guard goes.
class PrivateDir {
 public:
  explicit PrivateDir(const std::string& launcher) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/volt-spawn-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw Error("the " + launcher + " launcher could not create its hand-over folder " + pattern + " (" +
                  std::strerror(errno) + "). Set TMPDIR to a writable folder.");
    }
    path_ = pattern;
  }
  ~PrivateDir() {
    std::error_code ec;
    remove_tree(path_, ec);
  }
  PrivateDir(const PrivateDir&) = delete;
  PrivateDir& operator=(const PrivateDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// The file by which worker `rank` says it has handed back and flushed its output.
std::string done_marker(const std::string& dir, int64_t rank) {
  return dir + "/done." + std::to_string(rank);
}

/// The file by which worker `rank` says its stage threw, holding when (ns of the system
/// clock, the same for every worker on this host).
std::string failed_marker(const std::string& dir, int64_t rank) {
  return dir + "/failed." + std::to_string(rank);
}

void note_failure(const std::string& dir, int64_t rank) {
  const auto now =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::ofstream(failed_marker(dir, rank)) << now << "\n";
}

/// When worker `rank`'s stage threw (nullopt: it did not say so; it may have been killed).
std::optional<int64_t> failed_at(const std::string& dir, int64_t rank) {
  std::ifstream in(failed_marker(dir, rank));
  int64_t ns = 0;
  if (in >> ns) return ns;
  return std::nullopt;
}

/// Stage calls through spawn launchers in this process, parent and workers alike: the
/// parent's count names the call a worker runs (VOLT_SPAWN_CALL).
int64_t next_call() {
  static std::atomic<int64_t> calls{0};
  return ++calls;
}

}  // namespace

SpawnLauncher::SpawnLauncher(std::shared_ptr<environments::ClusterEnvironment> environment, int64_t local_world_size)
    : environment_(std::move(environment)), local_world_size_(local_world_size) {
  if (!environment_) throw ConfigError("the spawn launcher needs a cluster environment; it was given none.");
}

SpawnLauncher::~SpawnLauncher() = default;

void SpawnLauncher::launch(LaunchedStage& stage) {
  const int64_t call = next_call();
  if (!environment_->creates_processes_externally()) {
    launch_workers(stage, call);
    return;
  }
  const char* dir = std::getenv("VOLT_SPAWN_DIR");
  if (dir == nullptr || *dir == '\0') {
    throw ConfigError("the " + name() + " launcher spawns its own workers, but the " + environment_->name() +
                      " environment already started this process as rank " +
                      std::to_string(environment_->global_rank()) + ". Use strategy=\"ddp\" under a launcher.");
  }
  const char* target = std::getenv("VOLT_SPAWN_CALL");
  // An earlier (or later) stage call of the program: the parent runs it, not this worker.
  if (target == nullptr || std::to_string(call) != target) return;
  try {
    stage.run(dir);
    stage.hand_back(dir);
  } catch (...) {
    // For the parent's report: a rank whose stage failed first is the cause, the others'
    // errors (a peer closed the connection) its echo.
    note_failure(dir, environment_->global_rank());
    throw;
  }
  end_worker(dir);
}

void SpawnLauncher::launch_workers(LaunchedStage& stage, int64_t call) {
  PrivateDir dir(name());
  stage.save_start(dir.path());
  const std::vector<std::string> args = this_program_argv();
  WorkerGroup group;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    running_ = &group;
  }
  struct Forget {
    SpawnLauncher& self;
    ~Forget() {
      std::lock_guard<std::mutex> lock(self.mutex_);
      self.running_ = nullptr;
    }
  } forget{*this};
  const auto& env = *environment_;
  for (int64_t local = 0; local < local_world_size_; ++local) {
    WorkerSpec spec = torchrun_worker(args, env.node_rank(), local, local_world_size_, env.world_size(),
                                      env.main_address(), env.main_port(), worker_label());
    spec.env["VOLT_SPAWN_DIR"] = dir.path();
    spec.env["VOLT_SPAWN_CALL"] = std::to_string(call);
    group.start(spec);
  }
  const auto failure = group.wait([&](int64_t rank) {
    std::error_code ec;
    return fs::exists(done_marker(dir.path(), rank), ec);
  });
  if (failure) {
    WorkerExit cause = *failure;
    if (failed_at(dir.path(), failure->rank)) {
      // Its stage threw: the worker whose stage threw first is the one to name (a rank's
      // error ends its process group, and its peers' collectives fail in turn; which of
      // them exits first is chance).
      int64_t first_rank = failure->rank;
      int64_t first_at = *failed_at(dir.path(), failure->rank);
      for (int64_t local = 0; local < local_world_size_; ++local) {
        const int64_t rank = env.node_rank() * local_world_size_ + local;
        const auto at = failed_at(dir.path(), rank);
        if (at && *at < first_at) {
          first_at = *at;
          first_rank = rank;
        }
      }
      if (first_rank != failure->rank) {
        if (auto report = group.report(first_rank); report && report->failed()) cause = *report;
      }
    }
    throw DistributedError("a spawned worker failed, so the job was stopped: " + cause.describe());
  }
  stage.take_back(dir.path());
}

void SpawnLauncher::end_worker(const std::string& dir) const {
  // Everything this worker printed is out before the parent may end it.
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  const std::string marker = done_marker(dir, environment_->global_rank());
  const int fd = ::open(marker.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw DistributedError("spawned rank " + std::to_string(environment_->global_rank()) +
                           " handed its result back but could not tell the parent (" + marker + ": " +
                           std::strerror(errno) + ").");
  }
  ::close(fd);
  // The rest of the program is the parent's: wait here until the parent ends this worker
  // (it does once every worker is done) or dies (PR_SET_PDEATHSIG ends it then).
  for (;;) ::pause();
}

void SpawnLauncher::kill(int signal) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (running_ != nullptr) running_->stop_all(signal);
}

}  // namespace volt::strategies::launchers
