#pragma once
/// Every public header of volt/loops/.
#include "volt/loops/evaluation_loop.h"
#include "volt/loops/fit_loop.h"
#include "volt/loops/forward_pass.h"
#include "volt/loops/hooks.h"
#include "volt/loops/loop.h"
#include "volt/loops/prediction_loop.h"
#include "volt/loops/training_epoch_loop.h"
