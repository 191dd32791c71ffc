#include "volt/strategies/launchers/worker_group.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fstream>
#include <iterator>
#include <mutex>
#include <thread>

#include "volt/core/error.h"

extern char** environ;

namespace volt::strategies::launchers {
namespace {

// Every worker of every group, for forward_signal (a signal handler cannot take locks).
constexpr size_t kMaxWorkers = 1024;
std::atomic<pid_t> g_workers[kMaxWorkers];

void register_worker(pid_t pid) {
  for (auto& slot : g_workers) {
    pid_t expected = 0;
    if (slot.compare_exchange_strong(expected, pid)) return;
  }
}

void unregister_worker(pid_t pid) {
  for (auto& slot : g_workers) {
    pid_t expected = pid;
    if (slot.compare_exchange_strong(expected, 0)) return;
  }
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

}  // namespace

std::string WorkerExit::describe() const {
  std::string out = "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ") on host " + host;
  if (signal != 0) {
    out += " was killed by " + signal_name(signal);
  } else {
    out += " exited with code " + std::to_string(exit_code);
  }
  if (stderr_tail.empty()) {
    out += "; it wrote nothing to stderr.";
  } else {
    out += "; its last lines of stderr:\n";
    for (const auto& line : stderr_tail) out += "  | " + line + "\n";
  }
  return out;
}

std::string WorkerGroup::host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown-host";
  return buf;
}

struct WorkerGroup::Impl {
  struct Worker {
    int64_t rank = 0;
    pid_t pid = 0;
    bool running = true;
    WorkerExit exit;
    std::deque<std::string> tail;
    std::string partial;
    bool eof = false;
    std::chrono::steady_clock::time_point eof_at{};
    /// finished() said it is done; the group ended it.
    bool released = false;
    std::thread reader;
  };

  std::chrono::milliseconds grace;
  size_t tail_lines;
  std::string host = WorkerGroup::host_name();
  mutable std::mutex mutex;
  std::condition_variable eof_cv;
  std::vector<std::unique_ptr<Worker>> workers;
  std::thread monitor_thread;
  std::atomic<bool> stop_monitor{false};

  void read_stderr(Worker* w, int fd) {
    char buf[4096];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      // Pass it through unchanged; keep the last lines for the failure report.
      ssize_t off = 0;
      while (off < n) {
        const ssize_t w_n = ::write(STDERR_FILENO, buf + off, static_cast<size_t>(n - off));
        if (w_n < 0 && errno == EINTR) continue;
        if (w_n <= 0) break;
        off += w_n;
      }
      std::lock_guard<std::mutex> lock(mutex);
      for (ssize_t i = 0; i < n; ++i) {
        if (buf[i] == '\n') {
          w->tail.push_back(std::move(w->partial));
          w->partial.clear();
          while (w->tail.size() > tail_lines) w->tail.pop_front();
        } else if (w->partial.size() < 4096) {
          w->partial.push_back(buf[i]);
        }
      }
    }
    ::close(fd);
    std::lock_guard<std::mutex> lock(mutex);
    if (!w->partial.empty()) {
      w->tail.push_back(std::move(w->partial));
      while (w->tail.size() > tail_lines) w->tail.pop_front();
    }
    w->eof = true;
    w->eof_at = std::chrono::steady_clock::now();
    eof_cv.notify_all();
  }

  /// Records an exit (mutex held).
  void record(Worker& w, int status) {
    w.running = false;
    unregister_worker(w.pid);
    w.exit.rank = w.rank;
    w.exit.pid = w.pid;
    w.exit.host = host;
    w.exit.ended_by_launcher = w.released;
    if (WIFSIGNALED(status)) {
      w.exit.signal = WTERMSIG(status);
      w.exit.exit_code = 128 + w.exit.signal;
    } else {
      w.exit.exit_code = WEXITSTATUS(status);
    }
  }

  /// Reaps what has exited; returns the first failure seen (its record) or nullptr. Of
  /// several found at once, the one whose stderr closed first: a rank's death makes its
  /// peers fail too, and the report names the cause, not an echo.
  Worker* poll() {
    std::lock_guard<std::mutex> lock(mutex);
    Worker* failed = nullptr;
    const auto closed_at = [](const Worker& w) {
      return w.eof ? w.eof_at : std::chrono::steady_clock::time_point::max();
    };
    for (auto& w : workers) {
      if (!w->running) continue;
      int status = 0;
      const pid_t r = ::waitpid(w->pid, &status, WNOHANG);
      if (r == w->pid) {
        record(*w, status);
        if (w->exit.failed() && (failed == nullptr || closed_at(*w) < closed_at(*failed))) failed = w.get();
      } else if (r < 0 && errno == ECHILD) {
        // Reaped elsewhere (a SIGCHLD handler of the program): nothing more to learn.
        w->running = false;
        unregister_worker(w->pid);
      }
    }
    return failed;
  }

  bool any_running() const {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& w : workers) {
      if (w->running) return true;
    }
    return false;
  }

  void signal_running(int sig) {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& w : workers) {
      if (w->running) ::kill(-w->pid, sig);
    }
  }

  void stop_all(int first_signal) {
    if (!any_running()) return;
    signal_running(first_signal);
    const auto deadline = std::chrono::steady_clock::now() + grace;
    while (any_running() && std::chrono::steady_clock::now() < deadline) {
      poll();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    signal_running(SIGKILL);
    while (any_running()) {
      poll();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    // Whatever a worker started in its process group goes with it.
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& w : workers) ::kill(-w->pid, SIGKILL);
  }

  WorkerExit finish_report(Worker& w) {
    std::unique_lock<std::mutex> lock(mutex);
    // The last lines may still be in the pipe when waitpid reports the exit.
    eof_cv.wait_for(lock, std::chrono::seconds(2), [&] { return w.eof; });
    WorkerExit e = w.exit;
    e.stderr_tail.assign(w.tail.begin(), w.tail.end());
    return e;
  }
};

