#pragma once
/// Every public header of volt/profilers/.
#include "volt/profilers/advanced_profiler.h"
#include "volt/profilers/profiler.h"
#include "volt/profilers/pytorch_profiler.h"
#include "volt/profilers/simple_profiler.h"
