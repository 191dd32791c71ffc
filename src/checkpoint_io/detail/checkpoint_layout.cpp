#include "checkpoint_io/detail/checkpoint_layout.h"

#include <cstring>
#include <optional>

#include <ATen/ops/empty.h>

#include "volt/checkpoint_io/lightning_layout.h"
#include "volt/core/error.h"
#include "volt/core/file_check.h"
#include "volt/core/printable.h"

namespace volt::checkpoint_io::detail {
namespace {

using json = nlohmann::json;
using Kind = PyValue::Kind;

const std::string kStateDictPrefix = "state_dict.";
const std::string kOptimizerPrefix = "optimizer_states.";

PyValuePtr str(const std::string& s) {
  auto v = make_value(Kind::kString);
  v->s = s;
  return v;
}
PyValuePtr integer(int64_t i) {
  auto v = make_value(Kind::kInt);
  v->i = i;
  return v;
}
PyValuePtr tensor(const at::Tensor& t) {
  auto v = make_value(Kind::kTensor);
  v->tensor = t;
  return v;
}

/// A decimal index ("0", "17"), or nullopt.
std::optional<int64_t> index_of(const std::string& s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  if (s.size() > 1 && s[0] == '0') return std::nullopt;
  return std::stoll(s);
}

PyValuePtr from_json(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
    case json::value_t::discarded:
      return make_value(Kind::kNone);
    case json::value_t::boolean: {
      auto v = make_value(Kind::kBool);
      v->b = j.get<bool>();
      return v;
    }
    case json::value_t::number_integer:
      return integer(j.get<int64_t>());
    case json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) {
        auto v = make_value(Kind::kFloat);
        v->f = static_cast<double>(u);
        return v;
      }
      return integer(static_cast<int64_t>(u));
    }
    case json::value_t::number_float: {
      auto v = make_value(Kind::kFloat);
      v->f = j.get<double>();
      return v;
    }
    case json::value_t::string:
      return str(j.get<std::string>());
    case json::value_t::array:
    case json::value_t::binary: {
      auto v = make_value(Kind::kList);
      for (const auto& item : j) v->items.push_back(from_json(item));
      return v;
    }
    case json::value_t::object: {
      auto v = make_value(Kind::kDict);
      for (const auto& [key, item] : j.items()) v->dict.emplace_back(str(key), from_json(item));
      return v;
    }
  }
  return make_value(Kind::kNone);
}

/// The child of a dict under `key` (string or integer key), created as an empty dict when missing.
PyValuePtr child(PyValue& dict, const PyValuePtr& key) {
  for (auto& [k, v] : dict.dict) {
    if (k->kind == key->kind &&
        ((k->kind == Kind::kString && k->s == key->s) || (k->kind == Kind::kInt && k->i == key->i)))
      return v;
  }
  auto v = make_value(Kind::kDict);
  dict.dict.emplace_back(key, v);
  return v;
}

/// PyTorch's types inside optimizer_states: parameter indices as integer keys, betas as a tuple.
void pytorch_optimizer_types(PyValue& optimizer_states) {
  if (optimizer_states.kind != Kind::kList) return;
  for (auto& opt : optimizer_states.items) {
    if (opt->kind != Kind::kDict) continue;
    if (auto state = opt->get("state"); state && state->kind == Kind::kDict) {
      for (auto& [k, v] : state->dict) {
        if (k->kind != Kind::kString) continue;
        if (const auto i = index_of(k->s)) k = integer(*i);
      }
    }
    if (auto groups = opt->get("param_groups"); groups && groups->kind == Kind::kList) {
      for (auto& g : groups->items) {
        if (g->kind != Kind::kDict) continue;
        for (auto& [k, v] : g->dict) {
          if (k->kind == Kind::kString && k->s == "betas" && v->kind == Kind::kList) v->kind = Kind::kTuple;
        }
      }
    }
  }
}

/// PyTorch's types inside lr_schedulers: MultiStepLR's milestones (a Counter there) keyed by integers.
void pytorch_scheduler_types(PyValue& lr_schedulers) {
  if (lr_schedulers.kind != Kind::kList) return;
  for (auto& sched : lr_schedulers.items) {
    if (sched->kind != Kind::kDict) continue;
    if (auto milestones = sched->get("milestones"); milestones && milestones->kind == Kind::kDict) {
      for (auto& [k, v] : milestones->dict) {
        if (k->kind != Kind::kString) continue;
        if (const auto i = index_of(k->s)) k = integer(*i);
      }
    }
  }
}

