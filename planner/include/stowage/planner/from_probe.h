// Manifests of this machine's probed devices (list-devices --emit-manifest).
//
// Links the runtime's device probing (stowage_devices) with the manifest model; lives in its own
// library target (stowage_manifest_probe) so stowage_manifest itself needs no runtime backends.
#pragma once

#include <string>

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

}  // namespace stowage::planner
