// assign-layers: the model device list, the buffer-type preference lists and the layer map, as
// llama.cpp's llama_model_load_from_file_impl and llama_model::load_tensors decide them
// (reference/llamacpp-placement.md §2.1–2.3, FEB25 = llama.cpp build 4748).
//
// Device indices: a DeviceSet orders devices as the scheduler orders backends: the model devices
// (GPU-type, RPC backends first), then ACCEL devices, then the CPU last. The same index is used for
// Placement::devices and Placement::backends.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "stowage/planner/graph.h"
#include "stowage/planner/manifest.h"
#include "stowage/planner/placement.h"
#include "stowage/runtime/status.h"

namespace stowage::planner {

/// llama_split_mode: -sm none | layer | row.
enum class SplitMode { kNone, kLayer, kRow };

/// Parses "none", "layer", "row". Errors: kInvalidArgument "invalid split mode 'x' (expected none,
/// layer or row)".
Result<SplitMode> ParseSplitMode(std::string_view s);

/// Parses a tensor split as llama.cpp's -ts (common/arg.cpp, FEB25: items separated by ',' or '/'):
/// one proportion per model device, each a finite number >= 0, e.g. "3,1" or "3/1" -> {3, 1}.
/// Spaces around an item are ignored; "" gives an empty list (no tensor split). Stricter than
/// llama.cpp's std::stof: an empty item ("3,,1") or trailing characters ("3x") are errors.
/// Errors: kInvalidArgument "invalid tensor split '3,x': item 2 'x' is not a non-negative number
/// (expected proportions such as 3,1 or 3/1)".
Result<std::vector<float>> ParseTensorSplit(std::string_view s);

/// The devices of a plan in scheduler priority order.
struct DeviceSet {
  std::vector<DeviceManifest> devices;  ///< model devices, ACCEL devices, CPU (last)
  int n_model = 0;                      ///< devices [0, n_model) are the model devices
  int cpu = -1;                         ///< index of the CPU device (== devices.size() - 1)
  std::vector<std::string> unused;      ///< GPU devices left out by -sm none
};

/// Builds the device set from the machine's devices (any order, exactly one CPU device).
/// Model devices (llama.cpp llama_model_load_from_file_impl): the GPU-type devices in the given
/// order with RPC-backend devices moved to the front; with -sm none only model_devices[main_gpu].
/// Errors: no or several CPU devices; main_gpu outside [0, n) for the n model devices, in every split
/// mode (llama.cpp checks it for -sm none only), except the default 0 when there are no model
/// devices and the mode is not none: "invalid value for main_gpu: 7 (available devices: 2; valid:
/// 0 to 1 (CUDA0, CUDA1))", "invalid value for main_gpu: 0 (available devices: 0)" (llama.cpp's
/// message with the valid range added).
Result<DeviceSet> MakeDeviceSet(const std::vector<DeviceManifest>& machine, SplitMode split_mode,
                                int main_gpu);

/// One entry of a buffer-type list: a buffer type and the device whose supports_op is asked.
struct BuftRef {
  int device = -1;   ///< index into DeviceSet::devices
  std::string buft;  ///< buffer type name
  bool operator==(const BuftRef& o) const { return device == o.device && buft == o.buft; }
};
using BuftList = std::vector<BuftRef>;

/// make_cpu_buft_list. FEB25 order (`compat` kFeb25): each ACCEL device's default buft unless it
/// is the CPU's own default buft (BLAS is skipped this way) -> the CPU's extra bufts (CPU_REPACK)
/// unless no_extra -> the host buft of the first model device that has one unless no_host -> the
/// CPU buft. llama.cpp 2026 (k2026, since March 2025): ACCEL bufts -> the GPU host buft -> the CPU's
/// extra bufts -> the CPU buft.
BuftList MakeCpuBuftList(const DeviceSet& ds, bool no_host, bool no_extra, LlamacppCompat compat);

/// make_gpu_buft_list(d): [d's split buft when -sm row and d has one] -> d's default buft -> the
/// CPU list.
BuftList MakeGpuBuftList(const DeviceSet& ds, int device, SplitMode split_mode, const BuftList& cpu_list);

/// Fills Placement::devices, ::bufts and ::backends from the device set: every buffer type of every
/// device once (by name; ACCEL devices sharing the CPU buft add nothing), in the order model devices
/// (split, default, host), ACCEL defaults, CPU extras, CPU default; one backend per device whose
/// compute buft is its default buft, except (a) the CPU backend, which uses the host buft of model
/// device 0 when it has one (llama_init_from_model), and (b) an ACCEL device whose default buft is
/// not host memory (a weight-only buffer type such as ONEDNN, weights kept in the accelerator's
/// layout) but which reads every host buft: it computes into the CPU's default buft, so its results
/// need no copy back and it shares the CPU's compute buffer (Stowage's rule; llama.cpp moved its
/// AMX weights into a CPU extra buft, whose nodes run on the CPU backend, for the same effect).
void InitPlacement(const DeviceSet& ds, bool use_mmap, Placement* p);

/// The manifest buffer type behind Placement::bufts[i] (never null for a buft InitPlacement made).
const BufferType* FindManifestBuft(const DeviceSet& ds, const Placement& p, int buft);

/// Result of the layer assignment.
struct LayerMap {
  /// Device of layer il for il in [0, n_layer]; il == n_layer is the output layer. The input layer
  /// is always on the CPU list (not stored).
  std::vector<int> device;
  std::vector<float> splits;  ///< cumulative split points per model device (last = 1)
  int n_gpu_layers = 0;       ///< as given (clamped below at 0)
  int i_gpu_start = 0;        ///< max(n_layer - ngl, 0); llama.cpp 2026: max(n_layer + 1 - ngl, 0)
  int act_gpu_layers = 0;     ///< min(ngl, n_layer + 1), 0 without model devices
};

/// llama_model::load_tensors' layer map: weights per model device from tensor_split (when given and
/// not all zero) else each device's free memory; cumulative sums / total as float; layer il goes to
/// the CPU when il < i_gpu_start or il - i_gpu_start >= act_gpu_layers, else to model device
/// upper_bound(splits, float(il - i_gpu_start) / act_gpu_layers) (exact equality moves to the next
/// device). i_gpu_start: Feb 2025's max(n_layer - ngl, 0) (-ngl N offloads the last N repeating
/// layers, the output only when N > n_layer), llama.cpp 2026's max(n_layer + 1 - ngl, 0) (the
/// output layer first, then the last N - 1 repeating layers). Errors: tensor_split longer than the
/// model device list, negative entries.
Result<LayerMap> AssignLayers(const DeviceSet& ds, uint32_t n_layer, int n_gpu_layers,
                              const std::vector<float>& tensor_split,
                              LlamacppCompat compat = LlamacppCompat::kFeb25);

}  // namespace stowage::planner
