// load_safetensors: the .safetensors reader (`volt inspect`, load_module_safetensors). The input is the
// file's bytes. An accepted file's tensors must match the header it was read from: every tensor
// defined, contiguous, on the CPU, and the data section exactly the sum of their sizes.
#include <string>

#include <ATen/core/Tensor.h>

#include "fuzz_target.h"
#include "volt/checkpoint_io/safetensors.h"
#include "volt/core/error.h"

namespace {
constexpr const char* kTarget = "safetensors";
}  // namespace

VOLT_FUZZ_TARGET(safetensors) {
  const std::string path = volt::fuzz::scratch_path("input.safetensors");
  volt::fuzz::write_file(path, data, size);
  volt::checkpoint_io::SafetensorsFile file;
  try {
    file = volt::checkpoint_io::load_safetensors(path);
  } catch (const volt::Error&) {
    return 0;
  } catch (const std::exception& e) {
    volt::fuzz::crash_on_exception(kTarget, e);
  }
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = (header << 8) | data[i];
  uint64_t bytes = 0;
  for (const auto& [name, t] : file.tensors) {
    if (!t.defined() || !t.is_contiguous() || !t.device().is_cpu()) {
      volt::fuzz::crash(kTarget, "tensor '" + name + "' is not a defined, contiguous CPU tensor");
    }
    const uint64_t n = static_cast<uint64_t>(t.numel()) * t.element_size();
    bytes += n;
  }
  if (8 + header + bytes != size) {
    volt::fuzz::crash(kTarget, "accepted a file of " + std::to_string(size) + " bytes whose header (" +
                                   std::to_string(header) + " bytes) and tensors (" + std::to_string(bytes) +
                                   " bytes) do not add up to it");
  }
  return 0;
}