WorkerGroup::WorkerGroup(std::chrono::milliseconds grace, size_t tail_lines) : impl_(std::make_unique<Impl>()) {
  impl_->grace = grace;
  impl_->tail_lines = tail_lines;
}

WorkerGroup::~WorkerGroup() {
  impl_->stop_monitor = true;
  if (impl_->monitor_thread.joinable()) impl_->monitor_thread.join();
  impl_->stop_all(SIGTERM);
  for (auto& w : impl_->workers) {
    if (w->reader.joinable()) w->reader.join();
  }
}

void WorkerGroup::start(const WorkerSpec& spec) {
  if (spec.argv.empty()) throw DistributedError("a worker needs a program to run; argv was empty.");
  // Everything the child needs is built before fork: after it only async-signal-safe calls.
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq != nullptr) env[std::string(*e, static_cast<size_t>(eq - *e))] = eq + 1;
  }
  for (const auto& [k, v] : spec.env) env[k] = v;
  std::vector<std::string> env_strings;
  env_strings.reserve(env.size());
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = spec.argv;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string exec_error = "volt: cannot execute " + args[0] + "\n";

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw DistributedError(std::string("cannot create a pipe for rank ") + std::to_string(spec.rank) +
                           "'s stderr: " + std::strerror(errno));
  }
  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    throw DistributedError("cannot start rank " + std::to_string(spec.rank) + " (" + args[0] +
                           "): fork failed: " + std::strerror(err));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() == parent) {  // else the launcher died before prctl: run nothing
      ::dup2(fds[1], STDERR_FILENO);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      ::sigaction(SIGINT, &dfl, nullptr);
      ::sigaction(SIGTERM, &dfl, nullptr);
      ::sigaction(SIGPIPE, &dfl, nullptr);
      ::execve(argv[0], argv.data(), envp.data());
      (void)!::write(STDERR_FILENO, exec_error.data(), exec_error.size());
    }
    // The forked copy of this process must not return into its code: the one exit in the
    // library (tests/layering checks that it stays the only one).
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here: no race with an early kill(-pid)
  ::close(fds[1]);
  register_worker(pid);
  auto w = std::make_unique<Impl::Worker>();
  w->rank = spec.rank;
  w->pid = pid;
  Impl::Worker* raw = w.get();
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->workers.push_back(std::move(w));
  }
  raw->reader = std::thread([this, raw, fd = fds[0]] { impl_->read_stderr(raw, fd); });
}

std::optional<WorkerExit> WorkerGroup::wait() {
  return wait([](int64_t) { return false; });
}

