#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "volt/core/types.h"

namespace volt::data {

/// A map-style data set: a size and random access to examples. An example is a list
/// of tensors (for classification: {input, target}).
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  /// One example.
  virtual Batch get(int64_t index) const = 0;
  /// Several examples collated into one batch. The default stacks get(i) along a new
  /// first dimension, position by position; override it when a gather is cheaper.
  virtual Batch get_batch(const std::vector<int64_t>& indices) const;
  /// The epoch of the pass about to start: the DataLoader calls it before each pass, on the
  /// caller's thread, before any worker calls get(). A data set whose examples depend on the
  /// epoch (random augmentations reseeded per epoch, as ImageFolder's) stores it, in a member
  /// that get() may read from several threads (an atomic). The default ignores it. A data set
  /// shared by two loaders sees the epoch of the pass started last; the Trainer gives its
  /// validation passes the current epoch (as Lightning sets its samplers' epoch).
  virtual void set_epoch(int64_t /*epoch*/) const {}
};

/// Examples are rows of tensors that share their first dimension. get_batch gathers
/// with one index_select per tensor.
class TensorDataset : public Dataset {
 public:
  explicit TensorDataset(std::vector<at::Tensor> tensors);
  int64_t size() const override;
  Batch get(int64_t index) const override;
  Batch get_batch(const std::vector<int64_t>& indices) const override;
  const std::vector<at::Tensor>& tensors() const { return tensors_; }

 private:
  std::vector<at::Tensor> tensors_;
};

/// A view of some examples of another data set.
class Subset : public Dataset {
 public:
  Subset(std::shared_ptr<const Dataset> base, std::vector<int64_t> indices);
  int64_t size() const override;
  Batch get(int64_t index) const override;
  Batch get_batch(const std::vector<int64_t>& indices) const override;
  /// Passes the epoch on to the base data set.
  void set_epoch(int64_t epoch) const override { base_->set_epoch(epoch); }
  const std::vector<int64_t>& indices() const { return indices_; }

 private:
  std::shared_ptr<const Dataset> base_;
  std::vector<int64_t> indices_;
};

/// Splits a data set into disjoint random subsets of the given lengths (which must add
/// up to its size), reproducibly for a seed.
std::vector<std::shared_ptr<Subset>> random_split(std::shared_ptr<const Dataset> dataset,
                                                  const std::vector<int64_t>& lengths,
                                                  uint64_t seed);

}  // namespace volt::data
