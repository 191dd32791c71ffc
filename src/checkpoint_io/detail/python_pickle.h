#pragma once
// A weights-only reader of the pickles that torch.save (Python, any version from 1.6 on) and LibTorch write
// in their zip archives: dicts, OrderedDicts, lists, tuples, strings, numbers, booleans, None and tensors.
// Nothing in the file is run: a class the file names is kept as an opaque object with its name. LibTorch
// 1.13's own unpickler cannot read a Python state_dict (SETITEM, BUILD), so Lightning checkpoints and
// torch.save(model.state_dict()) files are read here.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace volt::checkpoint_io::detail {

struct PyValue;
using PyValuePtr = std::shared_ptr<PyValue>;

/// One value of the pickle.
struct PyValue {
  enum class Kind { kNone, kBool, kInt, kFloat, kString, kBytes, kList, kTuple, kDict, kTensor, kObject };
  Kind kind = Kind::kNone;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;                                        ///< string, bytes, or an object's "module.name"
  std::vector<PyValuePtr> items;                        ///< list and tuple items, an object's arguments
  std::vector<std::pair<PyValuePtr, PyValuePtr>> dict;  ///< in insertion order
  at::Tensor tensor;
  // For a dict, `b` says it is an OrderedDict (how the pickle writer writes it).

  /// The dict entry under a string key, or nullptr.
  PyValuePtr get(const std::string& key) const;
  bool is_string_keyed_dict() const;
};

/// The bytes of one storage record. With an `owner` (the mapped file) and 64-byte aligned bytes, the tensor
/// points into them and keeps the owner alive instead of copying them.
struct StorageBytes {
  const unsigned char* data = nullptr;
  size_t size = 0;
  std::shared_ptr<const void> owner;
};

/// Returns the bytes of the archive's record "data/<key>" (the storage a persistent id names), or throws.
using StorageLoader = std::function<StorageBytes(const std::string& key)>;

/// A new value of that kind, empty.
inline PyValuePtr make_value(PyValue::Kind k) {
  auto v = std::make_shared<PyValue>();
  v->kind = k;
  return v;
}

/// Parses `size` bytes of a data.pkl. Throws CheckpointError "<name> is damaged: its data.pkl ..." (or "uses
/// ...") naming the byte and what is wrong: unknown opcodes, a stack or memo the pickle misuses, a storage
/// whose record is smaller than its elements, a tensor that reaches past its storage.
PyValuePtr read_python_pickle(const unsigned char* bytes, size_t size, const StorageLoader& storage,
                              const std::string& name);

/// "a dict", "a tensor", ... for messages.
std::string kind_name(const PyValue& v);

/// The name -> tensor entries of a dict, or a CheckpointError naming the file (`name`), `where` and the first entry
/// that is not one.
std::map<std::string, at::Tensor> tensor_dict(const PyValue& v, const std::string& name, const std::string& where);

}  // namespace volt::checkpoint_io::detail
