#pragma once
#include <string>

#include <ATen/core/Tensor.h>

#include "volt/data/dataset.h"

namespace volt::data {

/// Reads an IDX file (the MNIST format), gzip-compressed or not, into a tensor of its
/// element type and shape. Throws DataError naming the file and what is wrong with it
/// (missing, truncated, bad magic, sizes that do not match).
at::Tensor read_idx(const std::string& path);

/// Where Debian's dataset-fashion-mnist package installs the files.
constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

/// Loads an MNIST-format folder ({train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]):
/// images as float32 [N, 1, 28, 28] scaled to [0, 1], labels as int64 [N].
/// Throws DataError if a file is missing, malformed, or images and labels disagree.
std::shared_ptr<TensorDataset> load_mnist_format(const std::string& dir, bool train);

}  // namespace volt::data
