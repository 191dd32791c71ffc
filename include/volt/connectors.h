#pragma once
/// Every public header of volt/connectors/.
#include "volt/connectors/accelerator_connector.h"
#include "volt/connectors/callback_connector.h"
#include "volt/connectors/checkpoint_connector.h"
#include "volt/connectors/data_connector.h"
#include "volt/connectors/logger_connector.h"
#include "volt/connectors/signal_connector.h"
