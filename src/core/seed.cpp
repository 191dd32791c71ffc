#include "volt/core/seed.h"

#include <cstdlib>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>

namespace volt {

void seed_everything(uint64_t seed) {
  at::manual_seed(seed);  // CPU and, where built, every CUDA device
  std::srand(static_cast<unsigned>(seed));
}

}  // namespace volt
