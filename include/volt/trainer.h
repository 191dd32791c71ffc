#pragma once
/// Every public header of volt/trainer/.
#include "volt/trainer/plugins.h"
#include "volt/trainer/trainer.h"
