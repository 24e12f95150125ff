// Fit: does a plan fit the devices' memory, and --fit: the context, layers, tensor split and
// overrides that do, chosen as llama.cpp 2026's common_fit_params chooses them, from the plan's
// exact figures instead of its no_alloc trial loads.
#pragma once

#include <cstdint>
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

/// --fit's settings (llama.cpp 2026 common: -fitt, -fitc).
struct FitOptions {
  /// Bytes to keep free on each model device, in DeviceSet's model-device order (-fitt
  /// MiB0,MiB1,...). One value is broadcast to every device; with several, the devices past the
  /// list keep kDefaultFitTargetBytes (common_params::fit_params_target). Empty: the default each.
  std::vector<uint64_t> margins;
  /// -fitc: the smallest context the fit sets when it shrinks an automatic context (asked n_ctx 0);
  /// UINT32_MAX: never shrink it (llama.cpp sets that when -c 0 is given explicitly).
  uint32_t n_ctx_min = 4096;
};

/// What --fit chose, as llama.cpp 2026 common_fit_params leaves llama_model_params and
/// llama_context_params (llama-fit-params prints them as command-line arguments, Args()).
struct FitChoice {
  /// The context (tokens, every sequence together) to plan with: the asked one, the model's
  /// n_ctx_train * n_seq_max when it was 0, or the smaller one the fit shrank it to.
  uint32_t n_ctx = 0;
  /// -1: not changed, every layer and the output (llama.cpp 2026's default n_gpu_layers).
  int n_gpu_layers = -1;
  /// -ts: layers per model device, set when there are several (empty otherwise).
  std::vector<float> tensor_split;
  /// -ot: the overflowing FFN tensors of partial layers, to the CPU or the next device.
  std::vector<TensorOverride> overrides;
  /// The fit's trace (common_params_fit_impl's lines, without the prefix).
  std::vector<std::string> log;
  /// Non-empty when the fit gave up (common_params_fit_exception, "failed to fit params to free
  /// device memory: <why>"): the parameters are then those reached so far (llama.cpp loads them).
  std::string failure;

  /// llama-fit-params' line: "-c N -ngl N[ -ts A,B][ -ot "PAT=BUFT,..."]".
  std::string Args() const;
};

/// --fit and -ngl auto as llama.cpp 2026 common_fit_params (common/fit.cpp) does it, each of its
/// memory measurements (common_get_device_memory_data: a no_alloc load) being this planner's
/// PlaceModel + DeviceMemory of the model devices (host buffers count for nobody):
///   1. Measure with every layer offloaded (tensor split by free memory); when every model device
///      keeps its margin free, change nothing.
///   2. An automatic context (asked.n_ctx 0; n_ctx_max = n_ctx_train * n_seq_max) is shrunk,
///      interpolating between n_ctx_max and n_ctx_min * n_streams, rounded down to 256 * n_streams;
///      with several devices the target keeps (nd + 1) * weights per layer / (2, or 6 for MoE)
///      back; one device that fits so is done.
///   3. Fails (FitChoice::failure) when the user set -ts, -ot (--cpu-moe too) or -sm row with
///      several devices. Else fills devices back to front with whole layers by false position (MoE:
///      dense-only layers, experts on the CPU), output layer on the last device.
///   4. MoE whose dense weights fit with room to spare: converts dense-only layers to full ones
///      front to back, and tries one more layer with its FFN partly overflowing (up / gate / attn
///      fractions) to the next device or the CPU.
/// `asked` is the context as asked (before ResolveContext); `opt` the placement options with the
/// user's -ts / -ot. No model device: -ngl 0 (llama.cpp leaves -ngl at -1 there, which offloads
/// nothing either) and, as common_params_fit_impl's nd == 0 branch, the host is fitted instead: its
/// host-buffer-type bytes (KV, compute, output, unmapped weights; not CPU_REPACK) against the CPU's
/// memory less the first margin; short of it, an automatic context shrinks as in step 2 (one
/// device), and when that cannot fit, FitChoice::failure "was unable to fit model into system
/// memory by reducing context, abort" with the smallest context. A CPU manifest without memory is
/// not fitted.
/// Errors: kInvalidArgument naming a GPU whose manifest reports no memory (llama.cpp's fit "will
/// not use it"; here it cannot be left out), and those of ResolveContext, BuildModelGraphs,
/// MakeDeviceSet and PlaceModel.
Result<FitChoice> FitParams(const GgufFile& gguf, const HParams& hp, const ContextConfig& asked,
                            const std::vector<DeviceManifest>& machine, const PlacementOptions& opt,
                            const FitOptions& fit);

}  // namespace stowage::planner
