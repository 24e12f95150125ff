// Devices of a plan made across hosts (plan-model --cluster): the devices of host 0 keep their
// names ("CPU", "CUDA0"); a device of host h >= 1 is named "MPI<h>:<its name on that host>"
// ("MPI1:CPU", "MPI2:CUDA0"), a GPU-type model device of backend "MPI" (as llama.cpp's RPC backend
// makes a remote server's device a GPU-type device "RPC[host:port]"). The name is the record of the
// host: MPI rank h runs the device, every other rank skips its splits.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace stowage {

/// The prefix of the devices of host `host` (>= 1): "MPI<host>:".
inline std::string HostDevicePrefix(int host) { return "MPI" + std::to_string(host) + ":"; }

/// The plan's name of device `local_name` of host `host`: `local_name` itself on host 0, else
/// HostDevicePrefix(host) + local_name.
inline std::string HostDeviceName(int host, std::string_view local_name) {
  return host == 0 ? std::string(local_name) : HostDevicePrefix(host) + std::string(local_name);
}

/// The host (MPI rank) of plan device `name`: h for "MPI<h>:..." with h a decimal number of 1 to 9
/// digits, else 0 (a device of host 0, or of a single-host plan).
inline int HostOfDevice(std::string_view name) {
  if (name.size() < 5 || name.compare(0, 3, "MPI") != 0) return 0;
  size_t i = 3;
  long long h = 0;
  while (i < name.size() && i < 12 && name[i] >= '0' && name[i] <= '9') h = h * 10 + (name[i++] - '0');
  if (i == 3 || i >= name.size() || name[i] != ':' || h <= 0) return 0;
  return static_cast<int>(h);
}

/// The name device `name` has on its own host: what follows "MPI<h>:", else `name`.
inline std::string_view LocalDeviceName(std::string_view name) {
  return HostOfDevice(name) == 0 ? name : name.substr(name.find(':') + 1);
}

}  // namespace stowage
