#pragma once
/// Every public header of volt/checkpoint_io/.
#include "volt/checkpoint_io/async_checkpoint_io.h"
#include "volt/checkpoint_io/checkpoint_io.h"
#include "volt/checkpoint_io/checkpoint_io_registry.h"
#include "volt/checkpoint_io/lightning_layout.h"
#include "volt/checkpoint_io/load_weights.h"
#include "volt/checkpoint_io/optimizer_state.h"
#include "volt/checkpoint_io/sharded_checkpoint.h"
#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/checkpoint_io/safetensors.h"
#include "volt/checkpoint_io/state_dict.h"
#include "volt/checkpoint_io/weights_file.h"
#include "volt/checkpoint_io/zip_integrity.h"
