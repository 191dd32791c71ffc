#pragma once
/// Every public header of volt/environments/.
#include "volt/environments/cluster_environment.h"
#include "volt/environments/default_environment.h"
#include "volt/environments/environment_registry.h"
#include "volt/environments/fixed_layout_environment.h"
#include "volt/environments/kubeflow_environment.h"
#include "volt/environments/lsf_environment.h"
#include "volt/environments/mpi_environment.h"
#include "volt/environments/slurm_environment.h"
#include "volt/environments/torchelastic_environment.h"
#include "volt/environments/torchelastic_error_file.h"
#include "volt/environments/xla_environment.h"
