#include "volt/checkpoint_io/async_checkpoint_io.h"

#include <iostream>

#include <ATen/core/Tensor.h>

#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/core/error.h"

namespace volt::checkpoint_io {

AsyncCheckpointIO::AsyncCheckpointIO(std::shared_ptr<CheckpointIO> inner)
    : inner_(inner ? std::move(inner) : std::make_shared<TorchCheckpointIO>()) {}

AsyncCheckpointIO::~AsyncCheckpointIO() {
  try {
    wait();
  } catch (const std::exception& e) {
    // A destructor must not throw; teardown() is where a run sees this failure.
    std::cerr << "volt: a background checkpoint write failed and was never reported: " << e.what() << std::endl;
  }
}

Checkpoint AsyncCheckpointIO::snapshot(const Checkpoint& checkpoint) {
  Checkpoint copy;
  copy.blobs = checkpoint.blobs;
  copy.meta = checkpoint.meta;
  for (const auto& [key, t] : checkpoint.tensors) {
    // clone() after to(): a CPU tensor's to(kCPU) is the same storage, which the next
    // optimizer step would change while the writer reads it.
    copy.tensors.emplace(key, t.detach().to(at::kCPU).clone(at::MemoryFormat::Contiguous));
  }
  return copy;
}

void AsyncCheckpointIO::join() {
  if (worker_.joinable()) worker_.join();
}

void AsyncCheckpointIO::wait() {
  join();
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::swap(error, error_);
  }
  if (error) std::rethrow_exception(error);
}

void AsyncCheckpointIO::save_checkpoint(const Checkpoint& checkpoint, const std::string& path) {
  wait();
  auto copy = std::make_shared<Checkpoint>(snapshot(checkpoint));
  worker_ = std::thread([this, copy, path] {
    try {
      inner_->save_checkpoint(*copy, path);
    } catch (const Error&) {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = std::current_exception();
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = std::make_exception_ptr(
          CheckpointError("background write of checkpoint '" + path + "' failed: " + e.what()));
    }
  });
}

Checkpoint AsyncCheckpointIO::load_checkpoint(const std::string& path) {
  wait();
  return inner_->load_checkpoint(path);
}

void AsyncCheckpointIO::remove_checkpoint(const std::string& path) {
  wait();
  inner_->remove_checkpoint(path);
}

void AsyncCheckpointIO::teardown() {
  wait();
  inner_->teardown();
}

}  // namespace volt::checkpoint_io
