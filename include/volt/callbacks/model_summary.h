#pragma once
#include <iostream>
#include <string>

#include "volt/callbacks/callback.h"

namespace torch::nn {
class Module;
}

namespace volt::callbacks {

/// A table of `module`'s submodules down to `max_depth` levels (1: direct children;
/// -1: all; 0: no rows, totals only) and its parameter totals, as Lightning prints it:
///
///       | Name | Type       | Params
///     ------------------------------
///     0 | fc   | Linear     | 55
///     1 | head | Sequential | 18
///     ------------------------------
///     73        Trainable params
///     0         Non-trainable params
///     73        Total params
///     0.000     Total estimated model params size (MB)
///
/// Rows are in registration order with dotted names; Type is the C++ type without
/// namespaces and the "Impl" suffix (torch::nn::LinearImpl -> Linear). Params counts a
/// row's parameters with its descendants', in Lightning's short form (55, 1.2 K, 3.4 M).
/// A parameter is trainable when it requires grad; one shared by several submodules is
/// counted once in the totals. Size is the sum of numel * element_size over parameters,
/// in MB of 10^6 bytes.
std::string summarize(const torch::nn::Module& module, int max_depth = 1);

/// Prints summarize(module, max_depth) at on_fit_start, on rank 0 only (Lightning's
/// ModelSummary). max_depth 0 prints nothing.
class ModelSummary : public Callback {
 public:
  /// `out` must outlive the callback.
  explicit ModelSummary(int max_depth = 1, std::ostream* out = &std::cout);

  /// "ModelSummary".
  std::string state_key() const override { return "ModelSummary"; }
  /// Prints the table to `out` when state().is_global_zero.
  void on_fit_start(TrainerView& view) override;

  int max_depth() const { return max_depth_; }

 private:
  int max_depth_;
  std::ostream* out_;
};

}  // namespace volt::callbacks
