// Internal: turning graph tensors and weights into the OpQuery a device manifest answers
// (ggml_backend_dev_supports_op's view of a node).
#pragma once

#include <array>
#include <string>

#include "stowage/planner/graph.h"
#include "stowage/planner/manifest.h"
#include "stowage/planner/placement.h"

namespace stowage::planner {

/// Byte strides of graph tensor `t` at binding `b` (ggml's nb[], views and permutes included).
std::array<int64_t, 4> TensorStrides(const Graph& g, int t, const Bindings& b);

/// ggml_is_contiguous for a tensor of `type`, shape ne and strides nb.
bool IsContiguous(GgmlType type, const int64_t ne[4], const std::array<int64_t, 4>& nb);

/// Where a tensor's memory lives, as the scheduler sees it before graph allocation: only weights and
/// KV cache tensors (and views of them, through view_src) have a buffer.
struct BufferInfo {
  bool allocated = false;
  std::string buft;  ///< buffer type name ("CPU_Mapped" for mmap'ed CPU weights)
  bool is_host = false;
  bool weights = false;  ///< ggml_backend_buffer usage WEIGHTS
};

/// "OP(type [ne0, ne1] in BUFT, ...)": an op query as --explain shows it (sources only).
std::string QueryString(const OpQuery& q);

/// Buffer of a global tensor (weights and KV) under placement `p`.
BufferInfo GlobalBuffer(const ModelGraphs& m, const Placement& p, int global);

}  // namespace stowage::planner
