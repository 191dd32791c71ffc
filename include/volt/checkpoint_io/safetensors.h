#pragma once
/// Weights in the .safetensors format (the Hugging Face layout): an 8-byte
/// little-endian header length N, N bytes of JSON naming each tensor's dtype, shape and
/// byte range, then the raw little-endian tensor bytes. No code runs on load, so it is
/// the format to exchange weights with Python (safetensors, numpy) and other tools.
#include <map>
#include <string>

#include <ATen/core/Tensor.h>

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace volt::checkpoint_io {

/// The contents of a .safetensors file.
struct SafetensorsFile {
  /// Tensors by name, as CPU tensors that own their memory.
  std::map<std::string, at::Tensor> tensors;
  /// The optional "__metadata__" string map of the header.
  std::map<std::string, std::string> metadata;
};

/// The format's dtype code for a scalar type ("F32", "F64", "F16", "BF16", "I64", "I32",
/// "I16", "I8", "U8", "BOOL"), or "" when the format (as Volt writes it) has none.
std::string safetensors_dtype_name(at::ScalarType type);

/// Writes `tensors` (any device; strided layout; dtypes as in safetensors_dtype_name)
/// and `metadata` to `path` as a .safetensors file. The header is padded with spaces to
/// a multiple of 8 bytes; tensor data follows in key order without gaps. The file is
/// written atomically (temporary file, fsync, rename). Throws CheckpointError naming
/// the path, and the tensor and dtype when a dtype has no safetensors code.
void save_safetensors(const std::map<std::string, at::Tensor>& tensors, const std::string& path,
                      const std::map<std::string, std::string>& metadata = {});

/// Reads a .safetensors file, validating it strictly: the header must be a JSON object
/// whose entries have a known dtype, a shape and data_offsets that match it, and the
/// byte ranges must tile the data section exactly (no overlap, gap or trailing bytes).
/// Throws CheckpointError naming the file and what is wrong.
SafetensorsFile load_safetensors(const std::string& path);

/// Saves a module's named_parameters and named_buffers (recursively, dotted names as
/// in state_dict) with save_safetensors.
void save_module_safetensors(const torch::nn::Module& module, const std::string& path,
                             const std::map<std::string, std::string>& metadata = {});

/// Loads a .safetensors file into a module's parameters and buffers, strictly: when a
/// name is missing from the file, the file has names the module lacks, or a shape
/// differs, nothing is copied and one CheckpointError lists every such name. Values are
/// copied under no-grad and converted to each parameter's dtype and device.
void load_module_safetensors(torch::nn::Module& module, const std::string& path);

}  // namespace volt::checkpoint_io
