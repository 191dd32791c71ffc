// read_idx: the IDX reader of the MNIST-format DataModule (plain or gzip-compressed files, as Debian
// installs Fashion-MNIST). The input is the file's bytes, compressed or not. An accepted file's
// tensor must have the shape and dtype its header announces.
#include <string>

#include <ATen/core/Tensor.h>

#include "fuzz_target.h"
#include "volt/core/error.h"
#include "volt/data/idx.h"

namespace {
constexpr const char* kTarget = "idx";
}  // namespace

VOLT_FUZZ_TARGET(idx) {
  const std::string path = volt::fuzz::scratch_path("input-idx3-ubyte");
  volt::fuzz::write_file(path, data, size);
  at::Tensor t;
  try {
    t = volt::data::read_idx(path);
  } catch (const volt::Error&) {
    return 0;
  } catch (const std::exception& e) {
    volt::fuzz::crash_on_exception(kTarget, e);
  }
  if (!t.defined() || t.dim() < 1 || !t.is_contiguous()) {
    volt::fuzz::crash(kTarget, "an accepted file gave an undefined, zero-dimensional or strided tensor");
  }
  return 0;
}
