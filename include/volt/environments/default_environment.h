#pragma once
#include "volt/environments/cluster_environment.h"

namespace volt::environments {

/// torchrun's variables (MASTER_ADDR, MASTER_PORT, RANK, LOCAL_RANK, WORLD_SIZE,
/// GROUP_RANK/NODE_RANK), defaulting to a single process on 127.0.0.1 when unset.
/// Lightning's LightningEnvironment.
class DefaultEnvironment : public ClusterEnvironment {
 public:
  DefaultEnvironment();
  /// True when the variables say a launcher started this process (WORLD_SIZE and RANK set).
  static bool detect();
  std::string name() const override { return "default"; }
  bool creates_processes_externally() const override { return external_; }
  std::string main_address() const override { return main_address_; }
  int main_port() const override { return main_port_; }
  int64_t world_size() const override { return world_size_; }
  int64_t global_rank() const override { return global_rank_; }
  int64_t local_rank() const override { return local_rank_; }
  int64_t node_rank() const override { return node_rank_; }
  void set_world_size(int64_t size) override { world_size_ = size; }
  void set_global_rank(int64_t rank) override { global_rank_ = rank; }

 private:
  bool external_ = false;
  std::string main_address_ = "127.0.0.1";
  int main_port_ = 29500;
  int64_t world_size_ = 1;
  int64_t global_rank_ = 0;
  int64_t local_rank_ = 0;
  int64_t node_rank_ = 0;
};

}  // namespace volt::environments