/// Where an "optimizer_states.<i>.state.<p>.<name>" tensor goes, or nullptr when `key` is not one or the
/// metadata has no optimizer i.
PyValuePtr optimizer_slot(const PyValue& root, const std::string& key, std::string& field) {
  if (key.compare(0, kOptimizerPrefix.size(), kOptimizerPrefix) != 0) return nullptr;
  const std::string rest = key.substr(kOptimizerPrefix.size());
  const auto dot1 = rest.find('.');
  if (dot1 == std::string::npos) return nullptr;
  const auto i = index_of(rest.substr(0, dot1));
  const std::string after = rest.substr(dot1 + 1);
  if (!i || after.compare(0, 6, "state.") != 0) return nullptr;
  const std::string tail = after.substr(6);
  const auto dot2 = tail.find('.');
  if (dot2 == std::string::npos) return nullptr;
  const auto p = index_of(tail.substr(0, dot2));
  field = tail.substr(dot2 + 1);
  if (!p || field.empty()) return nullptr;
  const auto opts = root.get("optimizer_states");
  if (!opts || opts->kind != Kind::kList || static_cast<size_t>(*i) >= opts->items.size()) return nullptr;
  auto& opt = opts->items[static_cast<size_t>(*i)];
  if (opt->kind != Kind::kDict) return nullptr;
  const auto state = child(*opt, str("state"));
  if (state->kind != Kind::kDict) return nullptr;
  return child(*state, integer(*p));
}

}  // namespace

PyValuePtr checkpoint_to_tree(const Checkpoint& checkpoint) {
  const json& meta = checkpoint.meta;
  if (!meta.is_object() && !meta.is_null()) {
    throw CheckpointError(std::string("cannot save a checkpoint whose metadata is a JSON ") + meta.type_name() +
                          ": it must be an object.");
  }
  for (const char* reserved : {"state_dict", "volt_tensors", "volt_blobs", "volt_format_version"}) {
    if (meta.is_object() && meta.contains(reserved)) {
      throw CheckpointError(std::string("cannot save a checkpoint whose metadata has an entry '") + reserved +
                            "': the layout keeps that key for tensors. Rename the entry.");
    }
  }
  auto root = meta.is_object() ? from_json(meta) : make_value(Kind::kDict);
  if (auto opts = root->get("optimizer_states")) pytorch_optimizer_types(*opts);
  if (auto scheds = root->get("lr_schedulers")) pytorch_scheduler_types(*scheds);
  auto state_dict = make_value(Kind::kDict);
  state_dict->b = true;  // an OrderedDict, as nn.Module.state_dict() returns
  auto extra = make_value(Kind::kDict);
  for (const auto& [key, t] : checkpoint.tensors) {
    if (key.compare(0, kStateDictPrefix.size(), kStateDictPrefix) == 0) {
      state_dict->dict.emplace_back(str(key.substr(kStateDictPrefix.size())), tensor(t));
      continue;
    }
    std::string field;
    if (auto slot = optimizer_slot(*root, key, field)) {
      // "<name>.<k>": item k of the list <name> (LBFGS's history), which the metadata sized (None elsewhere).
      std::optional<int64_t> item;
      if (const auto dot = field.rfind('.'); dot != std::string::npos) {
        item = index_of(field.substr(dot + 1));
        if (item) field = field.substr(0, dot);
      }
      child(*slot, str(field));  // replaces nothing: the slot is fresh or holds the non-tensor entries
      for (auto& [k, v] : slot->dict) {
        if (k->kind != Kind::kString || k->s != field) continue;
        if (!item) {
          v = tensor(t);
          continue;
        }
        if (v->kind != Kind::kList) v = make_value(Kind::kList);
        while (v->items.size() <= static_cast<size_t>(*item)) v->items.push_back(make_value(Kind::kNone));
        v->items[static_cast<size_t>(*item)] = tensor(t);
      }
      continue;
    }
    extra->dict.emplace_back(str(key), tensor(t));
  }
  // Lightning's order: progress first, then the weights.
  auto& top = root->dict;
  size_t at = 0;
  while (at < top.size() && top[at].first->kind == Kind::kString &&
         (top[at].first->s == "epoch" || top[at].first->s == "global_step" ||
          top[at].first->s == "pytorch-lightning_version")) {
    ++at;
  }
  top.insert(top.begin() + static_cast<std::ptrdiff_t>(at), {str("state_dict"), state_dict});
  top.emplace_back(str("volt_format_version"), integer(kCheckpointFormatVersion));
  if (!extra->dict.empty()) top.emplace_back(str("volt_tensors"), extra);
  if (!checkpoint.blobs.empty()) {
    auto blobs = make_value(Kind::kDict);
    for (const auto& [key, bytes] : checkpoint.blobs) {
      at::Tensor b = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
      if (!bytes.empty()) std::memcpy(b.data_ptr(), bytes.data(), bytes.size());
      blobs->dict.emplace_back(str(key), tensor(b));
    }
    top.emplace_back(str("volt_blobs"), blobs);
  }
  return root;
}

