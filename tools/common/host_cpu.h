// A host's CPU in a plan across hosts (plan-model --cluster): ClusterDevices (planner cluster.h)
// turns every device of host h >= 1 into a GPU-type model device "MPI<h>:<name>", the host's CPU
// included; the tools show that device as the host's CPU, not as a GPU.
#pragma once

#include <string_view>

#include "stowage/runtime/host_devices.h"

namespace stowage::tools {

/// Whether plan device `name` is the CPU of a host h >= 1: "MPI<h>:" followed by `cpu_name`, the
/// name of host 0's CPU device (every host's CPU device has that name: ggml-cpu's "CPU").
inline bool IsHostCpu(std::string_view name, std::string_view cpu_name) {
  return HostOfDevice(name) > 0 && LocalDeviceName(name) == cpu_name;
}

}  // namespace stowage::tools
