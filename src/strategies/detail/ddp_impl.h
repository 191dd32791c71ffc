#pragma once
// DDPStrategy's c10d state and the helpers its two sources share: ddp_strategy.cpp (set-up,
// gradient sync, collectives) and ddp_process_group.cpp (rendezvous, process group).
#include <exception>
#include <memory>
#include <string>

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include "strategies/detail/rendezvous_net.h"
#include "volt/strategies/ddp_strategy.h"
#include "volt/strategies/launchers/worker_group.h"

namespace volt::strategies {

struct DDPStrategy::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroup> pg;
  std::unique_ptr<c10d::Reducer> reducer;
  /// The communication hook (DDPOptions::comm_hook or comm_hook_object), kept across stages.
  std::shared_ptr<CommHook> comm_hook;
  /// Rank 0's hold on MASTER_PORT while a file store serves the rendezvous (LibTorch < 2.3).
  std::unique_ptr<detail::LocalStoreLease> lease;
  bool sync = true;
  std::string host = launchers::WorkerGroup::host_name();
};

namespace detail {

/// Drops the process group kept for this process's next Trainer (ddp_process_group.cpp) when
/// it is `pg`: a failed collective leaves the ranks out of step, so the next Trainer joins anew.
void forget_kept_group(const c10::intrusive_ptr<c10d::ProcessGroup>& pg) noexcept;

/// The first line of a c10d or standard exception's message, without a closing full stop
/// (the caller's sentence goes on).
inline std::string error_text(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  std::string text = c10_error != nullptr ? c10_error->what_without_backtrace() : e.what();
  const auto nl = text.find('\n');
  if (nl != std::string::npos) text.resize(nl);
  while (!text.empty() && (text.back() == '.' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace detail
}  // namespace volt::strategies