TreeLayout tree_layout(const PyValue& root, const std::string& name) {
  if (!root.is_string_keyed_dict()) {
    throw CheckpointError(name + " holds " + kind_name(root) + ", not the dict a checkpoint holds.");
  }
  if (const auto version = root.get("volt_format_version")) {
    if (version->kind != Kind::kInt || version->i != kCheckpointFormatVersion) {
      throw CheckpointError(name + " has format version " +
                            (version->kind == Kind::kInt ? std::to_string(version->i) : kind_name(*version)) +
                            "; this Volt reads format " + std::to_string(kCheckpointFormatVersion) +
                            " (and converts format 1). Load it with the Volt that wrote it.");
    }
    if (!root.get("state_dict")) throw CheckpointError(name + " has no 'state_dict' entry; the file is damaged.");
    return TreeLayout::kVolt;
  }
  if (root.get("tensors") && root.get("blobs") && root.get("meta")) return TreeLayout::kVoltFormat1;
  if (root.get("state_dict") && root.get("pytorch-lightning_version")) return TreeLayout::kLightning;
  std::string keys;
  size_t shown = 0;
  for (const auto& [k, value] : root.dict) {
    if (shown++ == 8) {
      keys += ", ...";
      break;
    }
    keys += (keys.empty() ? "" : ", ") + quote_path(k->s) + " (" + kind_name(*value) + ")";
  }
  throw CheckpointError(
      name + " holds a dict with " + (keys.empty() ? std::string("no entries") : keys) +
      ": not a checkpoint (Volt's have 'volt_format_version' and 'state_dict', Volt's format 1 'tensors', "
      "'blobs' and 'meta', Lightning's 'state_dict' and 'pytorch-lightning_version'). Give a .ckpt "
      "file that Volt or Lightning wrote.");
}

namespace {

class TreeReader {
 public:
  TreeReader(Checkpoint& out, const std::string& name) : out_(out), name_(name) {}

  /// The JSON of `v` at `path`, or nullopt when it was a tensor that went into out_.tensors.
  std::optional<json> read(const PyValue& v, std::vector<std::string>& path, int depth) {
    if (depth > 64) throw CheckpointError(name_ + " nests its values more than 64 levels deep; the file is damaged.");
    switch (v.kind) {
      case Kind::kNone:
        return json(nullptr);
      case Kind::kBool:
        return json(v.b);
      case Kind::kInt:
        return json(v.i);
      case Kind::kFloat:
        return json(v.f);
      case Kind::kString:
        return json(v.s);
      case Kind::kBytes:
        return json(std::to_string(v.s.size()) + " bytes");
      case Kind::kObject:
        if (!v.dict.empty()) break;  // a dict subclass (Lightning's AttributeDict): its items
        return json("object " + printable(v.s));
      case Kind::kTensor:
        return place_tensor(v.tensor, path);
      case Kind::kList:
      case Kind::kTuple: {
        json out = json::array();
        for (size_t i = 0; i < v.items.size(); ++i) {
          path.push_back(std::to_string(i));
          auto item = read(*v.items[i], path, depth + 1);
          path.pop_back();
          out.push_back(item ? *item : json(nullptr));
        }
        return out;
      }
      case Kind::kDict:
        break;
    }
    json out = json::object();
    for (const auto& [k, item] : v.dict) {
      std::string key;
      if (k->kind == Kind::kString) {
        key = k->s;
      } else if (k->kind == Kind::kInt) {
        key = std::to_string(k->i);
      } else {
        auto j = read(*k, path, depth + 1);
        key = j ? j->dump() : "tensor";
      }
      path.push_back(key);
      auto value = read(*item, path, depth + 1);
      path.pop_back();
      if (value) out[key] = std::move(*value);
    }
    return out;
  }

