// TensorView: how the executor hands a tensor to a backend's kernels (every backend takes it: the
// CPU ops of backends/cpu/ops.h, the CUDA and oneDNN backends' nodes, the plan loader's graph
// checks). A view owns nothing; it describes memory in ggml's layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "stowage/runtime/ggml_types.h"

namespace stowage::exec {

/// TensorView::layout of a tensor in ggml's own layout: rows of blocks as in the GGUF file, strides
/// nb[]. Other values are a backend's converted weight layouts (cpu::kLayoutQ4_0x8 and the other
/// CPU_REPACK layouts, exec::kLayoutOneDnnBlocked), read only by that backend's kernels.
inline constexpr int kLayoutPlain = 0;

/// A tensor in ggml's layout: shape ne[] in ggml order (ne[0] innermost; unused dimensions are 1)
/// and byte strides nb[] (nb[0] = the type size for plain types, the block size for quantized rows),
/// as ggml_tensor's ne / nb.
struct TensorView {
  void* data = nullptr;
  GgmlType type = GgmlType::F32;
  int64_t ne[4] = {1, 1, 1, 1};
  size_t nb[4] = {0, 0, 0, 0};
  int layout = kLayoutPlain;  ///< kLayoutPlain or a backend's converted layout (see kLayoutPlain)

  int64_t nelements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t nrows() const { return ne[1] * ne[2] * ne[3]; }
  /// True when the strides are the contiguous ones of SetContiguousStrides, ignoring the stride
  /// of any dimension of size 1 (ggml_is_contiguous).
  bool is_contiguous() const;
};

/// Fills nb[] for a contiguous tensor of `type` and shape ne[] (nb0 = type size, nb1 =
/// RowSize(type, ne0), nb2 = nb1 * ne1, nb3 = nb2 * ne2), as ggml_new_tensor. ne0 must be a
/// multiple of the block size.
void SetContiguousStrides(TensorView& t);

/// "type[ne0,ne1,ne2,ne3]" (e.g. "q4_0[4096,4096,1,1]"; "invalid" for a type outside ggml's), as
/// error messages name tensors.
std::string ShapeString(const TensorView& t);

}  // namespace stowage::exec
