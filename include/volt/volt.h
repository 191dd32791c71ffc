#pragma once
/// Everything a Volt program uses: the module and data API, the Trainer, callbacks,
/// loggers, the tuner and the command-line helper. Lower-level parts (connectors, loops,
/// strategies) have their own umbrella headers.
#include "volt/callbacks.h"
#include "volt/cli.h"
#include "volt/core.h"
#include "volt/data.h"
#include "volt/loggers.h"
#include "volt/profilers.h"
#include "volt/trainer.h"
#include "volt/tuner.h"
