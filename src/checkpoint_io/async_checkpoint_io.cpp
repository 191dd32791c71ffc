#include "volt/checkpoint_io/async_checkpoint_io.h"

#include <iostream>

#include <ATen/core/Tensor.h>

#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/core/error.h"
#include "volt/core/error_boundary.h"
#include "volt/core/file_check.h"

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
  std::shared_ptr<Checkpoint> copy;
  try {
    copy = std::make_shared<Checkpoint>(snapshot(checkpoint));
  } catch (...) {
    rethrow_as_volt_error("copying the checkpoint for " + quote_path(path) + " to memory", ErrorKind::kCheckpoint);
  }
  worker_ = std::thread([this, copy, path] {
    try {
      inner_->save_checkpoint(*copy, path);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = to_volt_error(std::current_exception(), "background write of checkpoint " + quote_path(path),
                             ErrorKind::kCheckpoint);
    }
  });
}

Checkpoint AsyncCheckpointIO::load_checkpoint(const std::string& path) {
  wait();
  try {
    return inner_->load_checkpoint(path);
  } catch (...) {
    rethrow_as_volt_error("loading the checkpoint " + quote_path(path), ErrorKind::kCheckpoint);
  }
}

void AsyncCheckpointIO::remove_checkpoint(const std::string& path) {
  wait();
  try {
    inner_->remove_checkpoint(path);
  } catch (...) {
    rethrow_as_volt_error("removing the checkpoint " + quote_path(path), ErrorKind::kCheckpoint);
  }
}

void AsyncCheckpointIO::teardown() {
  wait();
  inner_->teardown();
}

}  // namespace volt::checkpoint_io
