#pragma once
/// Every public header of volt/precision/.
#include "volt/precision/precision.h"
