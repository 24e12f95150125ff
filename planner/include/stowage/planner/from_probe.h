// Manifests of this machine's probed devices (list-devices --emit-manifest).
//
// Links the runtime's device probing (stowage_devices) with the manifest model; lives in its own
// library target (stowage_manifest_probe) so stowage_manifest itself needs no runtime backends.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "stowage/planner/manifest.h"
#include "stowage/runtime/device_probe.h"

namespace stowage::planner {

/// The manifest of a probed device: its description as it is (DeviceDesc, the type both share:
/// buffer types, caps, supports_buft, op table and extra buffer types' rules, offload_op), so that
/// the manifest answers supports_op as the probed device for every query, and its
/// properties as notes ("Probed by list-devices. cores: ...; isa: ..."). CUDA device names become
/// "CUDA{index}" (and their buffer types likewise) so that a list of emitted GPUs is numbered like
/// ggml numbers them. Errors: none today (Result kept for manifest validation to come).
Result<DeviceManifest> ManifestFromProbe(const ProbedDevice& device);

/// Registry key of an emitted manifest: "local-" + lower-case device name with characters other
/// than [a-z0-9._-] replaced by '-' ("local-cpu", "local-cuda0", "local-onednn").
std::string LocalManifestKey(const ProbedDevice& device);

/// The manifests of `probed` (ProbeReport::devices, ggml registry order) for which `keep` is true
/// (every device when `keep` is empty), in that order: the machine plan-model plans for without
/// --device, and stowage-run and the C API (stowage_plan_model) when they plan on the fly.
/// ManifestFromProbe names CUDA devices "CUDA{index}"; here each indexed manifest gets the next
/// index of its backend in probe order, so two probed GPUs become CUDA0 and CUDA1 (with buffer
/// types CUDA0, CUDA0_Split, CUDA1, ...) like the devices of a ggml backend reg. Devices that `keep`
/// drops do not consume an index. Errors: those of ManifestFromProbe.
Result<std::vector<DeviceManifest>> ManifestsFromProbe(
    const std::vector<ProbedDevice>& probed, const std::function<bool(const ProbedDevice&)>& keep = nullptr);

}  // namespace stowage::planner