 private:
  std::optional<json> place_tensor(const at::Tensor& t, const std::vector<std::string>& path) {
    // Optimizer state stays tensors, also in lists (LBFGS's history, of one-element tensors among others).
    const bool optimizer_state = path.size() >= 5 && path[0] == "optimizer_states" && path[2] == "state";
    if (!optimizer_state && t.dim() == 0 && t.numel() == 1) {
      // A callback's score and the like: its number.
      if (t.is_floating_point()) return json(t.item<double>());
      if (t.scalar_type() == at::kBool) return json(t.item<bool>());
      if (!t.is_complex()) return json(t.item<int64_t>());
    }
    std::string key;
    for (const auto& part : path) key += (key.empty() ? "" : ".") + part;
    out_.tensors[key] = t;
    return std::nullopt;
  }

  Checkpoint& out_;
  const std::string& name_;
};

Checkpoint read_format1(const PyValue& root, const std::string& name) {
  Checkpoint ckpt;
  ckpt.tensors = tensor_dict(*root.get("tensors"), name, "a 'tensors' entry");
  for (const auto& [key, t] : tensor_dict(*root.get("blobs"), name, "a 'blobs' entry")) {
    if (t.scalar_type() != at::kByte || t.dim() != 1) {
      throw CheckpointError(name + " has 'blobs' entry " + quote_path(key) + " of type " +
                            c10::toString(t.scalar_type()) + " with " + std::to_string(t.dim()) +
                            " dimension(s), not the 1-D uint8 bytes Volt writes; it was not written by Volt.");
    }
    const at::Tensor c = t.contiguous();
    ckpt.blobs.emplace(key, std::string(static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel())));
  }
  const auto meta = root.get("meta");
  if (meta->kind != Kind::kString)
    throw CheckpointError(name + " has a 'meta' entry that is " + kind_name(*meta) + ".");
  json v1;
  try {
    v1 = json::parse(meta->s);
  } catch (const std::exception& e) {
    throw CheckpointError(name + " has malformed metadata: " + e.what());
  }
  if (!v1.is_object()) {
    throw CheckpointError(name + " has metadata that is a JSON " + std::string(v1.type_name()) +
                          ", not the object Volt writes.");
  }
  ckpt.meta = upgrade_v1_meta(v1);
  return ckpt;
}

}  // namespace

Checkpoint checkpoint_from_tree(const PyValue& root, const std::string& name) {
  const TreeLayout layout = tree_layout(root, name);
  if (layout == TreeLayout::kVoltFormat1) return read_format1(root, name);
  Checkpoint ckpt;
  TreeReader reader(ckpt, name);
  json meta = json::object();
  for (const auto& [k, value] : root.dict) {
    const std::string& key = k->s;
    if (key == "volt_format_version" && layout == TreeLayout::kVolt) {
      continue;
    } else if (key == "state_dict") {
      for (auto& [n, t] : tensor_dict(*value, name, "its 'state_dict' entry")) ckpt.tensors[kStateDictPrefix + n] = t;
    } else if (key == "volt_tensors" && layout == TreeLayout::kVolt) {
      for (auto& [n, t] : tensor_dict(*value, name, "its 'volt_tensors' entry")) ckpt.tensors[n] = t;
    } else if (key == "volt_blobs" && layout == TreeLayout::kVolt) {
      for (const auto& [n, t] : tensor_dict(*value, name, "its 'volt_blobs' entry")) {
        if (t.scalar_type() != at::kByte || t.dim() != 1) {
          throw CheckpointError(name + " has 'volt_blobs' entry " + quote_path(n) + " of type " +
                                c10::toString(t.scalar_type()) + ", not the 1-D uint8 bytes Volt writes.");
        }
        const at::Tensor c = t.contiguous();
        ckpt.blobs.emplace(n, std::string(static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel())));
      }
    } else {
      std::vector<std::string> path{key};
      if (auto j = reader.read(*value, path, 1)) meta[key] = std::move(*j);
    }
  }
  if (layout == TreeLayout::kLightning) {
    // What Volt keeps of its own, derived from Lightning's entries.
    json volt = json::object();
    volt["format_version"] = kCheckpointFormatVersion;
    volt["written_by"] = "Lightning";
    volt["weights_only"] = !meta.contains("optimizer_states");
    volt["loops"] = progress_json(progress_from_lightning(meta));
    meta["volt"] = volt;
  }
  ckpt.meta = std::move(meta);
  return ckpt;
}

}  // namespace volt::checkpoint_io::detail
