#pragma once
/// Every public header of volt/cli/.
#include "volt/cli/cli.h"
