#pragma once
// A Checkpoint as the dictionary Lightning 2.x writes, and back (docs/checkpoints.md, "Layout"):
// meta's entries at the top, "state_dict.<name>" tensors in "state_dict" (an OrderedDict),
// "optimizer_states.<i>.state.<p>.<name>" tensors inside optimizer_states (parameter indices as integers,
// Adam's betas as a tuple), every other tensor in "volt_tensors" and the blobs as uint8 tensors in
// "volt_blobs". Reading also takes Volt's format 1 ({"tensors", "blobs", "meta"}) and files Lightning wrote.
#include <string>

#include "checkpoint_io/detail/python_pickle.h"
#include "volt/core/checkpoint.h"

namespace volt::checkpoint_io::detail {

/// The pickle tree of `checkpoint`. Throws CheckpointError when meta is not an object or uses a key the
/// layout keeps for tensors ("state_dict", "volt_tensors", "volt_blobs").
PyValuePtr checkpoint_to_tree(const Checkpoint& checkpoint);

/// Which writer a root came from.
enum class TreeLayout { kVolt, kVoltFormat1, kLightning };

/// The layout of `root`, or a CheckpointError naming `name` and the keys it has instead.
TreeLayout tree_layout(const PyValue& root, const std::string& name);

/// The Checkpoint a tree holds, in format 2's layout whichever writer made it: format 1 metadata upgraded
/// (meta["volt"]["converted_from_format"] says so), a Lightning file's progress put under meta["volt"]["loops"].
/// Tensors elsewhere in a Lightning file (a callback's score) become numbers when they hold one value.
Checkpoint checkpoint_from_tree(const PyValue& root, const std::string& name);

}  // namespace volt::checkpoint_io::detail
