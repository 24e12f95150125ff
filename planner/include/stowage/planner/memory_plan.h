// Static memory planning: every buffer of the plan with its exact size, and the offset of every
// weight, KV cache tensor and intermediate inside it.
//
// Rules (llama.cpp load_tensors / llama_kv_cache_init / ggml-alloc, reference §2.5–2.7):
// - Weights: one buffer per buft. With mmap, a weight whose buft is the default buft of a device
//   with buffer_from_host_ptr (the CPU) lives in a mapped buffer "<DEV>_Mapped" covering the file
//   range [first, last) spanned by that buft's tensors (bytes of other tensors in between count).
//   Otherwise tensors are laid out in load order, each padded to the buft alignment.
//   Duplicated globals (tied output, rope_freqs) share one copy per buft.
// - KV cache: one buffer per buft, K and V per layer, each padded to the alignment.
// - Compute: one arena per distinct compute buft of the backends; each graph's intermediates get
//   offsets from a liveness scan of the worst-case graph (a tensor is live from its producer to its
//   last consumer, a split input's source until the split that copies it starts, as ggml's
//   input_dep node keeps it; views alias their owner); the arena is the max over the pp and tg
//   graphs. Offsets are a best fit over the freed blocks: for the llama.cpp 2026 architectures
//   (ModelGraphs::llama2026) exactly ggml_dyn_tallocr's (a freed range at the arena's end joins the
//   unbounded tail, which is taken only when no other block fits; ties go to the higher offset),
//   for the Feb 2025 ones the simplified rule their plans were made with (every freed block a
//   candidate, ties to the lower offset).
//   With pipeline parallelism (Placement::n_copies > 1, ggml_backend_sched_new(parallel = true)),
//   every instance of every graph input and split input (Placement::copies) is allocated first,
//   graph inputs before split inputs, copy 0..n-1 each, and never freed (ggml flags them INPUT and
//   OUTPUT), so the compute buffers hold all copies at once (ggml-alloc's reserve, FEB25).
// - Output: logits buffer n_vocab * max(1, n_seq_max) * 4 bytes in the host buft of the output
//   layer's device (CUDA_Host) when it has one, else the CPU buft: what llama_init_from_model
//   reserves (llama_output_reserve(n_seq_max); llama.cpp grows it when a batch asks for more
//   outputs). The runtime copies logits from the result tensor to the caller and never uses more.
// Zero-size buffers are not created.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stowage/planner/graph.h"
#include "stowage/planner/placement.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/status.h"

namespace stowage::planner {

enum class BufferUsage : uint8_t { kWeights = 0, kKvCache = 1, kCompute = 2, kOutput = 3 };

struct PlannedBuffer {
  std::string name;  ///< as llama.cpp prints it: "CPU_Mapped", "CPU_REPACK", "CUDA0"
  int buft = 0;      ///< index into Placement::bufts
  int device = 0;
  BufferUsage usage = BufferUsage::kWeights;
  uint64_t size = 0;  ///< bytes
  uint64_t alignment = 32;
  bool mapped = false;
  uint64_t file_offset = 0;  ///< mapped: absolute GGUF offset of byte 0
};

struct MemoryPlan {
  std::vector<PlannedBuffer> buffers;
  /// Bytes per (device, usage), for the fit check and the summary lines.
  uint64_t DeviceBytes(int device) const;
};

/// Lays out all buffers and fills GlobalTensor::buffer/offset and Tensor::buffer/offset of every
/// graph tensor that owns memory. Errors: kInternal on inconsistent placement (unplaced tensor).
Status PlanMemory(ModelGraphs& m, const Placement& p, MemoryPlan* out);

}  // namespace stowage::planner
