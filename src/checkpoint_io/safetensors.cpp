#include "volt/checkpoint_io/safetensors.h"

#include "volt/checkpoint_io/state_dict.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty.h>
#include <torch/nn/module.h>
#include <nlohmann/json.hpp>

#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/core/error.h"
#include "volt/core/input_file.h"
#include "volt/core/printable.h"
#include "volt/core/strict_json.h"

namespace volt::checkpoint_io {
namespace {

constexpr const char* kMetadataKey = "__metadata__";
constexpr const char* kSupportedDtypes = "F32, F64, F16, BF16, I64, I32, I16, I8, U8, BOOL";

struct DtypeCode {
  const char* name;
  at::ScalarType type;
};

constexpr DtypeCode kDtypeCodes[] = {
    {"F32", at::kFloat}, {"F64", at::kDouble}, {"F16", at::kHalf}, {"BF16", at::kBFloat16}, {"I64", at::kLong},
    {"I32", at::kInt},   {"I16", at::kShort},  {"I8", at::kChar},  {"U8", at::kByte},       {"BOOL", at::kBool},
};

bool dtype_from_name(const std::string& name, at::ScalarType* type) {
  for (const auto& code : kDtypeCodes) {
    if (name == code.name) {
      *type = code.type;
      return true;
    }
  }
  return false;
}

// The format is little-endian whatever the host; on a big-endian host every element's
// bytes are reversed on the way in and out.
constexpr bool kLittleEndianHost = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

void swap_to_or_from_little_endian(char* data, size_t nbytes, size_t element_size) {
  if (kLittleEndianHost || element_size == 1) return;
  for (size_t i = 0; i + element_size <= nbytes; i += element_size) {
    std::reverse(data + i, data + i + element_size);
  }
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string range_string(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

// One tensor entry of a header, checked against itself; the tiling of the data section
// is checked afterwards over all entries.
struct Entry {
  std::string name;
  at::ScalarType type;
  std::vector<int64_t> shape;
  uint64_t begin;
  uint64_t end;
};

bool is_non_negative_integer(const nlohmann::json& j) {
  return j.is_number_unsigned() || (j.is_number_integer() && j.get<int64_t>() >= 0);
}

}  // namespace

std::string safetensors_dtype_name(at::ScalarType type) {
  for (const auto& code : kDtypeCodes) {
    if (code.type == type) return code.name;
  }
  return "";
}

void save_safetensors(const std::map<std::string, at::Tensor>& tensors, const std::string& path,
                      const std::map<std::string, std::string>& metadata) {
  auto fail = [&](const std::string& what) {
    throw CheckpointError("cannot save safetensors file '" + path + "': " + what);
  };
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name == kMetadataKey) {
      fail("the name '__metadata__' is reserved for the metadata map; rename that tensor.");
    }
    if (!tensor.defined()) fail("tensor '" + name + "' is undefined.");
    if (tensor.layout() != at::kStrided) {
      std::ostringstream layout;
      layout << tensor.layout();
      fail("tensor '" + name + "' has layout " + layout.str() +
           "; only dense tensors can be stored. Convert it with to_dense() first.");
    }
    const std::string dtype = safetensors_dtype_name(tensor.scalar_type());
    if (dtype.empty()) {
      fail("tensor '" + name + "' has dtype " + std::string(c10::toString(tensor.scalar_type())) +
           ", which has no safetensors code here (supported: " + kSupportedDtypes +
           "). Convert it with .to(...) first.");
    }
    const uint64_t nbytes = static_cast<uint64_t>(tensor.numel()) * tensor.element_size();
    header[name] = {{"dtype", dtype},
                    {"shape", tensor.sizes().vec()},
                    {"data_offsets", nlohmann::json::array({offset, offset + nbytes})}};
    offset += nbytes;
  }
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    fail(std::string("a tensor name or metadata entry is not valid UTF-8: ") + e.what());
  }
  // Padding keeps the data section 8-byte aligned for readers that map the file.
  text.append((8 - text.size() % 8) % 8, ' ');

