#pragma once
// What comm_hooks.cpp takes from comm_hooks_powersgd.cpp.
#include <memory>

#include "volt/strategies/comm_hooks.h"

namespace volt::strategies::detail {

/// PowerSGD (comm_hooks_powersgd.cpp); `options` already checked.
std::shared_ptr<CommHook> make_powersgd_hook(const PowerSGDOptions& options);

}  // namespace volt::strategies::detail
