#include "volt/strategies/single_device_strategy.h"

namespace volt::strategies {

SingleDeviceStrategy::SingleDeviceStrategy(c10::Device device, std::shared_ptr<accelerators::Accelerator> accelerator,
                                           std::shared_ptr<precision::Precision> precision,
                                           std::shared_ptr<environments::ClusterEnvironment> environment,
                                           std::shared_ptr<checkpoint_io::CheckpointIO> checkpoint_io)
    : Strategy(std::move(accelerator), std::move(precision), std::move(environment), std::move(checkpoint_io)),
      device_(device) {}

}  // namespace volt::strategies
