#pragma once
#include "volt/strategies/strategy.h"

namespace volt::strategies {

/// One process, one device (Lightning's SingleDeviceStrategy).
class SingleDeviceStrategy : public Strategy {
 public:
  SingleDeviceStrategy(c10::Device device, std::shared_ptr<accelerators::Accelerator> accelerator,
                       std::shared_ptr<precision::Precision> precision,
                       std::shared_ptr<environments::ClusterEnvironment> environment,
                       std::shared_ptr<checkpoint_io::CheckpointIO> checkpoint_io);
  std::string name() const override { return "single_device"; }
  c10::Device root_device() const override { return device_; }

 private:
  c10::Device device_;
};

}  // namespace volt::strategies
