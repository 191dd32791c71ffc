#pragma once
/// Every public header of volt/strategies/.
#include "volt/strategies/ddp_strategy.h"
#include "volt/strategies/single_device_strategy.h"
#include "volt/strategies/single_xla_strategy.h"
#include "volt/strategies/strategy.h"
#include "volt/strategies/strategy_registry.h"
#include "volt/strategies/worker_group.h"
#include "volt/strategies/xla_gradient_sync.h"
#include "volt/strategies/xla_strategy.h"
