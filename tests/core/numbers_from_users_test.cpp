// Device counts, device ids, --assume and TPU accelerator types are text from a user or the environment:
// digits beyond 64 bits were passed to std::stoll, whose std::out_of_range nothing caught (volt plan: SIGABRT).
#include <string>

#include <gtest/gtest.h>

#include "support/expect.h"
#include "volt/accelerators/devices.h"
#include "volt/accelerators/hardware_probe.h"
#include "volt/connectors/signal_connector.h"
#include "volt/core/environ.h"
#include "volt/core/error.h"
#include "volt/core/tpu_topology.h"
#include "volt/environments/slurm_environment.h"

namespace {

using volt::ConfigError;
using volt::testing::error_message;

const std::string kBig = "99999999999999999999";

TEST(DevicesSpec, CountBeyond64BitsIsAConfigErrorNamingIt) {
  const std::string message = error_message<ConfigError>([] { volt::accelerators::DevicesSpec::parse(kBig); });
  EXPECT_NE(message.find("device count " + kBig), std::string::npos) << message;
  EXPECT_NE(message.find("too large"), std::string::npos) << message;
}

TEST(DevicesSpec, IdBeyond64BitsIsAConfigErrorNamingIt) {
  for (const std::string& text : {"0," + kBig, "[" + kBig + "]", kBig + ","}) {
    const std::string message = error_message<ConfigError>([&] { volt::accelerators::DevicesSpec::parse(text); });
    EXPECT_NE(message.find("device id " + kBig), std::string::npos) << message;
  }
}

TEST(DevicesSpec, OrdinaryCountsAndIdsStillParse) {
  EXPECT_EQ(volt::accelerators::DevicesSpec::parse("8").count, 8);
  EXPECT_EQ(volt::accelerators::DevicesSpec::parse("0,3").ids, (std::vector<int64_t>{0, 3}));
}

TEST(HardwareProbe, AssumedCountBeyond64BitsIsAConfigError) {
  const volt::Environ env;
  for (const std::string& spec : {"cuda=" + kBig, "gpu=" + kBig, "tpu=" + kBig}) {
    const std::string message =
        error_message<ConfigError>([&] { volt::accelerators::HardwareProbe::assume(spec, env); });
    EXPECT_NE(message.find(kBig), std::string::npos) << message;
    EXPECT_NE(message.find("too large"), std::string::npos) << message;
  }
  EXPECT_EQ(volt::accelerators::HardwareProbe::assume("cuda=8", env).cuda_devices, 8);
}

TEST(TpuTopology, AcceleratorTypeBeyond64BitsIsAConfigError) {
  const std::string message = error_message<ConfigError>([] { volt::parse_tpu_accelerator_type("v4-" + kBig); });
  EXPECT_NE(message.find("size " + kBig), std::string::npos) << message;
  EXPECT_NE(error_message<ConfigError>([] { volt::parse_tpu_accelerator_type("v" + kBig + "-8"); }).find(kBig),
            std::string::npos);
  EXPECT_EQ(volt::parse_tpu_accelerator_type("v4-8").devices_per_host, 4);
}

TEST(SlurmNodeList, RangeBeyond64BitsIsAConfigErrorNotAnAbort) {
  const std::string list = "n[1-" + kBig + "]";
  const std::string message = error_message<ConfigError>([&] { volt::environments::expand_slurm_nodelist(list); });
  EXPECT_NE(message.find(list), std::string::npos) << message;
}

TEST(SlurmNodeList, RangeOfMoreHostsThanAJobHasIsRefusedInsteadOfExpanded) {
  // A billion host names would take minutes and gigabytes before anything said what was wrong.
  const std::string message =
      error_message<ConfigError>([] { volt::environments::expand_slurm_nodelist("n[1-1000000000]"); });
  EXPECT_NE(message.find("more than 100000 hosts"), std::string::npos) << message;
  EXPECT_EQ(volt::environments::expand_slurm_nodelist("n[01-03],m7").size(), 4u);
}

TEST(SignalConnector, SignalNumberBeyondIntIsRefused) {
  EXPECT_THROW(volt::connectors::SignalConnector::parse_signal(kBig, "slurm_requeue_signal"), ConfigError);
  EXPECT_THROW(volt::connectors::SignalConnector::parse_signal("4294967306", "slurm_requeue_signal"), ConfigError);
  EXPECT_EQ(volt::connectors::SignalConnector::parse_signal("10", "slurm_requeue_signal"), 10);
}

}  // namespace
