#pragma once
#include <string>

#include "volt/environments/cluster_environment.h"

namespace volt::environments {

/// Base of the environments whose layout is a handful of values read once at
/// construction: it stores them and answers the interface from them.
class FixedLayoutEnvironment : public ClusterEnvironment {
 public:
  std::string main_address() const override { return main_address_; }
  int main_port() const override { return main_port_; }
  int64_t world_size() const override { return world_size_; }
  int64_t global_rank() const override { return global_rank_; }
  int64_t local_rank() const override { return local_rank_; }
  int64_t node_rank() const override { return node_rank_; }
  bool joins_launcher_store() const override { return launcher_store_; }
  std::string store_prefix() const override { return store_prefix_; }
  void set_world_size(int64_t size) override { world_size_ = size; }
  void set_global_rank(int64_t rank) override { global_rank_ = rank; }

 protected:
  /// Throws ConfigError unless 1 <= world and 0 <= rank < world, naming `source`.
  void check_ranks(const std::string& source) const;
  /// Sets main_port_ from a variable's value, checking the range.
  void set_port(int64_t port, const std::string& variable);

  std::string main_address_ = "127.0.0.1";
  int main_port_ = 29500;
  int64_t world_size_ = 1, global_rank_ = 0, local_rank_ = 0, node_rank_ = 0;
  bool launcher_store_ = false;
  std::string store_prefix_;
};

}  // namespace volt::environments