  std::string bytes;
  bytes.reserve(8 + text.size() + offset);
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  bytes += text;
  // One host copy at a time (std::map order is the header's offset order), so that saving
  // a GPU model needs the output buffer plus its largest tensor, not a copy of everything.
  for (const auto& [name, tensor] : tensors) {
    const at::Tensor t = tensor.detach().to(at::kCPU).resolve_neg().contiguous();
    const size_t nbytes = static_cast<size_t>(t.numel()) * t.element_size();
    if (nbytes == 0) continue;
    const size_t at = bytes.size();
    bytes.append(static_cast<const char*>(t.data_ptr()), nbytes);
    swap_to_or_from_little_endian(bytes.data() + at, nbytes, t.element_size());
  }
  try {
    atomic_write(path, bytes.data(), bytes.size());
  } catch (const Error& e) {
    throw CheckpointError(std::string("saving safetensors file failed: ") + e.what());
  }
}

SafetensorsFile load_safetensors(const std::string& path) {
  auto error = [&](const std::string& what) {
    return CheckpointError("safetensors file '" + printable(path) + "' " + what);
  };
  // Before anything opens it: a FIFO would block the reader, a device never end.
  if (const std::string problem = input_file_problem(path); !problem.empty())
    throw error("cannot be opened: it " + problem + ".");
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) throw error("cannot be opened: " + ec.message() + ". Check the path.");
  std::string bytes(size, '\0');
  std::ifstream in(path, std::ios::binary);
  if (!in.read(bytes.data(), static_cast<std::streamsize>(size))) {
    throw error("cannot be read (" + std::to_string(size) + " bytes expected): " + std::strerror(errno));
  }
  if (size < 8) {
    throw error("is " + std::to_string(size) +
                " bytes long, shorter than the 8-byte header length every safetensors file starts with; "
                "it is truncated or not a safetensors file.");
  }
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | static_cast<unsigned char>(bytes[i]);
  if (header_size > size - 8) {
    throw error("declares a " + std::to_string(header_size) + "-byte header but only " + std::to_string(size - 8) +
                " bytes follow the length field; it is truncated or not a safetensors file.");
  }
  // A JSON parser keeps the last of two equal keys: two entries for one tensor name (or two dtypes for one
  // tensor) would load one of them silently. Nesting is limited too: a header is three levels deep.
  nlohmann::json header;
  try {
    header = parse_strict_json(std::string_view(bytes).substr(8, header_size), 16);
  } catch (const StrictJsonError& e) {
    if (e.kind == StrictJsonError::Kind::kTooDeep) {
      throw error("has a header nested deeper than " + std::to_string(e.depth) +
                  " levels; a safetensors header is an object of tensor entries.");
    }
    throw error(e.entry.empty() ? "has the entry '" + printable(e.key) +
                                      "' twice in its header; a reader would keep only one of them. "
                                      "The file is damaged or was written by a faulty tool."
                                : "has the key '" + printable(e.key) + "' twice in the entry '" + printable(e.entry) +
                                      "' of its header; a reader would keep only one of them. The file is "
                                      "damaged or was written by a faulty tool.");
  } catch (const nlohmann::json::exception& e) {
    // The parser quotes the bytes it stopped at, which may not be UTF-8.
    throw error(std::string("has a header that is not valid JSON: ") + printable(e.what()));
  }
  if (!header.is_object()) {
    throw error(std::string("has a header that is a JSON ") + header.type_name() + ", not an object.");
  }
  const uint64_t data_size = size - 8 - header_size;

  SafetensorsFile file;
  std::vector<Entry> entries;
  for (const auto& [name, info] : header.items()) {
    if (name == kMetadataKey) {
      if (!info.is_object())
        throw error("has a '__metadata__' entry that is a JSON " + std::string(info.type_name()) + ", not an object.");
      for (const auto& [key, value] : info.items()) {
        if (!value.is_string()) {
          throw error("has metadata '" + key + "' that is a JSON " + value.type_name() +
                      "; safetensors metadata maps strings to strings.");
        }
        file.metadata.emplace(key, value.get<std::string>());
      }
      continue;
    }
    const std::string where = "tensor '" + name + "'";
    if (!info.is_object())
      throw error("has " + where + " described by a JSON " + info.type_name() + ", not an object.");
    const auto dtype = info.find("dtype");
    const auto shape = info.find("shape");
    const auto offsets = info.find("data_offsets");
    if (dtype == info.end() || !dtype->is_string()) throw error("has " + where + " without a string 'dtype'.");
    Entry entry{name, at::kFloat, {}, 0, 0};
    if (!dtype_from_name(dtype->get<std::string>(), &entry.type)) {
      throw error("has " + where + " with unknown dtype '" + dtype->get<std::string>() +
                  "' (known: " + kSupportedDtypes + ").");
    }
    if (shape == info.end() || !shape->is_array() ||
        !std::all_of(shape->begin(), shape->end(), is_non_negative_integer)) {
      throw error("has " + where + " without a 'shape' list of non-negative integers.");
    }
    if (offsets == info.end() || !offsets->is_array() || offsets->size() != 2 ||
        !std::all_of(offsets->begin(), offsets->end(), is_non_negative_integer)) {
      throw error("has " + where + " without 'data_offsets' [begin, end] of two non-negative integers.");
    }
    entry.begin = (*offsets)[0].get<uint64_t>();
    entry.end = (*offsets)[1].get<uint64_t>();
    if (entry.end < entry.begin)
      throw error("has " + where + " with data_offsets " + range_string(entry.begin, entry.end) +
                  " that end before they begin.");
    // numel * element_size may not fit 64 bits in a hostile header; any product above
    // the data section's size is a mismatch anyway.
    const uint64_t element_size = c10::elementSize(entry.type);
    uint64_t nbytes = element_size;
    bool too_big = false;
    for (const auto& d : *shape) {
      const uint64_t dim = d.get<uint64_t>();
      if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) too_big = true;
      entry.shape.push_back(static_cast<int64_t>(dim));
      if (dim == 0) {
        nbytes = 0;
      } else if (nbytes > std::numeric_limits<uint64_t>::max() / dim) {
        too_big = true;
      } else {
        nbytes *= dim;
      }
    }
    if (nbytes == 0) too_big = false;
    if (too_big || nbytes != entry.end - entry.begin) {
      throw error("has " + where + " of shape " + shape_string(entry.shape) + " and dtype " +
                  dtype->get<std::string>() + (too_big ? " (too large)" : " (" + std::to_string(nbytes) + " bytes)") +
                  " but data_offsets " + range_string(entry.begin, entry.end) + " span " +
                  std::to_string(entry.end - entry.begin) + " bytes.");
    }
    if (entry.end > data_size) {
      throw error("has " + where + " with data_offsets " + range_string(entry.begin, entry.end) +
                  " beyond the end of the data section (" + std::to_string(data_size) + " bytes); it is truncated.");
    }
    entries.push_back(std::move(entry));
  }

  // The byte ranges must tile the data section: no overlap, no gap, nothing after.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  uint64_t expected = 0;
  const Entry* previous = nullptr;
  for (const auto& entry : entries) {
    const std::string after = previous ? "between tensor '" + previous->name + "' and" : "before";
    if (entry.begin < expected) {
      throw error("has overlapping tensors: '" + previous->name + "' " + range_string(previous->begin, previous->end) +
                  " and '" + entry.name + "' " + range_string(entry.begin, entry.end) + ".");
    }
    if (entry.begin > expected) {
      throw error("has a gap of " + std::to_string(entry.begin - expected) + " unused bytes " + after + " tensor '" +
                  entry.name + "' (data offsets " + std::to_string(expected) + " to " + std::to_string(entry.begin) +
                  ").");
    }
    expected = entry.end;
    previous = &entry;
  }
  if (expected != data_size) {
    throw error("has " + std::to_string(data_size - expected) +
                " trailing bytes after the last tensor (the tensors end at " + std::to_string(expected) + " of " +
                std::to_string(data_size) + " data bytes).");
  }

  const char* data = bytes.data() + 8 + header_size;
  for (const auto& entry : entries) {
    at::Tensor t = at::empty(entry.shape, at::TensorOptions().dtype(entry.type));
    const size_t nbytes = entry.end - entry.begin;
    if (nbytes > 0) {
      std::memcpy(t.data_ptr(), data + entry.begin, nbytes);
      swap_to_or_from_little_endian(static_cast<char*>(t.data_ptr()), nbytes, t.element_size());
    }
    file.tensors.emplace(entry.name, std::move(t));
  }
  return file;
}

void save_module_safetensors(const torch::nn::Module& module, const std::string& path,
                             const std::map<std::string, std::string>& metadata) {
  save_safetensors(module_state_dict(module), path, metadata);
}

void load_module_safetensors(torch::nn::Module& module, const std::string& path) {
  load_state_dict_strict(module, load_safetensors(path).tensors, "safetensors file '" + path + "'", "file");
}

}  // namespace volt::checkpoint_io
