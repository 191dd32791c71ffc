#pragma once
/// Every public header of volt/loggers/.
#include "volt/loggers/csv_logger.h"
#include "volt/loggers/logger.h"
