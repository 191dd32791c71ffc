#pragma once
/// Every public header of volt/callbacks/.
#include "volt/callbacks/batch_size_finder.h"
#include "volt/callbacks/callback.h"
#include "volt/callbacks/device_stats_monitor.h"
#include "volt/callbacks/early_stopping.h"
#include "volt/callbacks/histogram_monitor.h"
#include "volt/callbacks/learning_rate_finder.h"
#include "volt/callbacks/lr_monitor.h"
#include "volt/callbacks/model_checkpoint.h"
#include "volt/callbacks/model_summary.h"
#include "volt/callbacks/progress_bar.h"
