// The Plan as text: the table `volt plan` prints and its JSON form.
#include <sstream>

#include <nlohmann/json.hpp>

#include "volt/connectors/accelerator_connector.h"

namespace volt::connectors {

std::string Plan::describe() const {
  std::ostringstream out;
  auto row = [&](const char* key, const std::string& value) { out << "  " << key << std::string(18 - std::string(key).size(), ' ') << value << "\n"; };
  std::string devices;
  for (const auto& d : parallel_devices) devices += (devices.empty() ? "" : ", ") + d;
  row("accelerator", accelerator + (tpu_platform.empty() ? "" : " (" + tpu_platform + ")"));
  row("strategy", strategy + (find_unused_parameters ? " (find_unused_parameters)" : ""));
  row("precision", precision);
  row("cluster_env", cluster_env + (processes_started_externally ? " (processes started by the launcher)" : ""));
  row("launcher", launcher);
  row("num_nodes", std::to_string(num_nodes));
  row("num_devices", std::to_string(num_devices) + " per node");
  row("num_processes", std::to_string(num_processes) + " per node");
  row("world_size", std::to_string(world_size));
  row("ranks", "global " + std::to_string(global_rank) + ", local " + std::to_string(local_rank) + ", node " +
                   std::to_string(node_rank));
  row("parallel_devices", devices);
  row("root_device", root_device);
  if (accelerator == "tpu") row("tpu_runtime", tpu_runtime_info);
  row("main_address", main_address + ":" + std::to_string(main_port) +
                          (launcher_store ? " (the launcher's store, keys under " + store_prefix + ")" : ""));
  if (accelerator == "cpu") row("threads", std::to_string(num_threads) + " per process");
  row("checkpoint_io", checkpoint_io + (async_checkpoint ? " (in the background)" : ""));
  row("hardware", hardware);
  for (const auto& w : warnings) row("warning", w);
  return out.str();
}

std::string Plan::to_json() const {
  nlohmann::json j = {{"accelerator", accelerator},
                      {"strategy", strategy},
                      {"precision", precision},
                      {"cluster_env", cluster_env},
                      {"launcher", launcher},
                      {"num_nodes", num_nodes},
                      {"num_devices", num_devices},
                      {"num_processes", num_processes},
                      {"world_size", world_size},
                      {"global_rank", global_rank},
                      {"local_rank", local_rank},
                      {"node_rank", node_rank},
                      {"parallel_devices", parallel_devices},
                      {"device_ids", device_ids},
                      {"root_device", root_device},
                      {"main_address", main_address},
                      {"main_port", main_port},
                      {"launcher_store", launcher_store},
                      {"find_unused_parameters", find_unused_parameters},
                      {"process_group_backend", ddp.backend},
                      {"process_group_timeout_s", static_cast<double>(ddp.timeout.count()) / 1000.0},
                      {"num_threads", num_threads},
                      {"checkpoint_io", checkpoint_io},
                      {"async_checkpoint", async_checkpoint},
                      {"hardware", hardware},
                      {"warnings", warnings}};
  if (!tpu_platform.empty()) j["tpu_platform"] = tpu_platform;
  if (accelerator == "tpu") {
    j["tpu_runtime"] = tpu_runtime;
    j["tpu_runtime_info"] = tpu_runtime_info;
  }
  return j.dump();
}

}  // namespace volt::connectors
