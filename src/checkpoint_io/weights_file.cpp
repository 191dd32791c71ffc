#include "volt/checkpoint_io/weights_file.h"

#include <cstring>

#include "checkpoint_io/detail/checkpoint_layout.h"
#include "checkpoint_io/detail/python_pickle.h"
#include "checkpoint_io/detail/torch_archive.h"
#include "volt/checkpoint_io/safetensors.h"
#include "volt/checkpoint_io/zip_integrity.h"
#include "volt/core/error.h"
#include "volt/core/file_check.h"
#include "volt/core/printable.h"

namespace volt::checkpoint_io {

const char* format_name(FileFormat format) {
  switch (format) {
    case FileFormat::kVoltCheckpoint:
      return "Volt checkpoint";
    case FileFormat::kLightningCheckpoint:
      return "Lightning checkpoint";
    case FileFormat::kTorchStateDict:
      return "torch.save state_dict";
    case FileFormat::kSafetensors:
      return "safetensors";
  }
  return "unknown";
}

namespace {

using detail::PyValue;
using detail::PyValuePtr;
using Kind = PyValue::Kind;

std::string tensor_shape_text(const at::Tensor& t) {
  std::string out = "[";
  for (int64_t d = 0; d < t.dim(); ++d) out += (d ? ", " : "") + std::to_string(t.size(d));
  return out + "]";
}

nlohmann::json summary(const PyValue& v, int depth) {
  switch (v.kind) {
    case Kind::kNone:
      return nullptr;
    case Kind::kBool:
      return v.b;
    case Kind::kInt:
      return v.i;
    case Kind::kFloat:
      return v.f;
    case Kind::kString:
      return printable(v.s);
    case Kind::kBytes:
      return std::to_string(v.s.size()) + " bytes";
    case Kind::kTensor: {
      std::string dtype = c10::toString(v.tensor.scalar_type());
      return "tensor " + dtype + " " + tensor_shape_text(v.tensor);
    }
    case Kind::kObject:
      return "object " + printable(v.s);
    case Kind::kList:
    case Kind::kTuple: {
      if (depth >= 3 || v.items.size() > 16) {
        return std::string(v.kind == Kind::kList ? "list" : "tuple") + " of " + std::to_string(v.items.size());
      }
      nlohmann::json out = nlohmann::json::array();
      for (const auto& item : v.items) out.push_back(summary(*item, depth + 1));
      return out;
    }
    case Kind::kDict: {
      if (depth >= 3 || v.dict.size() > 32) return "dict of " + std::to_string(v.dict.size());
      nlohmann::json out = nlohmann::json::object();
      for (const auto& [k, value] : v.dict) {
        const std::string key = k->kind == Kind::kString ? printable(k->s) : summary(*k, 3).dump();
        out[key] = summary(*value, depth + 1);
      }
      return out;
    }
  }
  return nullptr;
}


WeightsFile classify(const PyValuePtr& root, const std::string& name) {
  WeightsFile out;
  if (!root->is_string_keyed_dict()) {
    throw CheckpointError(name + " holds " + kind_name(*root) +
                          ", not a dict: it is none of the formats Volt reads (Volt or Lightning checkpoint, "
                          "torch.save state_dict, safetensors).");
  }
  if (root->get("volt_format_version") || (root->get("tensors") && root->get("blobs") && root->get("meta"))) {
    // Volt's layout (format 2, Lightning's keys) or its format 1: read as resume reads it.
    const Checkpoint ckpt = detail::checkpoint_from_tree(*root, name);
    out.format = FileFormat::kVoltCheckpoint;
    out.state_dict = ckpt.state_dict();
    out.info = ckpt.meta;
    return out;
  }
  const auto state_dict = root->get("state_dict");
  if (state_dict && (root->get("pytorch-lightning_version") || (root->get("epoch") && root->get("global_step")))) {
    out.format = FileFormat::kLightningCheckpoint;
    out.state_dict = tensor_dict(*state_dict, name, "a 'state_dict' entry");
    for (const auto& [k, value] : root->dict) {
      if (k->s != "state_dict") out.info[printable(k->s)] = summary(*value, 1);
    }
    return out;
  }
  bool all_tensors = true;
  for (const auto& [k, value] : root->dict) all_tensors = all_tensors && value->kind == Kind::kTensor;
  if (all_tensors) {
    out.format = FileFormat::kTorchStateDict;
    out.state_dict = tensor_dict(*root, name, "its dict");
    return out;
  }
  std::string keys;
  size_t shown = 0;
  for (const auto& [k, value] : root->dict) {
    if (shown++ == 8) {
      keys += ", ...";
      break;
    }
    keys += (keys.empty() ? "" : ", ") + quote_path(k->s) + " (" + kind_name(*value) + ")";
  }
  throw CheckpointError(
      name + " holds a dict with " + keys +
      ": none of the formats Volt reads (a Volt checkpoint has 'volt_format_version' and 'state_dict'; a "
      "Lightning checkpoint 'state_dict' and 'pytorch-lightning_version'; a state_dict only "
      "tensors).");
}

// A .safetensors file starts with an 8-byte little-endian header length that fits the file, then '{'.
bool looks_like_safetensors(const unsigned char* p, size_t n) {
  if (n < 10) return false;
  uint64_t len = 0;
  for (int i = 7; i >= 0; --i) len = (len << 8) | p[i];
  return len >= 2 && len <= n - 8 && p[8] == '{';
}

}  // namespace

WeightsFile read_weights_file(const std::string& path) {
  detail::check_readable_file(path, "weights file");
  // Named as resume names a checkpoint, so that a damaged file reads the same from volt inspect and fit.
  const std::string name = detail::file_label(path, "checkpoint");
  const auto file = std::make_shared<const MappedFile>(path, name);
  if (looks_like_safetensors(file->data(), file->size())) {
    WeightsFile out;
    out.format = FileFormat::kSafetensors;
    SafetensorsFile st = load_safetensors(path);
    out.state_dict = std::move(st.tensors);
    out.info = st.metadata;
    return out;
  }
  if (!looks_like_zip(file->data(), file->size())) {
    throw CheckpointError(name +
                          " is neither a zip archive (what torch.save, Lightning and Volt write) nor a "
                          ".safetensors file. Give a .ckpt, .pt or .safetensors file.");
  }
  const auto root = detail::read_archive_pickle(file, name);
  return classify(root, name);
}

}  // namespace volt::checkpoint_io
