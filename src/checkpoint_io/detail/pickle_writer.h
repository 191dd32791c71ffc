#pragma once
// Writes a PyValue tree as torch.save's data.pkl: pickle protocol 2, tensors as
// torch._utils._rebuild_tensor_v2 over storages named by persistent ids ('storage', torch.<T>Storage, key,
// 'cpu', numel), dicts, OrderedDicts, lists, tuples, strings, numbers, booleans and None. Nothing else is
// written, so PyTorch's weights-only unpickler accepts the result (2.x; 1.13's has no opcode for a float).
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "checkpoint_io/detail/python_pickle.h"

namespace volt::checkpoint_io::detail {

/// The pickle bytes of `root`. Every tensor in it becomes one storage, appended to `storages` in the order
/// of their keys "0", "1", ... (contiguous CPU tensors whose bytes are the record "data/<key>"). A dict that
/// PyValue marks ordered (its `b` flag) is written as collections.OrderedDict. Throws CheckpointError for a
/// value that has no plain pickle form (an opaque object, a sparse tensor).
std::string write_pickle(const PyValue& root, std::vector<at::Tensor>& storages);

/// "torch.FloatStorage" for at::kFloat, ...; empty for a dtype torch.save has no storage class for.
std::string storage_class(at::ScalarType dtype);

}  // namespace volt::checkpoint_io::detail
