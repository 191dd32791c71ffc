#include "volt/data/dataset.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/randperm.h>
#include <ATen/ops/stack.h>

#include <string>
#include <utility>

#include "volt/core/error.h"

namespace volt::data {
namespace {

void check_index(int64_t index, int64_t size, const char* where) {
  if (index < 0 || index >= size) {
    throw Error(std::string(where) + ": index " + std::to_string(index) +
                " is out of range for a data set of " + std::to_string(size) +
                " examples. Valid indices are 0.." + std::to_string(size - 1) + ".");
  }
}

}  // namespace

Batch Dataset::get_batch(const std::vector<int64_t>& indices) const {
  if (indices.empty()) return {};
  std::vector<Batch> examples;
  examples.reserve(indices.size());
  for (int64_t index : indices) examples.push_back(get(index));
  const size_t positions = examples.front().size();
  Batch batch;
  batch.reserve(positions);
  std::vector<at::Tensor> column(examples.size());
  for (size_t p = 0; p < positions; ++p) {
    for (size_t e = 0; e < examples.size(); ++e) {
      if (examples[e].size() != positions) {
        throw DataError("Dataset::get_batch: example " + std::to_string(indices[e]) + " has " +
                        std::to_string(examples[e].size()) + " tensors but example " +
                        std::to_string(indices[0]) + " has " + std::to_string(positions) +
                        ". Every example must hold the same number of tensors; "
                        "override get_batch or pass a collate function for ragged data.");
      }
      column[e] = examples[e][p];
    }
    batch.push_back(at::stack(column, 0));
  }
  return batch;
}

TensorDataset::TensorDataset(std::vector<at::Tensor> tensors) : tensors_(std::move(tensors)) {
  if (tensors_.empty()) {
    throw DataError(
        "TensorDataset needs at least one tensor, got an empty list. "
        "Pass e.g. {inputs, targets}.");
  }
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (!tensors_[i].defined() || tensors_[i].dim() == 0) {
      throw DataError("TensorDataset: tensor " + std::to_string(i) +
                      (tensors_[i].defined() ? " is a 0-dimensional scalar" : " is undefined") +
                      "; every tensor needs a first dimension that indexes the examples.");
    }
    if (tensors_[i].size(0) != tensors_[0].size(0)) {
      throw DataError("TensorDataset: tensor " + std::to_string(i) + " has " +
                      std::to_string(tensors_[i].size(0)) + " rows but tensor 0 has " +
                      std::to_string(tensors_[0].size(0)) +
                      ". All tensors must share their first dimension (one row per example).");
    }
  }
}

int64_t TensorDataset::size() const { return tensors_.front().size(0); }

Batch TensorDataset::get(int64_t index) const {
  // select() would accept negative indices and count from the end: refuse them.
  check_index(index, size(), "TensorDataset::get");
  Batch example;
  example.reserve(tensors_.size());
  for (const auto& t : tensors_) example.push_back(t.select(0, index));
  return example;
}

Batch TensorDataset::get_batch(const std::vector<int64_t>& indices) const {
  const int64_t n = size();
  for (int64_t index : indices) check_index(index, n, "TensorDataset::get_batch");
  const auto count = static_cast<int64_t>(indices.size());
  // The index tensor borrows the vector's memory: no copy, and it dies before the vector.
  at::Tensor index = count == 0
                         ? at::empty({0}, at::kLong)
                         : at::from_blob(const_cast<int64_t*>(indices.data()), {count}, at::kLong);
  Batch batch;
  batch.reserve(tensors_.size());
  for (const auto& t : tensors_) {
    batch.push_back(t.index_select(0, t.is_cpu() ? index : index.to(t.device())));
  }
  return batch;
}

Subset::Subset(std::shared_ptr<const Dataset> base, std::vector<int64_t> indices)
    : base_(std::move(base)), indices_(std::move(indices)) {
  if (!base_) throw ConfigError("Subset needs a base data set, got nullptr.");
  const int64_t n = base_->size();
  for (int64_t index : indices_) check_index(index, n, "Subset");
}

int64_t Subset::size() const { return static_cast<int64_t>(indices_.size()); }

Batch Subset::get(int64_t index) const {
  check_index(index, size(), "Subset::get");
  return base_->get(indices_[index]);
}

Batch Subset::get_batch(const std::vector<int64_t>& indices) const {
  const int64_t n = size();
  std::vector<int64_t> base_indices;
  base_indices.reserve(indices.size());
  for (int64_t index : indices) {
    check_index(index, n, "Subset::get_batch");
    base_indices.push_back(indices_[index]);
  }
  return base_->get_batch(base_indices);
}

std::vector<std::shared_ptr<Subset>> random_split(std::shared_ptr<const Dataset> dataset,
                                                  const std::vector<int64_t>& lengths,
                                                  uint64_t seed) {
  if (!dataset) throw ConfigError("random_split needs a data set, got nullptr.");
  const int64_t n = dataset->size();
  int64_t total = 0;
  for (int64_t length : lengths) {
    if (length < 0) {
      throw ConfigError("random_split: lengths must not be negative, got " +
                        std::to_string(length) + ".");
    }
    total += length;
  }
  if (total != n) {
    throw ConfigError("random_split: the lengths add up to " + std::to_string(total) +
                      " but the data set has " + std::to_string(n) +
                      " examples. Pass lengths that sum to " + std::to_string(n) + ".");
  }
  at::Tensor perm = at::randperm(n, at::detail::createCPUGenerator(seed));
  const int64_t* order = perm.data_ptr<int64_t>();
  std::vector<std::shared_ptr<Subset>> subsets;
  subsets.reserve(lengths.size());
  int64_t offset = 0;
  for (int64_t length : lengths) {
    subsets.push_back(std::make_shared<Subset>(
        dataset, std::vector<int64_t>(order + offset, order + offset + length)));
    offset += length;
  }
  return subsets;
}

}  // namespace volt::data