std::optional<WorkerExit> WorkerGroup::wait(const std::function<bool(int64_t rank)>& finished) {
  for (;;) {
    if (Impl::Worker* failed = impl_->poll()) {
      impl_->stop_all(SIGTERM);
      return impl_->finish_report(*failed);
    }
    if (!impl_->any_running()) return std::nullopt;
    {
      std::lock_guard<std::mutex> lock(impl_->mutex);
      for (auto& w : impl_->workers) {
        if (w->running && !w->released && finished(w->rank)) {
          // Done and flushed, it waits to be ended (as a pool ends its workers).
          w->released = true;
          ::kill(-w->pid, SIGKILL);
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void WorkerGroup::monitor(std::function<void(const WorkerExit&)> on_failure) {
  if (impl_->monitor_thread.joinable()) throw DistributedError("this worker group is already being monitored.");
  impl_->monitor_thread = std::thread([this, on_failure = std::move(on_failure)] {
    while (!impl_->stop_monitor) {
      if (Impl::Worker* failed = impl_->poll()) {
        impl_->stop_all(SIGTERM);
        on_failure(impl_->finish_report(*failed));
        return;
      }
      if (!impl_->any_running()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
}

std::optional<WorkerExit> WorkerGroup::failure(std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    impl_->poll();
    Impl::Worker* found = nullptr;
    {
      std::lock_guard<std::mutex> lock(impl_->mutex);
      for (auto& w : impl_->workers) {
        if (!w->running && w->exit.failed()) {
          found = w.get();
          break;
        }
      }
    }
    if (found != nullptr) return impl_->finish_report(*found);
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::vector<WorkerExit> WorkerGroup::wait_all(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (any_running() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  impl_->stop_all(SIGTERM);
  return exits();
}

bool WorkerGroup::any_running() {
  impl_->poll();
  return impl_->any_running();
}

void WorkerGroup::stop_all(int first_signal) {
  impl_->stop_all(first_signal);
}

void WorkerGroup::signal_all(int signal) {
  impl_->signal_running(signal);
}

size_t WorkerGroup::size() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->workers.size();
}

std::vector<WorkerExit> WorkerGroup::exits() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  std::vector<WorkerExit> out;
  for (const auto& w : impl_->workers) {
    if (!w->running) out.push_back(w->exit);
  }
  return out;
}

std::optional<WorkerExit> WorkerGroup::report(int64_t rank) {
  impl_->poll();
  Impl::Worker* found = nullptr;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    for (auto& w : impl_->workers) {
      if (w->rank == rank && !w->running) found = w.get();
    }
  }
  if (found == nullptr) return std::nullopt;
  return impl_->finish_report(*found);
}

void WorkerGroup::forward_signal(int signal) noexcept {
  for (auto& slot : g_workers) {
    const pid_t pid = slot.load(std::memory_order_relaxed);
    if (pid > 0) ::kill(-pid, signal);
  }
}

WorkerSpec torchrun_worker(std::vector<std::string> argv, int64_t node_rank, int64_t local_rank,
                           int64_t local_world_size, int64_t world_size, const std::string& master_addr,
                           int master_port, const std::string& launcher) {
  WorkerSpec spec;
  spec.rank = node_rank * local_world_size + local_rank;
  spec.argv = std::move(argv);
  spec.env = {{"MASTER_ADDR", master_addr},
              {"MASTER_PORT", std::to_string(master_port)},
              {"WORLD_SIZE", std::to_string(world_size)},
              {"RANK", std::to_string(spec.rank)},
              {"LOCAL_RANK", std::to_string(local_rank)},
              {"LOCAL_WORLD_SIZE", std::to_string(local_world_size)},
              {"GROUP_RANK", std::to_string(node_rank)},
              {"NODE_RANK", std::to_string(node_rank)},
              {"VOLT_LAUNCHER", launcher}};
  return spec;
}

std::vector<std::string> this_program_argv() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  std::string cur;
  for (char c : all) {
    if (c == '\0') {
      args.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  char exe[4096] = {};
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (args.empty()) args.emplace_back();
  // The executable itself, whatever the working directory or PATH of the worker.
  if (n > 0) args[0] = std::string(exe, static_cast<size_t>(n));
  return args;
}

}  // namespace volt::strategies::launchers
