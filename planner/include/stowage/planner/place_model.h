// The placement pipeline of the planner (planner::Plan): layer map -> weight buffer types -> KV
// cache -> schedule (pp and tg graphs) -> memory plan, and the llama.cpp-style report lines.
#pragma once

#include <string>
#include <vector>

#include "stowage/planner/buft_select.h"
#include "stowage/planner/graph.h"
#include "stowage/planner/layer_map.h"
#include "stowage/planner/memory_plan.h"
#include "stowage/planner/placement.h"
#include "stowage/planner/scheduler.h"

namespace stowage::planner {

/// n_gpu_layers standing for "every layer and the output" (llama.cpp -ngl all / <= -2, 2026):
/// more layers than any model has (the layer map clamps to n_layer + 1).
inline constexpr int kAllGpuLayers = 1 << 20;

/// Placement flags with llama.cpp's defaults (FEB25: n_gpu_layers 0, split mode layer, main GPU 0,
/// mmap on, KV offload on, op offload on).
struct PlacementOptions {
  int n_gpu_layers = 0;
  SplitMode split_mode = SplitMode::kLayer;
  int main_gpu = 0;
  std::vector<float> tensor_split;
  std::vector<TensorOverride> overrides;  ///< -ot first, then --cpu-moe / --n-cpu-moe patterns
  bool use_mmap = true;
  bool no_host = false;
  bool no_repack = false;
  bool op_offload = true;
  /// llama_context_params.offload_kqv (false: -nkvo): the one copy of the flag; PlaceKvCache records
  /// it in Placement::offload_kqv, which the plan's context carries.
  bool offload_kqv = true;
};

/// How a -sm row split buffer (CUDA<i>_Split) is spread over the devices: ggml-cuda's split buffer
/// holds each matrix's rows on every device of its backend (see RowSplitShares, fit.h).
struct SplitBufferShare {
  int buffer = -1;                     ///< index into MemoryPlan::buffers
  std::vector<uint64_t> device_bytes;  ///< per DeviceSet::devices index: bytes of its rows held there
};

/// Everything plan-model prints and exports.
struct PlacementOutcome {
  DeviceSet devices;
  LayerMap layers;
  Placement placement;
  MemoryPlan memory;
  MovedSummary moved;
  int pp_nodes = 0, tg_nodes = 0;              ///< graph node counts before split copies
  std::vector<SplitBufferShare> split_shares;  ///< one per split weight buffer (-sm row), for the fit check
};

/// The steps of PlaceModel, in order. PlaceModelStep runs one of them, for a caller that changes the
/// graphs between two steps (the MPI tensor-split plan inserts its all-reduces before kMemory).
enum class PlaceStep {
  kLayers,    ///< MakeDeviceSet, AssignLayers (llama_model::load_tensors' layer map)
  kWeights,   ///< InitPlacement, RecordTensorSplit, RecordHostBufts, the layer log, SelectWeightBufts
  kKvCache,   ///< PlaceKvCache
  kSchedule,  ///< PipelineParallelism, GraphNodeCount and ScheduleGraph of both graphs, PipelineExplain
  /// PlanMemory; a buffer above its buffer type's max_size refused (kResourceExhausted, see
  /// PlaceModel); PlacementOutcome::split_shares (RowSplitShares, fit.h)
  kMemory,
};

/// Runs `step` of PlaceModel on `m` and `o`, which hold the outcome of the steps before it (`o`
/// default-constructed before kLayers); `machine` and `opt` as PlaceModel's, the same for every step.
/// Errors: those of the step's functions, one line each (see PlaceModel).
Status PlaceModelStep(PlaceStep step, ModelGraphs& m, const std::vector<DeviceManifest>& machine,
                      const PlacementOptions& opt, PlacementOutcome* o);

/// Runs the whole pipeline on `m` (its graphs are modified: backends, splits, copies, offsets):
/// every PlaceStep in order.
/// Pipeline parallelism follows llama.cpp's rule (PipelineParallelism, scheduler.h); its decision
/// is the last --explain record (PipelineExplain) and Placement::n_copies.
/// `machine` is every device of the (real or described) machine; see MakeDeviceSet.
/// Errors: those of each step, one line each; kResourceExhausted when a planned buffer is larger
/// than its buffer type's max_size (ggml_backend_buft_get_max_size: llama.cpp would split it into
/// several buffers, a plan holds one per buffer type and usage).
Result<PlacementOutcome> PlaceModel(ModelGraphs& m, const std::vector<DeviceManifest>& machine,
                                    const PlacementOptions& opt);

/// llama.cpp 2026 llama_init_from_model: -fa auto with a quantized V cache is -fa on ("enabling
/// flash_attn since it is required for quantized V cache"; resolve_fused_ops then checks nothing):
/// true for a context `cfg` planned as 2026 (cfg.llamacpp_compat) whose V cache type is quantized,
/// of an attention model (not hp.recurrent()). Plan skips -fa auto's check then, ReportLines prints
/// that line and "flash_attn = enabled".
bool QuantizedVCacheEnablesFlashAttn(const ContextConfig& cfg, const HParams& hp);

/// What llama.cpp 2026's load log says of the context as asked that the plan alone does not: the
/// flash-attention type asked (llama_context_params.flash_attn_type, -fa), which llama_context's
/// summary prints before resolving it, and what resolving -fa auto printed (Plan's
/// kFlashAttnEnabled / kFlashAttnDisabled text, resolve_fused_ops's lines), which sched_reserve
/// prints after "reserving ...".
struct AskedContext {
  /// llama_flash_attn_type_name of -fa: "auto", "enabled" or "disabled"; empty: the resolved
  /// ModelGraphs::cfg.flash_attn's ("enabled" or "disabled").
  std::string flash_attn_type;
  /// resolve_fused_ops's lines, separated by '\n' (no trailing newline); empty: none (-fa on / off).
  std::string fused_op_lines;
};

/// The load-time report in llama.cpp's formats (FEB25): "using device" lines (model devices),
/// "layer %3d assigned to device %s" (k2026: ", is_swa = %d" added), the "cannot be used with
/// preferred buffer type" line (k2026: from "done_getting_tensors:"),
/// "offloading ..." lines (only when there are model devices), "%12s model buffer size = %8.2f MiB"
/// (in the memory plan's buffer order; with m.cfg.llamacpp_compat k2026 sorted by buffer-type name
/// as llama.cpp 2026's llama_model_loader::ctx_map),
/// "%10s KV buffer size", "KV self size", "%10s  output buffer size", "pipeline parallelism enabled
/// (n_copies=%d)" (only when n_copies > 1), "%10s compute buffer size"
/// (backends with more than one byte, each buffer once), "graph nodes" and
/// "graph splits = P (with bs=B), T (with bs=1)". One line per string, without newline. The
/// "assigned to device" and "cannot be used with preferred buffer type" lines are llama.cpp's
/// debug level (LLAMA_LOG_DEBUG, FEB25 llama-model.cpp): only with `debug_lines`.
/// With m.cfg.llamacpp_compat k2026 (but for recurrent models) the lines after the model buffers are
/// llama.cpp 2026's info lines in its order (llama_context's constructor, llama_kv_cache's,
/// sched_reserve): "llama_context: constructing llama_context", the summary (n_seq_max, n_ctx,
/// n_ctx_seq, n_batch, n_ubatch, causal_attn, flash_attn as `asked` says, kv_unified, freq_base,
/// freq_scale, n_rs_seq, n_outputs_max, n_outputs_max_per_seq) and the n_ctx_seq warnings, the
/// output buffer, each cache's "llama_kv_cache:" buffers, size and attn_rot lines (after
/// "llama_kv_cache_iswa: creating ..." for an interleaved-SWA model), "llama_context: pipeline
/// parallelism enabled", "sched_reserve: reserving ...", `asked.fused_op_lines`, the compute
/// buffers and "sched_reserve: graph: nodes = N, splits = S, input objects = I, input tensors = T"
/// ("graph (pp bs=B, tg bs=n_seq_max): nodes = N / n, ..." when the pp and tg graphs differ in
/// one of them; GraphInputCounts). Not the lines of timing ("reserve took ..."), debug level or
/// llama.cpp's own hardware.
std::vector<std::string> ReportLines(const ModelGraphs& m, const PlacementOutcome& o,
                                     const PlacementOptions& opt, bool debug_lines = true,
                                     const AskedContext& asked = {});

/// llama.cpp 2026 sched_reserve's input counts of a graph: `objects`, its llm_graph_input_i objects
/// (res->inputs: inp_embd for the tokens, inp_pos, one inp_attn for every mask and KV index input
/// of the attention, inp_attn_temp, inp_out_ids, the recurrent state inputs) and `tensors`, the
/// input tensors some node reads (llama_graph_n_input_tensors), as they are in `g`'s inputs
/// (TensorKind::kInput) read by its nodes.
struct GraphInputCounts {
  int objects = 0;
  int tensors = 0;
};
GraphInputCounts CountGraphInputs(const Graph& g);

/// llama.cpp's `-fa auto` check (llama_context, DEC25; FEB25 has no auto): in the placed tg
/// graph of a model planned with flash attention, every FLASH_ATTN_EXT node must run on the
/// device that holds its layer (the layer of its K view, model.dev_layer(il)). Returns llama.cpp's
/// warning for the first node that does not ("layer %d is assigned to device %s but the Flash
/// Attention tensor is assigned to device %s (usually due to missing support)"; with
/// m.cfg.llamacpp_compat k2026 resolve_fused_ops's "resolve_fused_ops: layer %d is assigned to
/// device %s but Flash Attention is assigned to device %s (...)"), after which the
/// caller plans again without flash attention; an empty string when every node does (or there is
/// none: a recurrent model).
std::string FlashAttnDeviceMismatch(const ModelGraphs& m, const PlacementOutcome& o);

}  // namespace stowage::planner
