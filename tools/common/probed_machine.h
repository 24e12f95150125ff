// This machine's probed devices as manifests, numbered as ggml numbers them, for the tools that plan
// for the local machine (plan-model without --device, and with a --device list that lacks a CPU).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "stowage/planner/from_probe.h"
#include "stowage/planner/manifest.h"
#include "stowage/runtime/device_probe.h"
#include "stowage/runtime/status.h"

namespace stowage::tools {

/// The manifests of `probed` (ProbeReport::devices, ggml registry order) for which `keep` is true, in
/// that order. ManifestFromProbe names CUDA devices "CUDA{index}"; here each indexed manifest gets the
/// next index of its backend in probe order, so two probed GPUs become CUDA0 and CUDA1 (with buffer
/// types CUDA0, CUDA0_Split, CUDA1, ...) like the devices of a ggml backend reg. Devices that `keep`
/// drops do not consume an index. Errors: those of ManifestFromProbe.
template <typename Keep>
Result<std::vector<planner::DeviceManifest>> ProbedManifests(const std::vector<ProbedDevice>& probed,
                                                             Keep keep) {
  std::vector<planner::DeviceManifest> out;
  std::map<std::string, int> next_index;  // per backend
  for (const ProbedDevice& d : probed) {
    if (!keep(d)) continue;
    STOWAGE_ASSIGN_OR_RETURN(planner::DeviceManifest m, planner::ManifestFromProbe(d));
    out.push_back(m.IsIndexed() ? m.WithIndex(next_index[m.backend]++) : std::move(m));
  }
  return out;
}

}  // namespace stowage::tools
