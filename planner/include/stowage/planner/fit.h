// Fit: does a plan fit the devices' memory, and the largest -ngl that does (--fit), computed from
// the plan's exact figures instead of llama.cpp's trial loads (llama_params_fit, DEC25).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "stowage/planner/graph.h"  // first: graph.h names stowage::GgmlOp unqualified
#include "stowage/planner/place_model.h"
#include "stowage/runtime/status.h"

namespace stowage::planner {

/// Memory a plan needs on one device.
struct DeviceMemoryUse {
  int device = 0;          ///< index into PlacementOutcome::devices.devices
  std::string name;
  uint64_t needed = 0;     ///< bytes: weights (not mapped), KV, compute, output buffers held there
  uint64_t available = 0;  ///< bytes: free - reserve (0 when the reserve exceeds free memory)
  bool reported = true;    ///< false when the manifest reports no memory (total 0): never checked
};

/// Per device: the buffers of buffer types that are not host memory count for their device; host
/// buffer types (CPU, CPU_REPACK, CUDA_Host) count for the CPU; mapped buffers count for nobody
/// (file pages).
std::vector<DeviceMemoryUse> DeviceMemory(const PlacementOutcome& o);

/// kResourceExhausted naming the first device whose needed bytes exceed its available bytes:
/// "does not fit: device D needs N bytes (X MiB) but has A bytes (Y MiB) available (free F MiB -
/// reserve R MiB)".
Status CheckFit(const PlacementOutcome& o);

/// The largest n_gpu_layers in [0, max_ngl] for which `fits(ngl)` is true, by binary search
/// (fitting is monotonic in ngl for one device list and tensor split). `fits` returns an error
/// for planning failures other than "does not fit". Errors: kResourceExhausted when even 0 does not
/// fit (carrying the message of that attempt), errors of `fits`.
Result<int> FitGpuLayers(int max_ngl, const std::function<Result<bool>(int ngl, std::string* why)>& fits);

}  // namespace stowage::planner
