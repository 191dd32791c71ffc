#pragma once
/// Every public header of volt/tuner/: the learning-rate and batch-size finders (volt::Tuner).
#include "volt/tuner/lr_finder_result.h"
#include "volt/tuner/tuner.h"
