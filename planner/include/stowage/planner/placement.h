// Placement decisions: devices, buffer types, backends, and the per-weight buffer type, as
// llama.cpp's model loader and ggml_backend_sched decide them (reference:
// ../shared/reference/llamacpp-placement.md §2, §3, §8).
//
// The placement steps of PlaceModel (place_model.h: layer map, buft lists, weight buft selection,
// KV placement, scheduler) fill a Placement and the `backend`/`cause` fields and `splits` of both graphs in
// ModelGraphs. PlanMemory (memory_plan.h) then turns the decisions into buffers with exact sizes and offsets.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stowage/planner/graph.h"

namespace stowage::planner {

enum class DeviceKind : uint8_t { kCpu = 0, kGpu = 1, kAccel = 2 };

struct PlacedDevice {
  std::string name;  ///< "CPU", "CUDA0", "RPC[127.0.0.1:50052]"
  std::string description;
  DeviceKind type = DeviceKind::kCpu;
  uint64_t memory_total = 0;  ///< bytes
  uint64_t memory_free = 0;   ///< bytes
  uint64_t memory_reserve = 0;
  bool buffer_from_host_ptr = false;  ///< caps: can wrap the file mapping (mmap'ed weights)
  std::string manifest_digest;
};

/// A buffer type used by the plan.
struct PlacedBuft {
  std::string name;  ///< "CPU", "CPU_REPACK", "CUDA0", "CUDA_Host", "CUDA0_Split"
  int device = 0;    ///< index into Placement::devices
  bool is_host = false;
  bool is_default = true;   ///< the device's default buft (mmap wrapping applies only to it)
  uint64_t alignment = 32;  ///< bytes (ggml_backend_buft_get_alignment)
  std::string repack;       ///< layout weights are converted into on upload ("" or "q4_0x8")
  /// Row-split buffer types only (CUDA<i>_Split, -sm row): llama.cpp's -ts as the split buffer
  /// type uses it (ggml_backend_cuda_split_buffer_type normalizes by the sum), one proportion per
  /// device of the split — the model devices of this buft's backend that have a split buft, in
  /// model order (for CUDA: CUDA0, CUDA1, ..., the CUDA device ordinals the runtime indexes by) —
  /// divided by their sum, so the entries add up to 1 (-ts 3,1 -> {0.75, 0.25}). Empty for every
  /// other buft, and when -ts is absent or all zero for the split's devices: ggml's default then
  /// splits by each device's total memory, which the runtime reads from the machine it runs on
  /// (ggml_cuda_info().default_tensor_split), so the plan does not pin it. Set by RecordTensorSplit.
  std::vector<float> tensor_split;
};

struct PlacedBackend {
  std::string name;  ///< backend name as GGML_SCHED_DEBUG prints it (device name)
  int device = 0;
  int compute_buft = 0;  ///< index into Placement::bufts
};

/// The rule that decided an --explain record, as a code (the text of the record says the same in
/// words). Weight codes follow llama.cpp's load_tensors (FEB25); when several apply, the first of
/// override > mmap > shared > head/fallback is recorded. ExplainRuleCode (explain.h) names them as
/// the place dialect's cause codes.
enum class ExplainRule : uint8_t {
  kUnset = 0,          ///< not set by the step that made the record
  kWeightHead,         ///< load.head: the first buffer type of the layer's list
  kWeightFallback,     ///< load.fallback: a later entry of the list (earlier ones rejected)
  kWeightOverride,     ///< load.override: a -ot pattern to a non-CPU buffer type (no support check)
  kWeightOverrideCpu,  ///< load.override.cpu: a -ot pattern to the CPU buft, resolved through the CPU list
  kWeightMmap,         ///< load.mmap: a host buffer type replaced by the CPU buft (the file mapping)
  kWeightShared,       ///< load.dup: a duplicated weight sharing the copy already in its buffer type
  kKvLayer,            ///< kv.layer: KV cache on its layer's device
  kKvNoOffload,        ///< kv.nkvo: -nkvo keeps the KV cache on the CPU
  kNode,               ///< a graph node: the scheduler's cause code is Tensor::cause ("1.wgt0", "2.sup", ...)
};

/// --explain record for a weight, KV cache tensor or node.
struct ExplainEntry {
  std::string subject, graph, device, buft;
  std::string rule;  ///< the rule in words
  ExplainRule code = ExplainRule::kUnset;
  std::vector<std::string> rejected;  ///< "<buft>: <reason>"
};

/// Pipeline-parallelism copies of one tensor of a graph (ggml_backend_sched with n_copies > 1,
/// ggml_backend_sched_split_graph pass 5, FEB25; reference/llamacpp-placement.md §3.3): ggml keeps
/// n_copies instances so that graph compute i+1 can fill its inputs while graph compute i still
/// reads copy i % n_copies. All instances have the source's type and shape (ggml_dup_tensor_layout),
/// live in `backend`'s compute buffer for the whole graph (ggml flags them INPUT and OUTPUT: never
/// freed) and are allocated before every other tensor of the graph.
struct TensorCopies {
  int tensor = -1;          ///< graph tensor id of the source (a graph input, or a split input's source)
  int backend = -1;         ///< index into Placement::backends: the backend whose buffer holds them
  std::vector<int> copies;  ///< n_copies graph tensor ids; copies[c] is copy c (cur_copy 0 when
                            ///< the plan was made: the nodes read copies[0]). For a graph input,
                            ///< copies[0] is the input itself and copy c > 0 is a kSplitCopy tensor
                            ///< named "<backend>#<input>#<c>"; for a split input, every copy is a
                            ///< kSplitCopy named "<split backend>#<source>#<c>" and copies[0] is
                            ///< Split::inputs[k].second.
};

/// The copies the scheduler made for one graph when n_copies > 1 (empty lists when n_copies is 1).
struct GraphCopies {
  std::string graph;                              ///< Graph::name ("pp", "tg")
  std::vector<TensorCopies> inputs;               ///< graph inputs in the order pass 5 meets them
  std::vector<std::vector<TensorCopies>> splits;  ///< per split, per Split::inputs entry
};

struct Placement {
  std::vector<PlacedDevice> devices;
  std::vector<PlacedBuft> bufts;
  std::vector<PlacedBackend> backends;  ///< scheduler priority order; the CPU backend is last
  std::vector<int> global_buft;         ///< per ModelGraphs::globals entry: index into bufts
  bool use_mmap = true;
  /// llama_context_params.offload_kqv (false: -nkvo), as PlaceKvCache placed the KV cache; the plan
  /// records it in its context.
  bool offload_kqv = true;
  std::vector<ExplainEntry> explain;
  std::vector<std::string> log;  ///< llama.cpp-style lines ("layer   0 assigned to device CPU", ...)
  /// ggml_backend_sched's n_copies: 4 (GGML_SCHED_MAX_COPIES) with pipeline parallelism, else 1
  /// (PipelineParallelism, scheduler.h). Set by ScheduleGraph from SchedulerOptions::n_copies.
  int n_copies = 1;
  std::vector<GraphCopies> copies;  ///< one per scheduled graph when n_copies > 1
  /// Per `devices` entry: index into `bufts` of the device's host buffer type
  /// (ggml_backend_dev_host_buffer_type: CUDA_Host for every CUDA device), -1 when it has none.
  /// Filled by RecordHostBufts; empty before.
  std::vector<int> device_host_buft;

