#pragma once
/// Every public header of volt/data/.
#include "volt/data/dataloader.h"
#include "volt/data/datamodule.h"
#include "volt/data/dataset.h"
#include "volt/data/idx.h"
#include "volt/data/image/decode.h"
#include "volt/data/image/image_folder.h"
#include "volt/data/image/transforms.h"
#include "volt/data/iterable_dataset.h"
#include "volt/data/mnist_datamodule.h"
#include "volt/data/sampler.h"
