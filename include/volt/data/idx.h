#pragma once
#include <string>

#include <ATen/core/Tensor.h>

#include "volt/data/dataset.h"

namespace volt::data {

/// Reads an IDX file (the MNIST format), gzip-compressed or not, into a tensor of its
/// element type and shape. Throws DataError naming the file and what is wrong with it
/// (missing, not a regular file, truncated, bad magic, sizes that do not match). A FIFO or
/// device is refused before it is opened (opening a FIFO would block).
at::Tensor read_idx(const std::string& path);

/// Where Debian's dataset-fashion-mnist package installs the files.
constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

/// Loads an MNIST-format folder ({train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]):
/// images as float32 [N, 1, 28, 28] scaled to [0, 1], labels as int64 [N].
/// Throws DataError if the folder or a file is missing or not what it should be (a file
/// given as the folder, a folder or FIFO given as a file), a file is malformed or empty,
/// images and labels disagree, or (num_classes > 0) a label is outside 0 .. num_classes - 1.
std::shared_ptr<TensorDataset> load_mnist_format(const std::string& dir, bool train, int64_t num_classes = 10);

}  // namespace volt::data
