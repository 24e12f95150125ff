// A tensor split across MPI ranks (plan-model --cluster C -sm tensor): every rank holds its
// attention heads' slices of Q/K/V (rows) and O (columns), its columns of the FFN's gate/up (rows)
// and down (columns), its heads' KV cache, and the rest (norms, token embeddings, output) whole.
// The slices are sm_tensor.h's split states (llama.cpp 2026 llama_meta_device_get_split_state),
// SmTensorRankShares for one rank. Each rank's part of a layer is then a model of its own, with
// n_head, n_head_kv and n_ff its shares: its graphs are the architecture's graphs of that model
// (built from a header of the file with those hyper-parameters and slice shapes), with an
// ALL_REDUCE node (ggml_ops.h) after the attention output and after the FFN down projection, whose
// partial sums every rank then holds summed. Each rank is placed and memory-planned alone on its
// host's CPU, weights in allocated buffers (its slices are read from the file; an axis-0 slice is
// a part of every row). One plan file holds them all: rank 0's plan with ranks 1.. nested in it
// (plan.fbs Plan.tp_rank_plans).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stowage/planner/graph.h"
#include "stowage/planner/manifest.h"
#include "stowage/planner/place_model.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/status.h"

namespace stowage::planner {

/// One rank's planned memory.
struct TensorSplitRankMemory {
  uint32_t n_head = 0, n_head_kv = 0, n_ff = 0;           ///< its shares (SmRankShares)
  uint64_t weights = 0, kv = 0, compute = 0, output = 0;  ///< bytes of its buffers, by usage
  uint64_t free = 0;                                      ///< its CPU's free memory (manifest)
  int n_allreduce = 0;                                    ///< ALL_REDUCE nodes of its tg graph
};

/// The result of PlanTensorSplitRanks.
struct TensorSplitPlan {
  std::vector<uint8_t> bytes;  ///< the plan file: rank 0's plan, ranks 1.. nested
  std::vector<TensorSplitRankMemory> ranks;
};

/// Plans `gguf` (hyper-parameters `hp`, context `cfg` resolved by ResolveContext, flash attention
/// as the caller decided) across the hosts of a cluster as a tensor split: rank h runs on
/// hosts[h]'s CPU (its device list; a list with any other device is refused, tensor-split ranks
/// are CPU ranks), `tensor_split` the proportions per rank (-ts; empty: even), `opt` the placement
/// options of every rank (use_mmap turned off), `flags` the command line to record. Errors:
/// kInvalidArgument for fewer than 2 hosts ("needs at least 2 hosts"), a host with devices other
/// than its CPU (naming it), those of PlanSmTensor and SmTensorRankShares; those of ReadHParams,
/// BuildModelGraphs and PlaceModelStep on a rank's model, prefixed "rank <r>: ".
Result<TensorSplitPlan> PlanTensorSplitRanks(const GgufFile& gguf, const HParams& hp,
                                             const ContextConfig& cfg,
                                             const std::vector<std::vector<DeviceManifest>>& hosts,
                                             const std::vector<float>& tensor_split,
                                             const PlacementOptions& opt, const std::string& flags);

/// Inserts an ALL_REDUCE after every MUL_MAT of `g` whose source 0 is a weight named
/// "blk.<il>.attn_output.weight" or "blk.<il>.ffn_down.weight" of `m` (a placed graph: the node gets
/// the MUL_MAT's backend, layer and a name "<name>.all_reduce", takes its place as the source of
/// every reader and of the split inputs, aliases its memory, and the splits after it move by one).
/// Returns the number inserted.
int InsertAllReduce(const ModelGraphs& m, Graph& g);

}  // namespace stowage::planner
