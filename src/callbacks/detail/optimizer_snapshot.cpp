#include "callbacks/detail/optimizer_snapshot.h"

#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

namespace volt::callbacks::detail {

OptimizerSnapshot::OptimizerSnapshot(torch::optim::Optimizer& optimizer) : optimizer_(&optimizer) {
  torch::serialize::OutputArchive archive;
  optimizer.save(archive);
  std::ostringstream out;
  archive.save_to(out);
  archive_ = out.str();
  for (auto& group : optimizer.param_groups()) options_.push_back(group.options().clone());
}

void OptimizerSnapshot::restore() {
  // load() merges into the present state: clear it so that state created since goes away.
  optimizer_->state().clear();
  std::istringstream in(archive_);
  torch::serialize::InputArchive archive;
  archive.load_from(in);
  optimizer_->load(archive);
  auto& groups = optimizer_->param_groups();
  for (size_t i = 0; i < groups.size() && i < options_.size(); ++i) groups[i].set_options(options_[i]->clone());
}

}  // namespace volt::callbacks::detail