  /// The copies of graph `graph` ("pp", "tg"); null when it has none (n_copies 1).
  const GraphCopies* FindCopies(const std::string& graph) const {
    for (const auto& c : copies)
      if (c.graph == graph) return &c;
    return nullptr;
  }

  int FindBuft(const std::string& name) const {
    for (size_t i = 0; i < bufts.size(); ++i)
      if (bufts[i].name == name) return static_cast<int>(i);
    return -1;
  }
};

struct DeviceSet;  // layer_map.h

/// Fills PlacedBuft::tensor_split of every row-split buft of `p` (a buft that is the split buft of
/// its device in `ds`) from `tensor_split` (the -ts values, indexed like DeviceSet's model devices,
/// as planner::ParseTensorSplit returns them; missing entries count as 0): the proportions of the
/// split's devices divided by their sum, or empty when that sum is 0 (ggml's default split). Other
/// bufts are left empty. (InitPlacement lists the split bufts in every split mode; only -sm row puts
/// weights, hence plan buffers, in them.) Requires InitPlacement(ds, ...) to have made `p`'s bufts. Source:
/// llama.cpp make_gpu_buft_list (FEB25) passes the model's tensor_split to ggml_backend_split_buffer_type,
/// which normalizes it per device ordinal. With RPC devices before the CUDA ones (RPC moves to the
/// front), llama.cpp hands the split the whole model-indexed array, so CUDA0 would read the RPC
/// device's entry; here each device takes its own entry, as RowSplitShares (fit.h) does, so the
/// recorded split is the one the fit check used.
void RecordTensorSplit(const DeviceSet& ds, const std::vector<float>& tensor_split, Placement* p);

/// Fills Placement::device_host_buft from the manifests' host buffer types (by name among the
/// bufts InitPlacement made, which lists a buft shared by several devices once, under the first).
/// PlanMemory puts the logits buffer in the output device's host buft (llama_output_reserve), so
/// with the output layer on CUDA1 it is CUDA_Host although InitPlacement attributes CUDA_Host to
/// CUDA0. Requires InitPlacement(ds, ...) to have made `p`'s bufts.
void RecordHostBufts(const DeviceSet& ds, Placement* p);

}  // namespace stowage::planner
