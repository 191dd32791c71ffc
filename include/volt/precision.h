#pragma once
/// Every public header of volt/precision/.
#include "volt/precision/grad_scaler.h"
#include "volt/precision/mixed_precision.h"
#include "volt/precision/precision.h"
#include "volt/precision/precision_registry.h"
#include "volt/precision/true_precision.h"
