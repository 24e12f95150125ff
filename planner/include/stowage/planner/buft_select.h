// Weight buffer type selection (PlaceModel's kWeights step): the buffer type of every weight, as llama.cpp's
// load_tensors chooses it (reference/llamacpp-placement.md §2.4–2.5): overrides first (-ot, --cpu-moe,
// --n-cpu-moe), else the first entry of the layer's buffer-type list whose device supports the consuming op
// with the weight in that buffer type (weight_buft_supported, a 512-token dummy op), then the mmap rule (a
// host buft becomes the CPU buft), "moved" accounting, and sharing of duplicated tensors (tied output,
// rope_freqs) within one buffer type.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "stowage/planner/graph.h"
#include "stowage/planner/layer_map.h"
#include "stowage/planner/manifest.h"
#include "stowage/planner/placement.h"
#include "stowage/runtime/status.h"

namespace stowage::planner {

/// One tensor buffer-type override (llama_model_tensor_buft_override): the first pattern found in
/// a tensor's name (std::regex_search, ECMAScript) decides its buffer type. With libstdc++ the
/// pattern is matched in polynomial time (std::regex_constants::__polynomial, so a pattern such as
/// '(.*)*(.*)*Z' cannot hang planning); back-references are then refused as invalid.
struct TensorOverride {
  std::string pattern;
  std::string buft;  ///< a default buffer type name of a device ("CPU", "CUDA0", "RPC[...]")
};

/// Parses "-ot" values: "REGEX=BUFT[,REGEX=BUFT...]" (llama.cpp common/arg.cpp splits on ',' then on the
/// first
/// '='). Errors: kInvalidArgument "invalid -ot value 'x' (expected REGEX=BUFFER_TYPE)".
Result<std::vector<TensorOverride>> ParseTensorOverrides(std::string_view text);

/// The override patterns of --cpu-moe (all layers) or --n-cpu-moe N (layers 0..N-1):
/// "\.ffn_(up|down|gate)_exps" and "blk\.<i>\.ffn_(up|down|gate)_exps", to the CPU buft
/// (llama.cpp common, PR #14992 / #15077).
std::vector<TensorOverride> CpuMoeOverrides(bool cpu_moe, int n_cpu_moe, const std::string& cpu_buft);

/// weight_buft_supported: builds ggml's dummy op around weight `w` (GET_ROWS: 512 I32 ids; MUL_MAT:
/// F32 [ne0, 512, ne2, ne3]; MUL_MAT_ID: F32 [ne0, n_expert_used, 512] + I32 ids; ADD/MUL: F32 of
/// w's shape op w; DIV: F32 [ne0] / w; ROPE: F32 [n_embd_head_v, n_head, 512], I32 [512], w as
/// freq factors; SSM_CONV / SSM_SCAN with llama.cpp's fixed dummy shapes; NONE: always true),
/// places w in `buft` and asks `dev.SupportsOp`. On false, `why` (if not null) receives a short
/// reason ("RPC[...] does not support MUL_MAT(q4_0 [256, 512] in CPU_REPACK, f32 [256, 512])").
/// Errors: an op without a dummy (llama.cpp aborts "missing test for op").
Result<bool> WeightBuftSupported(const HParams& hp, const GlobalTensor& w, stowage::GgmlOp op,
                                 const BufferType& buft, const DeviceManifest& dev, std::string* why);

/// The "moved" summary line of load_tensors.
struct MovedSummary {
  int count = 0;         ///< weights whose final buft is not the head of their list
  std::string tensor;    ///< the first one
  std::string type;      ///< its ggml type name
  std::string from, to;  ///< list head and chosen buft of the first one
};

/// Options of the weight selection.
struct WeightBuftOptions {
  SplitMode split_mode = SplitMode::kLayer;
  bool no_host = false;    ///< --no-host: no GPU host buft in the CPU list
  bool no_repack = false;  ///< --no-repack: no CPU extra bufts
  std::vector<TensorOverride> overrides;
};

/// Checks each override of `overrides` as SelectWeightBufts does, before any placement: its buffer
/// type is the default buffer type of one of `devices` (DeviceSet::devices order, which the
/// message lists) and its pattern compiles. Errors (kInvalidArgument): "unknown buffer type 'x' in
/// -ot 'p=x' (available: CPU, RPC[...])", "invalid regular expression 'p' in -ot: <why>".
Status CheckTensorOverrides(const std::vector<TensorOverride>& overrides,
                            const std::vector<DeviceManifest>& devices);

/// Sets Placement::global_buft for every weight of `m` (KV entries are left at -1 for PlaceKv)
/// and appends one ExplainEntry per weight (rule, rejected candidates). Requires InitPlacement.
/// Errors: an override naming an unknown buffer type ("unknown buffer type 'x' in -ot 'p=x'
/// (available: CPU, RPC[...])"), a bad regex, no compatible buffer type for a weight
/// ("failed to find a compatible buffer type for tensor X").
Status SelectWeightBufts(const ModelGraphs& m, const DeviceSet& ds, const LayerMap& lm,
                         const WeightBuftOptions& opt, Placement* p, MovedSummary* moved);

}  // namespace stowage::planner
