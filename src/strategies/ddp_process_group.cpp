// DDPStrategy's rendezvous and process group: the store at MASTER_ADDR:MASTER_PORT, the
// layout check across ranks, and the Gloo or NCCL group.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <thread>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
// PyTorch's pip wheels ship c10d's Gloo header but not Gloo's own headers, which it includes: such a
// build has NCCL only (the gloo backend is refused when the process group is made, naming why).
#if __has_include(<gloo/algorithm.h>)
#define VOLT_HAS_GLOO_HEADERS 1
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef VOLT_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "volt/core/compat.h"
#if !VOLT_TORCH_VERSION_AT_LEAST(2, 3)
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#endif
#include "strategies/detail/ddp_impl.h"
#include "strategies/detail/rendezvous_net.h"
#include "volt/core/error.h"
#include "volt/strategies/ddp_strategy.h"

namespace volt::strategies {
namespace {

using detail::error_text;
using detail::is_loopback;
using detail::local_address_towards;
using detail::port_accepts;
using detail::resolve_error;

using Clock = std::chrono::steady_clock;

/// How often a waiting rank says whom it waits for.
constexpr std::chrono::seconds kWaitReportEvery{5};

long seconds_left(Clock::time_point deadline) {
  return static_cast<long>(
      std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::seconds>(deadline - Clock::now()).count()));
}

/// The process group of this process's last finished Trainer, kept for the next one (the
/// tuner's short fits, or fit then test in two Trainers), as torch.distributed keeps its default
/// group: a second group on the same MASTER_PORT would race the first one's close on the other
/// ranks (a rank still leaving the old store, or joining it as rank 0 closes it). Forked
/// children (another pid) never use their parent's; it is released at exit, before LibTorch's
/// statics go, or at once when a collective on it fails.
struct KeptGroup {
  std::string key;
  pid_t pid = 0;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroup> pg;
  std::unique_ptr<detail::LocalStoreLease> lease;
};

std::mutex& kept_mutex() {
  static std::mutex m;
  return m;
}
KeptGroup* kept = nullptr;  // owned; deleted by release_kept() or forget_kept_group()

void release_kept() noexcept {
  std::lock_guard<std::mutex> lock(kept_mutex());
  if (kept != nullptr && kept->pid == ::getpid()) delete kept;
  kept = nullptr;  // a forked child's copy is its parent's to close
}

}  // namespace

namespace detail {

void forget_kept_group(const c10::intrusive_ptr<c10d::ProcessGroup>& pg) noexcept {
  std::lock_guard<std::mutex> lock(kept_mutex());
  if (kept == nullptr || kept->pg != pg) return;
  if (kept->pid == ::getpid()) delete kept;
  kept = nullptr;
}

}  // namespace detail

void DDPStrategy::join_process_group() {
  // Kept for the next Trainer unless this process starts the ranks per Trainer (the subprocess
  // launcher, and the ranks it starts) or is a spawned worker (one stage each).
  const char* launched_by = std::getenv("VOLT_LAUNCHER");
  const bool keep = !subprocess_ && launcher_kind_ != LauncherKind::kSpawn &&
                    !(launched_by != nullptr && std::string(launched_by) == "subprocess");
  const std::string key = environment_->main_address() + ":" + std::to_string(environment_->main_port()) + " rank " +
                          std::to_string(global_rank_) + "/" + std::to_string(world_size_) + " " + options_.backend +
                          " " + std::to_string(options_.timeout.count()) + " " + environment_->store_prefix();
  if (keep) {
    std::lock_guard<std::mutex> lock(kept_mutex());
    if (kept != nullptr && kept->pid == ::getpid() && kept->key == key) {
      impl_->store = kept->store;
      impl_->pg = kept->pg;
      return;
    }
  }
  if (keep) release_kept();  // another job's (address, rank or world size differ)
  join_new_process_group();
  if (!keep) return;
  std::lock_guard<std::mutex> lock(kept_mutex());
  static const bool at_exit = std::atexit([] { release_kept(); }) == 0;
  (void)at_exit;
  kept = new KeptGroup{key, ::getpid(), impl_->store, impl_->pg, std::move(impl_->lease)};
}

