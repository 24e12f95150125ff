// Fit: does a plan fit the devices' memory, and the largest -ngl that does (--fit), computed from
// the plan's exact figures instead of llama.cpp's trial loads (llama_params_fit, DEC25).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "stowage/planner/graph.h"
#include "stowage/planner/model_graphs.h"
#include "stowage/planner/place_model.h"
#include "stowage/runtime/status.h"

namespace stowage::planner {

/// Memory a plan needs on one device.
struct DeviceMemoryUse {
  int device = 0;  ///< index into PlacementOutcome::devices.devices
  std::string name;
  uint64_t needed = 0;  ///< bytes: weights (not mapped), KV, compute, output buffers held there
  /// `needed` by BufferUsage (kWeights, kKvCache, kCompute, kOutput): the same buffers, so the four
  /// add up to `needed` (the deployment report's columns).
  uint64_t by_usage[4] = {0, 0, 0, 0};
  uint64_t available = 0;  ///< bytes: free - reserve (0 when the reserve exceeds free memory)
  bool reported = true;    ///< false when the manifest reports no memory (total 0): never checked
};

/// ggml-cuda's row granularity of a split buffer (get_row_rounding: mmq_y = 128 on NVIDIA compute
/// capability >= 7.0, FEB25). Manifests do not carry the compute capability; every GPU of the
/// shipped registry is >= 7.0.
inline constexpr int64_t kRowSplitRounding = 128;
/// ggml-cuda MATRIX_ROW_PADDING: each device's slice of a matrix is padded by the bytes of
/// (512 - ne0 % 512) elements when ne0 is not a multiple of 512.
inline constexpr int64_t kMatrixRowPadding = 512;

/// Per split weight buffer of `o` (a buffer whose buft is some device's split buft): the bytes each
/// device holds, for the devices of that buft's backend among the model devices, in model order
/// (the devices ggml-cuda's split buffer spreads over), split as the CUDA backend splits them
/// (runtime/src/backends/cuda/row_split.h, ggml-cuda get_row_split / ggml_backend_cuda_split_buffer_type
/// rules): starts from RowSplitStarts(the buft's recorded PlacedBuft::tensor_split — the split the
/// plan hands the runtime, see RecordTensorSplit —, their memory totals), each device's rows from
/// RowSplit with kRowSplitRounding. Per weight (each stored tensor once): rows = ne1 * ne2 * ne3, a
/// device's bytes = its rows * RowSize(type, ne0) plus the MATRIX_ROW_PADDING bytes when it holds any row.
/// Needs PlanMemory's buffers/offsets in `m`. Errors: kInternal when a split buffer has no device.
Result<std::vector<SplitBufferShare>> RowSplitShares(const ModelGraphs& m, const PlacementOutcome& o);

/// The device whose memory plan buffer `buffer` (index into o.memory.buffers) counts for, by
/// DeviceMemory's rules below: its buft's device, or the CPU for host memory (host bufts and ACCEL
/// devices' buffers); kNoDevice for a mapped buffer (file pages), kSplitShares for a -sm row split
/// buffer (its bytes count for each device by PlacementOutcome::split_shares).
inline constexpr int kNoDevice = -1;
inline constexpr int kSplitShares = -2;
int BufferDevice(const PlacementOutcome& o, int buffer);

/// Per device: the buffers of buffer types that are not host memory count for their device; host
/// buffer types (CPU, CPU_REPACK, CUDA_Host) and the buffers of ACCEL devices (ONEDNN: host memory
/// in another layout) count for the CPU; mapped buffers count for nobody
/// (file pages); a -sm row split buffer counts for each device with its share
/// (PlacementOutcome::split_shares) instead of wholly for its buft's device.
std::vector<DeviceMemoryUse> DeviceMemory(const PlacementOutcome& o);

/// kResourceExhausted naming the first device whose needed bytes exceed its available bytes:
/// "does not fit: device D needs N bytes (X MiB) but has A bytes (Y MiB) available (free F MiB -
/// reserve R MiB)". With `devices_only`, only GPU devices are checked (host memory -- the CPU and
/// ACCEL devices -- is skipped, as llama_params_fit skips host buffer types, DEC25), and each GPU
/// must also keep `margin` bytes free (llama.cpp's --fit-target; the message then names it).
Status CheckFit(const PlacementOutcome& o, bool devices_only = false, uint64_t margin = 0);

/// One warning per GPU device of `o` that holds bytes of the plan but whose manifest reports no
/// memory (memory.total 0, so CheckFit cannot check it; llama.cpp common/fit.cpp, DEC25, warns
/// "device %s did not report memory; --fit will not use it"): "device CUDA0 did not report memory
/// (<manifest file>: memory.total 0): the 12.50 MiB planned on it were not checked against its free
/// memory". Empty when every such device is unused or reports its memory.
std::vector<std::string> UnreportedMemoryWarnings(const PlacementOutcome& o);

/// llama.cpp's default --fit-target (-fitt): 1024 MiB kept free on each device (common, DEC25).
inline constexpr uint64_t kDefaultFitTargetBytes = 1024ull << 20;

/// The largest n_gpu_layers in [0, max_ngl] for which `fits(ngl)` is true, by binary search.
/// `fits` must be monotonic (true up to some ngl, false above): plan-model passes CheckFit with
/// devices_only, because GPU memory grows with ngl while host memory shrinks (a host that is too
/// small at the largest fitting ngl is too small at every smaller one, and the final plan's full
/// CheckFit reports it). `fits` returns an error for planning failures other than "does not fit".
/// Errors: kResourceExhausted when even 0 does not fit (carrying the message of that attempt),
/// errors of `fits`.
Result<int> FitGpuLayers(int max_ngl, const std::function<Result<bool>(int ngl, std::string* why)>& fits);

/// --fit and -ngl auto (plan-model, stowage-run's on-the-fly plan): FitGpuLayers over
/// [0, n_layer + 1] where a try is BuildModelGraphs(gguf, hp, cfg) (`hp`: ReadHParams(gguf)'s, so
/// that the model is not read and validated again) + PlaceModel(machine, opt with that
/// n_gpu_layers) + CheckFit(devices_only, margin). 0 without trying when `machine` has no GPU
/// device. Unlike llama_params_fit it moves whole layers only (no MoE expert overflow, no context
/// reduction). Errors: kInvalidArgument naming a GPU device whose manifest reports no memory
/// (memory.total 0: llama.cpp's --fit "will not use it"; here it cannot be left out of the layer
/// split, so --fit stops and asks for --free or -ngl), those of FitGpuLayers, BuildModelGraphs and
/// PlaceModel.
Result<int> FitGpuLayersToDevices(const GgufFile& gguf, const HParams& hp, const ContextConfig& cfg,
                                  const std::vector<DeviceManifest>& machine, const PlacementOptions& opt,
                                  uint64_t margin = kDefaultFitTargetBytes);

}  // namespace stowage::planner
