// A cluster of hosts for plans across machines (plan-model --cluster FILE): each host a device
// list of registry manifests with free-memory overrides, plus the links between hosts.
//
// The cluster turns into one device list the usual planner places on (llama.cpp's RPC model,
// applied to hosts): host 0's devices as they are; every device of host h >= 1 as a GPU-type model
// device "MPI<h>:<name>" (stowage/runtime/host_devices.h) of backend "MPI" with one device buffer
// type "MPI<h>:<buft>", no host, split or extra buffer types and no op offload, its op table and
// memory the host device's. The layer map then gives contiguous layer ranges to the model devices
// in list order (host 0's GPUs, then host 1's devices, ...; the layers -ngl does not offload stay
// on host 0's CPU), split by memory with the -ts rule: pipeline stages. The scheduler's split
// inputs between devices of different hosts are the activations that cross hosts.
//
// The file (JSON, at most 1 MiB):
//   { "cluster_version": 1, "description": "...",
//     "hosts": [ { "name": "node0", "devices": "cpu", "free": "CPU=16GiB" },
//                { "name": "node1", "devices": "h200,cpu", "free": "CUDA0=100GiB,CPU=64GiB" } ],
//     "links": [ { "hosts": [0, 1], "bandwidth_bytes_per_second": 1.25e9, "latency_seconds": 5e-5 } ] }
// "devices" is a --device list (registry keys or manifest files, a relative file name read next to
// the cluster file when one of that name is there; a list needs a CPU), "free" a
// --free list in the host's own device names; "links" is optional (figures for a cost model).
#pragma once

#include <string>
#include <vector>

#include "stowage/planner/manifest.h"
#include "stowage/runtime/status.h"

namespace stowage::planner {

/// The highest cluster_version this build reads.
inline constexpr int kClusterVersion = 1;
/// At most this many hosts (MPI ranks) in a cluster.
inline constexpr int kMaxClusterHosts = 64;

/// A link between two hosts, one direction's figures.
struct ClusterLink {
  int host_a = 0, host_b = 0;
  double bandwidth_bytes_per_second = 0;  ///< > 0
  double latency_seconds = 0;             ///< >= 0
};

/// One host: its name and its devices (manifests with the overrides applied, host-local names).
struct ClusterHost {
  std::string name;
  std::vector<DeviceManifest> devices;
};

struct Cluster {
  std::string path;  ///< the file it was read from
  std::string description;
  std::vector<ClusterHost> hosts;
  std::vector<ClusterLink> links;
};

/// Parses a cluster file's text; `file` names it in messages, `registry_dirs` are the folders the
/// hosts' device lists are looked up in (RegistrySearchDirs). Errors (kInvalidArgument, one line
/// "<file>: $.<key>: <what>, expected <what>"): not a JSON object; an unknown key; cluster_version
/// missing or above kClusterVersion; no hosts or more than kMaxClusterHosts; a host without a name,
/// two hosts of one name, a device list without a CPU or with an error (the registry's message), a
/// bad "free" list; a device of host >= 1 without memory ("give it with free"); a link naming a
/// host outside the list, a host with itself, bandwidth <= 0 or latency < 0.
Result<Cluster> ParseCluster(const std::string& json_text, const std::string& file,
                             const std::vector<std::string>& registry_dirs);

/// Reads and parses a cluster file (ReadRegularFile's errors, then ParseCluster's).
Result<Cluster> LoadClusterFile(const std::string& path, const std::vector<std::string>& registry_dirs);

/// The device list the planner places on: host 0's devices, then each device of hosts 1.. as
/// "MPI<h>:<name>" (see the top of this file), host by host in file order.
std::vector<DeviceManifest> ClusterDevices(const Cluster& cluster);

}  // namespace stowage::planner
