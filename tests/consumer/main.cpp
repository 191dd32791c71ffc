// Uses the installed Volt from outside its source tree (see CMakeLists.txt here).
#include <cstdint>
#include <iostream>

#include <ATen/ATen.h>

#include "volt/core/compat.h"
#include "volt/data/dataset.h"

int main() {
  volt::data::TensorDataset dataset({at::arange(16, at::kFloat).reshape({8, 2}), at::arange(8)});
  const int64_t size = dataset.size();
  std::cout << "consumer: TensorDataset of " << size << " rows, LibTorch "
            << volt::compat::torch_version() << "\n";
  if (size != 8) {
    std::cerr << "consumer: expected 8 rows, got " << size << "\n";
    return 1;
  }
  return 0;
}
