#pragma once
/// Every public header of volt/environments/.
#include "volt/environments/cluster_environment.h"
#include "volt/environments/default_environment.h"
