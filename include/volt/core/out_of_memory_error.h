#pragma once
#include "volt/core/error.h"

namespace volt {

/// A device ran out of memory: LibTorch's c10::OutOfMemoryError (what CUDA's caching allocator throws),
/// or a LibTorch error whose message starts with "CUDA out of memory", met at a public entry point
/// (to_volt_error makes it of this kind whatever the stage). The batch-size finder counts a trial that
/// ends in it as one that did not fit. (A header of its own, so that error.h, which every file includes,
/// stays as it is.)
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

}  // namespace volt
