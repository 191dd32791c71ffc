#pragma once
/// Every public header of volt/loggers/.
#include "volt/loggers/csv_logger.h"
#include "volt/loggers/csv_record.h"
#include "volt/loggers/delayed_buffer.h"
#include "volt/loggers/event_file.h"
#include "volt/loggers/logger.h"
#include "volt/loggers/logger_registry.h"
#include "volt/loggers/tensorboard_logger.h"
