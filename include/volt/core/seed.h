#pragma once
#include <cstdint>

namespace volt {

/// Seeds LibTorch's CPU generator (and CUDA's when present) and C's rand, so that
/// initialisation, dropout and unseeded data orders repeat (Lightning's seed_everything).
void seed_everything(uint64_t seed);

}  // namespace volt
