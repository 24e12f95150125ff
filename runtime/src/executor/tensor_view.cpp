// TensorView's layout helpers (tensor_view.h): shape text, contiguity and contiguous strides. Apart
// from the kernels so that code which only describes tensors (the plan loader's graph checks, the
// plan verifier's fuzz target) needs no kernel, OpenMP or SIMD code.
#include "tensor_view.h"

#include <string>

#include "stowage/runtime/ggml_types.h"

namespace stowage::exec {

std::string ShapeString(const TensorView& t) {
  return std::string(IsValidGgmlType(uint32_t(t.type)) ? GgmlTypeName(t.type) : "invalid") + "[" +
         std::to_string(t.ne[0]) + "," + std::to_string(t.ne[1]) + "," + std::to_string(t.ne[2]) + "," +
         std::to_string(t.ne[3]) + "]";
}

bool TensorView::is_contiguous() const {
  const GgmlTypeTraits& tt = GetTypeTraits(type);
  size_t expect = tt.type_size;
  for (int i = 0; i < 4; ++i) {
    if (ne[i] != 1 && nb[i] != expect) return false;
    expect = (i == 0) ? RowSize(type, ne[0]) : expect * size_t(ne[i]);
  }
  return true;
}

void SetContiguousStrides(TensorView& t) {
  t.nb[0] = GetTypeTraits(t.type).type_size;
  t.nb[1] = RowSize(t.type, t.ne[0]);
  t.nb[2] = t.nb[1] * size_t(t.ne[1]);
  t.nb[3] = t.nb[2] * size_t(t.ne[2]);
}

}  // namespace stowage::exec
