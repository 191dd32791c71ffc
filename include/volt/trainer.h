#pragma once
/// Every public header of volt/trainer/.
#include "volt/trainer/trainer.h"
