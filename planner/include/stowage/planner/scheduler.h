// schedule: backend assignment of every node of a graph and its division into splits, as
// ggml_backend_sched_split_graph does it (ggml-backend.cpp, FEB25; reference/llamacpp-placement.md
// §3.2–3.3, §2.7 for llama.cpp's graph-callback pins):
//   pins:   per-layer "norm" nodes to their layer's device when n_tokens < 32 or full offload;
//           "kqv_merged_cont" to the CPU with -nkvo;
//   pass 1: tensors in a buffer (weights, KV, views of them) -> the first backend supporting their
//           buffer type and op; graph inputs -> CPU; nodes with a weight source -> that weight's
//           backend (not for ROPE), or, for a host weight on the CPU, a higher-priority backend
//           whose offload_op wants it (op offload, batch >= min_batch);
//   pass 2: expand non-CPU backends down then up, then every backend down then up (only where the
//           backend supports the op);
//   pass 3: unassigned nodes -> the backend supporting the op with the most usable sources;
//           assigned nodes -> a higher-priority backend with the same buffer type that supports the
//           op and all sources' buffers;
//   pass 4: remaining sources take their view source's or their consumer's backend;
//   pass 5: a new split where the backend changes (or a weight in an unusable buffer arrives in a
//           split that already has inputs); a source the split backend cannot read is copied into
//           it once per (source, backend): a SplitCopy tensor named "<backend>#<src>#0" is added
//           to the graph and the consumers' srcs are rewritten to it. With n_copies > 1 (pipeline
//           parallelism) every such copy exists n_copies times ("<backend>#<src>#<c>", c = 0..3)
//           and every graph input a node reads gets n_copies - 1 more instances on its own
//           backend ("<backend>#<input>#<c>", c = 1..3; the input itself is copy 0); the nodes
//           read copy 0 (ggml's cur_copy when llama.cpp reserves). Placement::copies lists them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "stowage/planner/graph.h"
#include "stowage/planner/layer_map.h"
#include "stowage/planner/placement.h"
#include "stowage/runtime/status.h"

namespace stowage::planner {

struct SchedulerOptions {
  bool op_offload = true;     ///< --no-op-offload turns it off (llama.cpp #13386)
  bool offload_kqv = true;    ///< false (-nkvo): pin kqv_merged_cont to the CPU
  bool full_offload = false;  ///< n_gpu_layers > n_layer: pin norm nodes to their layer's device
  /// ggml_backend_sched n_copies: 1, or 4 with pipeline parallelism (PipelineParallelism below).
  /// Valid: 1 to 4 (GGML_SCHED_MAX_COPIES); ScheduleGraph refuses other values.
  int n_copies = 1;
};

/// Whether llama.cpp enables pipeline parallelism, and the resulting n_copies.
struct PipelineDecision {
  int n_copies = 1;    ///< 4 (GGML_SCHED_MAX_COPIES) when enabled, else 1
  std::string reason;  ///< in words: the first condition that fails, or the conditions that hold
};

/// llama.cpp's rule (llama_init_from_model, FEB25 src/llama.cpp; reference §2.7): pipeline
/// parallelism (n_copies = 4) iff more than one model device (ds.n_model > 1), n_gpu_layers >
/// n_layer (the output layer is offloaded too), split mode layer, offload_kqv (no -nkvo), and the
/// device of every backend that is not of type CPU (model devices and ACCEL devices such as BLAS)
/// has caps async and events; and no tensor buffer type override is given
/// (`has_tensor_overrides`: -ot, --cpu-moe, --n-cpu-moe — FEB25 has no -ot; every llama.cpp that
/// has it turns pipeline parallelism off with overrides, llama_context's has_tensor_overrides,
/// reference §4.1). DEC25's retry without it when the pp reserve fails is not followed (plans
/// never fail a reserve). Never fails.
PipelineDecision PipelineParallelism(const DeviceSet& ds, uint32_t n_layer, int n_gpu_layers,
                                     SplitMode split_mode, bool offload_kqv, bool has_tensor_overrides);

/// The --explain record of a decision, appended after the node records: graph "sched", subject
/// "n_copies", buft the number ("4"), device "all backends", rule "pipeline parallelism enabled
/// (n_copies=4): ..." or "pipeline parallelism off (n_copies=1): <reason>", code kUnset.
ExplainEntry PipelineExplain(const PipelineDecision& d);

/// Assigns Tensor::backend / Tensor::cause to every tensor of `g` (a freshly built graph: a graph
/// that already has split copies is refused with kFailedPrecondition), fills g.splits, adds the split
/// input copies, and appends one ExplainEntry per non-view node (graph = g.name). Requires the
/// weights and KV cache placed (Placement::global_buft). The graph is evaluated at its worst case
/// (Graph::WorstCase) for shapes and batch sizes. Errors: a pre-allocated tensor no backend can run
/// ("pre-allocated tensor (X) in a buffer (B) that cannot run the operation (OP)"), a node left
/// without backend (no CPU fallback), opt.n_copies outside [1, 4] (kInvalidArgument). Sets
/// p->n_copies = opt.n_copies and, when it is > 1, replaces p->copies' entry of g.name with the
/// graph's copies (ggml_backend_sched_split_graph, FEB25).
Status ScheduleGraph(Graph& g, const ModelGraphs& m, const DeviceSet& ds, const LayerMap& lm, Placement* p,
                     const SchedulerOptions& opt);

/// Number of nodes of the graph as ggml counts them (every op result, views included; split input
/// copies excluded).
int GraphNodeCount(const Graph& g);

/// The GGML_SCHED_DEBUG report of a scheduled graph: level 1 prints per split its header
/// (FormatSchedSplitHeader), level 2 also one line per non-view node:
/// "node #  i (        OP):                 name ( size) [  BE         ]:" followed by its sources.
std::string FormatSchedDebug(const Graph& g, const Placement& p, int level);

/// ggml's fmt_size (ggml-backend.cpp): "%zuM" (integer MiB) from 1 MiB up, else "%zuK" (integer
/// KiB), without padding.
std::string FormatGgmlSize(uint64_t bytes);

/// A split input as GGML_SCHED_DEBUG lists it: the tensor's name and its size as FormatGgmlSize
/// writes it (or any other text, such as "?" for a size not known).
struct SchedDebugInput {
  std::string name;
  std::string size;
};

/// GGML_SCHED_DEBUG's header of split `index` (ggml_backend_sched_print_assignments), as one
/// string: "\n## SPLIT #i: BACKEND # n inputs", then ": " and "[name (%5.5s size)] " per input when
/// there are any, then "\n" (the empty line before each header is ggml's). FormatSchedDebug and the
/// compiler's --place-print-splits pass both print their headers with it.
std::string FormatSchedSplitHeader(size_t index, const std::string& backend,
                                   const std::vector<SchedDebugInput>& inputs);

}  // namespace stowage::planner
