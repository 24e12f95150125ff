// -sm tensor (llama.cpp 2026 LLAMA_SPLIT_MODE_TENSOR): every GPU-type device holds a slice of every
// weight and KV cache tensor and runs its share of each matmul; the devices are one "Meta" device
// (llama.cpp 2026 llama_prepare_model_devices, ggml_backend_meta_device). How each tensor is cut is its
// split state (llama.cpp 2026 llama_meta_device_get_split_state): an axis, the segments of that axis
// (a fused QKV is Q, then K and V), each segment's element count per device, and a rotation so that
// the rounding remainder moves between devices from layer to layer.
//
// Shapes are ggml's (ne0 innermost). Stowage's KV caches are 1-D (n_embd_gqa * kv_size, llama.cpp
// Feb 2025 llama_kv_cache_init); the reference's are 2-D [n_embd_gqa, kv_size] split on axis 0, so
// here a cache's split counts elements of one row of n_embd_gqa.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "stowage/planner/graph.h"
#include "stowage/planner/model_graphs.h"
#include "stowage/runtime/status.h"

namespace stowage::planner {

/// ggml_backend_meta_split_axis: 0..3 split along that ggml axis, kMirrored every device holds all
/// of it, kPartial every device holds a partial sum of the same shape (summed by the all-reduce).
enum class SmAxis { k0 = 0, k1 = 1, k2 = 2, k3 = 3, kMirrored = 10, kPartial = 11 };

/// "0", "1", "2", "3", "mirrored", "partial" (ggml_backend_meta_split_axis_name's spellings).
const char* SmAxisName(SmAxis axis);

/// One tensor's split over n devices.
struct SmSplitState {
  SmAxis axis = SmAxis::kMirrored;
  /// Per segment: (elements of the segment along the axis, repeats). A fused QKV has Q (n_head *
  /// n_embd_head_k, 1) then K and V (n_embd_gqa, 2); anything else one segment (ne[axis], 1).
  std::vector<std::pair<int64_t, uint32_t>> segments;
  /// ne[s * n_devices + j]: elements of segment s on device j (split axes only; empty otherwise).
  std::vector<int64_t> ne;
  int rotation = 0;  ///< which device takes the first slice (layer-dependent)
  /// Elements along the axis on device j: the sum over segments of ne * repeats.
  int64_t DeviceElements(int n_devices, int j) const;
};

/// llm_arch_supports_sm_tensor (llama.cpp 2026 llama-arch.cpp) for Stowage's architecture names:
/// false for those the reference lists (deepseek2, mamba, olmo2, olmoe, minicpm3, bitnet, t5, grok,
/// mpt, jamba, gemma3n, ...), true for every other.
bool ArchSupportsSmTensor(std::string_view arch);

/// The reference's refusal for `arch`, one line: "LLAMA_SPLIT_MODE_TENSOR not implemented for
/// architecture 'deepseek2'" (llama.cpp 2026 llama_model_create).
std::string SmTensorRefusal(std::string_view arch);

/// The split state of global tensor `t` of `m` over `n_devices` devices with proportions
/// `tensor_split` (-ts; empty or all zero: even), as llama.cpp 2026 llama_meta_device_get_split_state:
/// attention Q/K/V weights split on axis 1 (by heads, rounded to whole GQA groups and the block size
/// of attn_output's type, doubled up to 128 while each device still gets a group), their biases, the
/// KV caches and attn_sinks on axis 0 by the same heads, attn_output on axis 0; FFN up/gate (also
/// _exps) on axis 1 and down on axis 0 in multiples of lcm(block size of ffn_down's type, 128);
/// ffn_down_exps.bias partial; output.weight on axis 1; everything else (norms, token embeddings,
/// router) mirrored. Errors: kInvalidArgument "sm tensor: <name>: ..." when a tensor the rule needs is
/// missing or a split would cut a quantized block.
Result<SmSplitState> SmTensorSplitState(const ModelGraphs& m, const GlobalTensor& t, int n_devices,
                                        const std::vector<float>& tensor_split);

/// Bytes of `t` on device j under `s`: split axes hold their slice (a KV cache its slice of every row
/// of n_embd_gqa), mirrored and partial tensors their whole size on every device.
uint64_t SmDeviceBytes(const GlobalTensor& t, const SmSplitState& s, int n_devices, int j);

/// Per-device totals of a -sm tensor plan.
struct SmTensorPlan {
  int n_devices = 0;
  std::vector<SmSplitState> states;  ///< per ModelGraphs::globals index
  /// per device: the Meta device's model buffer on each (llama.cpp 2026 prints one device's share as
  /// "Meta() model buffer size"); the input layer's token embeddings are the CPU's, not counted
  std::vector<uint64_t> weight_bytes;
  std::vector<uint64_t> kv_bytes;        ///< per device
  std::vector<uint64_t> mirrored_bytes;  ///< per device: the part of weight_bytes every device holds
  /// All-reduces per token step: one after each layer's attention output and one after its FFN (the
  /// axis-0 attn_output / ffn_down results are partial sums), and one gather of the split output.
  int n_allreduce = 0;
};

/// Splits every global of `m` (weights and KV caches) over `n_devices` (>= 1) with `tensor_split`.
/// Errors: kUnimplemented SmTensorRefusal for an architecture the reference refuses;
/// kInvalidArgument for n_devices < 1 ("LLAMA_SPLIT_MODE_TENSOR needs >= 1 devices") and those of
/// SmTensorSplitState.
Result<SmTensorPlan> PlanSmTensor(const ModelGraphs& m, int n_devices,
                                  const std::vector<float>& tensor_split);

/// One global's part on one rank of a tensor split across MPI ranks: elements [begin, begin +
/// count) along `axis` (k0 or k1), or the whole tensor (kMirrored; begin 0, count 0).
struct SmRankSlice {
  SmAxis axis = SmAxis::kMirrored;
  int64_t begin = 0;
  int64_t count = 0;
};

/// What one rank of a tensor split across MPI ranks holds (plan-model --cluster -sm tensor), from
/// PlanSmTensor's split states: every layer's heads and FFN columns as one model of its own, its
/// hyper-parameters and each global's slice.
struct SmRankShares {
  uint32_t n_head = 0, n_head_kv = 0, n_ff = 0;  ///< this rank's, the same in every layer
  std::vector<SmRankSlice> slices;               ///< per ModelGraphs::globals index
};

/// Rank `rank`'s shares of `plan` (PlanSmTensor of `m` over the ranks). The split states are the
/// reference's, with two rules of their own across ranks: output.weight and output.bias are
/// mirrored (every rank computes the whole logits, no gather), and a slice starts where the slices
/// of the ranks before it in the state's rotated order end. Errors (kInvalidArgument, one line
/// naming the tensor and expected vs found, "tensor split across ranks: ..."): a tensor the ranks
/// cannot split as separate models (a fused QKV or gate_up, experts, attention sinks or gate, a
/// partial bias), a layer whose heads or FFN columns on this rank differ from layer 0's (heads not
/// divisible over the ranks), a rank without a KV head or FFN column.
Result<SmRankShares> SmTensorRankShares(const ModelGraphs& m, const SmTensorPlan& plan, int rank);

}  // namespace stowage::planner
