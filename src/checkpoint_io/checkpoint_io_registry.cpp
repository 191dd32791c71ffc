#include "volt/checkpoint_io/checkpoint_io_registry.h"

#include <mutex>

#include "volt/checkpoint_io/async_checkpoint_io.h"
#include "volt/checkpoint_io/torch_checkpoint_io.h"

namespace volt::checkpoint_io {

void register_builtin_checkpoint_ios(CheckpointIORegistry& r) {
  r.add("torch", "one LibTorch pickle archive per checkpoint, written atomically (TorchCheckpointIO)",
        []() -> std::shared_ptr<CheckpointIO> { return std::make_shared<TorchCheckpointIO>(); });
  r.add("async", "torch files written by a background thread; the loop waits only for the copy (AsyncCheckpointIO)",
        []() -> std::shared_ptr<CheckpointIO> { return std::make_shared<AsyncCheckpointIO>(); });
}

CheckpointIORegistry& checkpoint_io_registry() {
  static CheckpointIORegistry registry("checkpoint_io");
  static std::once_flag built_in;
  std::call_once(built_in, [] { register_builtin_checkpoint_ios(registry); });
  return registry;
}

void register_checkpoint_io(const std::string& key, std::string description, CheckpointIORegistry::Factory factory) {
  checkpoint_io_registry().add(key, std::move(description), std::move(factory));
}

}  // namespace volt::checkpoint_io