void DDPStrategy::join_new_process_group() {
  const auto& env = *environment_;
  const std::string addr = env.main_address();
  const int port = env.main_port();
  const std::string where = addr + ":" + std::to_string(port);
  if (port <= 0 || port > 65535) {
    throw ConfigError("MASTER_PORT=" + std::to_string(port) + " is not a TCP port. Use a free port in 1..65535.");
  }
  if (const std::string why = resolve_error(addr); !why.empty()) {
    throw DistributedError(who() + ": MASTER_ADDR=" + addr + " does not resolve to an address (" + why +
                           "). Give rank 0's node as an IP address, or a name this host can look up (DNS, "
                           "/etc/hosts).");
  }
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(port);
  // Under torchrun's static rendezvous its agent already serves the store on this port.
  opts.isServer = global_rank_ == 0 && !env.joins_launcher_store();
  opts.numWorkers = static_cast<std::size_t>(world_size_);
  opts.waitWorkers = false;  // the layout check below waits, with a better message
  opts.timeout = options_.rendezvous_timeout;
#if VOLT_TORCH_VERSION_AT_LEAST(2, 1)
  opts.useLibUV = false;  // Debian's LibTorch 2.x has no libuv
#endif
  const auto deadline = Clock::now() + options_.rendezvous_timeout;
#if VOLT_TORCH_VERSION_AT_LEAST(2, 3)
  const bool file_store = false;
#else
  // LibTorch < 2.3's TCPStore listens on every interface and cannot be given a socket. When
  // every rank is on this host (a loopback MASTER_ADDR), a file store in a private folder
  // serves the rendezvous instead and nothing listens beyond the loopback address; a job
  // across hosts still gets the TCPStore (docs/robustness.md).
  const bool file_store = !env.joins_launcher_store() && is_loopback(addr);
  std::string store_file;
  if (file_store && opts.isServer) {
    impl_->lease = std::make_unique<detail::LocalStoreLease>();
    store_file = impl_->lease->open_as_rank0(who(), addr, port);
  }
#endif
  if (opts.isServer) {
#if VOLT_TORCH_VERSION_AT_LEAST(2, 3)
    // The store listens on MASTER_ADDR's address only (a loopback address stays local);
    // TCPStore takes over a socket bound here.
    const detail::ListenAddress only = detail::specific_listen_address(addr, port);
    if (only.family != AF_UNSPEC) {
      const int fd = detail::listen_on(only);
      if (fd >= 0) {
        opts.masterListenFd = fd;
      } else if (errno == EADDRINUSE) {
        throw DistributedError(who() + " could not open the rendezvous at " + where + ": " + std::strerror(errno) +
                               ". The port is in use (another job, or a previous run still exiting): set "
                               "MASTER_PORT to a free port, or leave it unset for a single-node job.");
      }
      // Another errno (the address is not this host's, e.g. behind NAT): every interface.
    }
#endif
  } else {
    // Rank 0 may start later: wait for its store, saying so every few seconds.
    auto next_report = Clock::now() + kWaitReportEvery;
    while (!port_accepts(addr, port)) {
      if (Clock::now() >= deadline) {
        throw DistributedError(who() + " waited " + std::to_string(options_.rendezvous_timeout.count() / 1000) +
                               " s for rank 0's rendezvous at " + where +
                               ", which never opened. Start rank 0 "
                               "(MASTER_ADDR must name its node), or raise rendezvous_timeout_s.");
      }
      if (Clock::now() >= next_report) {
        std::cerr << "volt: " << who() << " waits for rank 0 (the rendezvous at " << where << " is not open yet); "
                  << seconds_left(deadline) << " s left\n"
                  << std::flush;
        next_report += kWaitReportEvery;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
#if !VOLT_TORCH_VERSION_AT_LEAST(2, 3)
    if (file_store) {
      // Between two groups of this job (an earlier Trainer's rank 0 letting go of its lease) the port
      // may still accept while its pointer is gone: retry for a while until the next lease names its store.
      const auto retry_until = std::min(deadline, Clock::now() + std::chrono::seconds(10));
      for (;;) {
        try {
          store_file = detail::LocalStoreLease::store_path_for(who(), addr, port);
          break;
        } catch (const DistributedError&) {
          if (Clock::now() >= retry_until) throw;
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      }
    }
#endif
  }
  try {
#if !VOLT_TORCH_VERSION_AT_LEAST(2, 3)
    if (file_store) {
      auto files = c10::make_intrusive<c10d::FileStore>(store_file, static_cast<int>(world_size_));
      files->setTimeout(options_.rendezvous_timeout);
      impl_->store = files;
    } else {
      impl_->store = c10::make_intrusive<c10d::TCPStore>(addr, opts);
    }
#else
    (void)file_store;
    impl_->store = c10::make_intrusive<c10d::TCPStore>(addr, opts);
#endif
    if (env.joins_launcher_store()) {
      // The launcher's store outlives this job's process group: each group of this process
      // (a second Trainer, say) gets keys of its own, numbered alike on every rank.
      static std::atomic<int> groups{0};
      impl_->store = c10::make_intrusive<c10d::PrefixStore>(
          env.store_prefix() + "/volt_group_" + std::to_string(groups++), impl_->store);
    }
  } catch (const std::exception& e) {
    const std::string msg = error_text(e);
    if (opts.isServer) {
      throw DistributedError(who() + " could not open the rendezvous at " + where + ": " + msg +
                             ". The port may be in use (another job, or a previous run still exiting): set "
                             "MASTER_PORT to a free port, or leave it unset for a single-node job.");
    }
    throw DistributedError(who() + " could not reach the rendezvous at " + where + " within " +
                           std::to_string(options_.rendezvous_timeout.count() / 1000) + " s: " + msg +
                           ". Check that MASTER_ADDR/MASTER_PORT name rank 0's node, that it is running, and that "
                           "no firewall blocks the port.");
  }
  // Every rank announces its view of the job; a disagreement fails here, not as a hang.
  const std::string mine = std::to_string(world_size_) + " " + impl_->host + " " + std::to_string(::getpid());
  try {
    int64_t joined = impl_->store->add("volt/rank/" + std::to_string(global_rank_) + "/count", 1);
#if !VOLT_TORCH_VERSION_AT_LEAST(2, 3)
    // A rank that left the previous group of this job (an earlier Trainer, e.g. the tuner's) before
    // rank 0 let go of that group's lease reads the old store: once rank 0's pointer names a new
    // store, join that one. A second process with this RANK never sees the pointer change.
    const auto stale_until = std::min(deadline, Clock::now() + std::chrono::seconds(30));
    while (joined > 1 && file_store && !opts.isServer && Clock::now() < stale_until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      std::string next;
      try {
        if (port_accepts(addr, port)) next = detail::LocalStoreLease::store_path_for(who(), addr, port);
      } catch (const DistributedError&) {
        continue;  // between two leases: no pointer yet
      }
      if (next.empty() || next == store_file) continue;
      store_file = next;
      auto files = c10::make_intrusive<c10d::FileStore>(store_file, static_cast<int>(world_size_));
      files->setTimeout(options_.rendezvous_timeout);
      impl_->store = files;
      joined = impl_->store->add("volt/rank/" + std::to_string(global_rank_) + "/count", 1);
    }
#endif
    if (joined > 1) {
      throw DistributedError(who() + ": another process already joined " + where + " as rank " +
                             std::to_string(global_rank_) + ". Every process needs its own RANK.");
    }
    impl_->store->set("volt/rank/" + std::to_string(global_rank_), std::vector<uint8_t>(mine.begin(), mine.end()));
    // Wait for every rank's announcement; every few seconds, say who is missing.
    auto next_report = Clock::now() + kWaitReportEvery;
    std::vector<bool> checked(static_cast<size_t>(world_size_), false);
    for (;;) {
      std::vector<int64_t> missing;
      for (int64_t r = 0; r < world_size_; ++r) {
        if (checked[static_cast<size_t>(r)]) continue;
        const std::string key = "volt/rank/" + std::to_string(r);
        if (!impl_->store->check({key})) {
          missing.push_back(r);
          continue;
        }
        const std::vector<uint8_t> theirs = impl_->store->get(key);
        const std::string text(theirs.begin(), theirs.end());
        const int64_t their_size = std::stoll(text.substr(0, text.find(' ')));
        if (their_size != world_size_) {
          throw DistributedError(who() + " has WORLD_SIZE=" + std::to_string(world_size_) + " but rank " +
                                 std::to_string(r) + " (" + text.substr(text.find(' ') + 1) + ") has WORLD_SIZE=" +
                                 std::to_string(their_size) + ". Every rank must be started with the same world size.");
        }
        checked[static_cast<size_t>(r)] = true;
      }
      if (missing.empty()) break;
      raise_if_a_rank_failed();
      std::string names;
      for (size_t i = 0; i < missing.size() && i < 16; ++i) names += (i ? ", " : "") + std::to_string(missing[i]);
      if (missing.size() > 16) names += ", ... (" + std::to_string(missing.size()) + " in all)";
      const std::string whom =
          (missing.size() == 1 ? "rank " : "ranks ") + names + " of " + std::to_string(world_size_);
      if (Clock::now() >= deadline) {
        throw DistributedError(who() + " waited " + std::to_string(options_.rendezvous_timeout.count() / 1000) +
                               " s at " + where + " for " + whom +
                               ", which never joined. Start every rank, or "
                               "check WORLD_SIZE.");
      }
      if (Clock::now() >= next_report) {
        std::cerr << "volt: " << who() << " waits at " << where << " for " << whom << " (not joined yet); "
                  << seconds_left(deadline) << " s left\n"
                  << std::flush;
        next_report += kWaitReportEvery;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  } catch (const DistributedError&) {
    throw;
  } catch (const std::exception& e) {
    throw DistributedError(who() + ": rendezvous at " + where + " failed: " + error_text(e));
  }

#ifdef VOLT_WITH_NCCL
  if (options_.backend == "nccl") {
    try {
      auto nccl_opts = c10d::ProcessGroupNCCL::Options::create();
      nccl_opts->timeout = options_.timeout;
      auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(impl_->store, static_cast<int>(global_rank_),
                                                              static_cast<int>(world_size_), nccl_opts);
      auto pg = c10::make_intrusive<c10d::ProcessGroup>(impl_->store, static_cast<int>(global_rank_),
                                                        static_cast<int>(world_size_));
      pg->setDefaultBackend(c10d::ProcessGroup::BackendType::NCCL);
      pg->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL, nccl);
      impl_->pg = pg;
    } catch (const std::exception& e) {
      throw DistributedError(who() + " could not create the NCCL process group (" + where + "): " + error_text(e));
    }
    return;
  }
#endif
#ifndef VOLT_HAS_GLOO_HEADERS
  throw NotSupportedError(who() + ": backend '" + options_.backend + "' needs Gloo, and this Volt was built without "
                          "Gloo's headers (gloo/algorithm.h; a pip PyTorch ships none). Use backend='nccl' on "
                          "GPUs, or build Volt where Gloo's headers are installed (Debian: libgloo-dev).");
#else
  auto gloo_opts = c10d::ProcessGroupGloo::Options::create(options_.timeout);
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  try {
    if (ifname != nullptr && *ifname != '\0') {
      gloo_opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    } else if (is_loopback(addr)) {
      gloo_opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    } else {
      std::string local = local_address_towards(addr, port);
      if (local.empty()) local = impl_->host;
      gloo_opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(local));
    }
    gloo_opts->threads = 1;
    auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, static_cast<int>(global_rank_),
                                                            static_cast<int>(world_size_), gloo_opts);
#if VOLT_TORCH_VERSION_AT_LEAST(2, 0)
    auto pg = c10::make_intrusive<c10d::ProcessGroup>(impl_->store, static_cast<int>(global_rank_),
                                                      static_cast<int>(world_size_));
    pg->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
    pg->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, gloo);
    pg->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::GLOO, gloo);
    impl_->pg = pg;
#else
    impl_->pg = gloo;
#endif
  } catch (const std::exception& e) {
    throw DistributedError(who() + " could not connect the Gloo process group (" + where + ", world size " +
                           std::to_string(world_size_) + "): " + error_text(e) +
                           (ifname != nullptr ? ""
                                              : ". Set GLOO_SOCKET_IFNAME to the network interface the ranks "
                                                "share if this host has several."));
  }
#endif
}

}  // namespace volt::strategies
