#include "volt/connectors/signal_connector.h"

#include <csignal>
#include <cstring>
#include <ctime>

#include <algorithm>
#include <cctype>

#include <sys/wait.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>

#include "volt/core/error.h"
#include "volt/core/numbers.h"
#include "volt/strategies/launchers/worker_group.h"

namespace volt::connectors {
namespace {

std::atomic<int> g_received{0};
std::atomic<int64_t> g_received_at_ns{0};
// False once the fit's connector is gone: a handler left behind for a signal that stopped
// the fit (see ~SignalConnector) then only absorbs that signal's late copies.
std::atomic<bool> g_active{false};
std::atomic<int> g_lingering_signal{0};
std::atomic<bool> g_copy_owed{false};
std::atomic<int64_t> g_owed_until_ns{0};
// What a signal did before Volt caught it, for the handler left behind to restore.
struct sigaction g_original[NSIG];

// The same signal twice within this window is one request that arrived twice.
constexpr int64_t kDuplicateWindowNs = 2'000'000'000;
// A rank that stopped because another rank received the signal still has its own copy coming
// (Slurm and srun deliver to a job's tasks one after another): it is absorbed this long after
// the fit.
constexpr int64_t kOwedCopyWindowNs = 10'000'000'000;

int64_t monotonic_ns() {  // clock_gettime is async-signal-safe
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

bool is_duplicate(int signal) {
  return signal == g_received.load() && monotonic_ns() - g_received_at_ns.load() < kDuplicateWindowNs;
}

extern "C" void on_signal(int signal) {
  if (!g_active.load()) {
    // Left behind by a fit this signal stopped: its late copy is absorbed (once, if this rank
    // never got its own; any within the duplicate window otherwise), anything else does what
    // it did before Volt caught it.
    if (signal == g_lingering_signal.load()) {
      bool owed = true;
      if (g_copy_owed.compare_exchange_strong(owed, false) && monotonic_ns() < g_owed_until_ns.load()) return;
      if (is_duplicate(signal)) return;
    }
    ::sigaction(signal, &g_original[signal], nullptr);
    std::raise(signal);  // delivered when this handler returns, with the original action
    return;
  }
  // Ranks this process started (ddp's subprocess launcher) get the signal too, so every
  // rank finishes its step and they agree to stop.
  strategies::launchers::WorkerGroup::forward_signal(signal);
  int expected = 0;
  if (g_received.compare_exchange_strong(expected, signal)) {
    g_received_at_ns.store(monotonic_ns());
    return;
  }
  // A signal sent to every process of a job (pkill, systemd stopping a unit, a terminal's
  // Ctrl-C to its process group) reaches a worker twice: directly and forwarded by the rank
  // that launched it. That is still one request to stop after the step.
  if (is_duplicate(signal)) return;
  // A second request while the first is being handled: the default action (terminate).
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

bool is_volt_handler(const struct sigaction& action) {
  return (action.sa_flags & SA_SIGINFO) == 0 && action.sa_handler == on_signal;
}

}  // namespace

SignalConnector::SignalConnector(std::vector<int> signals, RequeueSettings requeue)
    : requeue_(std::move(requeue)), signals_(std::move(signals)) {
  if (requeue_.signal != 0 && std::find(signals_.begin(), signals_.end(), requeue_.signal) == signals_.end()) {
    signals_.push_back(requeue_.signal);
  }
  // One fit at a time catches signals; a handler an earlier fit left behind is taken over.
  g_lingering_signal.store(0);
  g_copy_owed.store(false);
  g_received.store(0);
  g_active.store(true);
  for (int s : signals_) {
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    auto* old = new struct sigaction();
    if (sigaction(s, &action, old) != 0) {
      delete old;
      old = nullptr;
    } else if (is_volt_handler(*old)) {
      *old = g_original[s];  // left behind by an earlier fit: what was there before it
    }
    previous_.push_back(old);
  }
}

SignalConnector::~SignalConnector() {
  // The signal that stopped the fit may still be on its way to this process: another rank got
  // it first and this one stopped because they agreed. The handler stays for that signal and
  // absorbs the late copy (see on_signal); every other signal gets its previous action back.
  const int received = g_received.load();
  const int lingering = stopped_by_ != 0 ? stopped_by_ : received;
  for (size_t i = 0; i < signals_.size(); ++i) {
    if (previous_[i] == nullptr) continue;
    if (signals_[i] == lingering) {
      g_original[lingering] = *previous_[i];
    } else {
      sigaction(signals_[i], previous_[i], nullptr);
    }
    delete previous_[i];
  }
  if (lingering != 0) {
    g_owed_until_ns.store(monotonic_ns() + kOwedCopyWindowNs);
    g_copy_owed.store(received != lingering);
    g_lingering_signal.store(lingering);
  }
  g_active.store(false);
}

void SignalConnector::stopped_by(int signal) {
  stopped_by_ = signal;
}

int SignalConnector::received() const {
  return g_received.load(std::memory_order_relaxed);
}

std::string SignalConnector::name(int signal) {
  switch (signal) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGHUP: return "SIGHUP";
    case SIGALRM: return "SIGALRM";
    case SIGCONT: return "SIGCONT";
    default: return "signal " + std::to_string(signal);
  }
}

int SignalConnector::parse_signal(const std::string& text, const std::string& flag) {
  std::string name = text;
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (name.compare(0, 3, "SIG") != 0) name = "SIG" + name;
  for (int s : {SIGUSR1, SIGUSR2, SIGTERM, SIGINT, SIGHUP, SIGALRM, SIGCONT}) {
    if (SignalConnector::name(s) == name) return s;
  }
  if (!text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    const auto n = numbers::parse_int(text, 1, NSIG - 1);  // atoi had no overflow check
    if (n && *n.value != SIGKILL && *n.value != SIGSTOP) return static_cast<int>(*n.value);
  }
  throw ConfigError(flag + "='" + text + "' is not a signal Volt can catch. Use SIGUSR1 (SLURM's usual choice with "
                    "#SBATCH --signal=USR1@90), SIGUSR2, SIGTERM, SIGINT, SIGHUP, SIGALRM, SIGCONT or a number other "
                    "than 9 (SIGKILL) and 19 (SIGSTOP).");
}

RequeueSettings SignalConnector::slurm_requeue(const TrainerOptions& options, const std::string& cluster_env,
                                               const Environ& env) {
  RequeueSettings r;
  if (!options.slurm_auto_requeue || cluster_env != "slurm") return r;
  r.signal = parse_signal(options.slurm_requeue_signal, "slurm_requeue_signal");
  r.command = options.slurm_requeue_command;
  r.job_id = env.get_or("SLURM_JOB_ID", "");
  if (env.has("SLURM_ARRAY_JOB_ID") && env.has("SLURM_ARRAY_TASK_ID")) {
    // An array task requeues only itself.
    r.job_id = env.get_or("SLURM_ARRAY_JOB_ID", "") + "_" + env.get_or("SLURM_ARRAY_TASK_ID", "");
  }
  return r;
}

std::string SignalConnector::requeue() const {
  if (requeue_.job_id.empty()) {
    return "the job was not requeued: SLURM_JOB_ID is not set, so there is no job to requeue.";
  }
  // The id is digits and '_' when SLURM sets it; quote it anyway, it goes through a shell.
  std::string quoted = "'";
  for (char c : requeue_.job_id) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  quoted += "'";
  const std::string command = requeue_.command + " " + quoted;
  const int status = std::system(command.c_str());
  if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    return "requeued job " + requeue_.job_id + " (" + command + ").";
  }
  const std::string why = status == -1 ? "could not be started"
                          : WIFEXITED(status) ? "exited with status " + std::to_string(WEXITSTATUS(status))
                                              : "was killed";
  return "requeueing job " + requeue_.job_id + " failed: '" + command + "' " + why +
         ". Requeue it by hand (scontrol requeue " + requeue_.job_id + ") or check slurm_requeue_command.";
}

namespace {

/// n of "hpc_ckpt_<n>.ckpt", or -1.
int64_t hpc_number(const std::string& file) {
  const std::string prefix = "hpc_ckpt_", suffix = ".ckpt";
  if (file.size() <= prefix.size() + suffix.size() || file.compare(0, prefix.size(), prefix) != 0 ||
      file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return -1;
  }
  const std::string digits = file.substr(prefix.size(), file.size() - prefix.size() - suffix.size());
  if (digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return -1;
  }
  return std::stoll(digits);
}

std::pair<int64_t, std::string> highest_hpc(const std::string& root) {
  std::pair<int64_t, std::string> best{0, ""};
  std::error_code ec;
  for (std::filesystem::directory_iterator it(root.empty() ? "." : root, ec), end; !ec && it != end;
       it.increment(ec)) {
    const int64_t n = hpc_number(it->path().filename().string());
    if (n > best.first) best = {n, it->path().string()};
  }
  return best;
}

}  // namespace

std::string SignalConnector::requeue_checkpoint_path(const std::string& root) {
  const auto next = highest_hpc(root).first + 1;
  return (std::filesystem::path(root.empty() ? "." : root) / ("hpc_ckpt_" + std::to_string(next) + ".ckpt")).string();
}

std::string SignalConnector::latest_requeue_checkpoint(const std::string& root) {
  return highest_hpc(root).second;
}

}  // namespace volt::connectors
