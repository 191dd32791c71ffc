#pragma once
/// Every public header of volt/strategies/.
#include "volt/strategies/single_device_strategy.h"
#include "volt/strategies/single_xla_strategy.h"
#include "volt/strategies/strategy.h"
#include "volt/strategies/xla_gradient_sync.h"
