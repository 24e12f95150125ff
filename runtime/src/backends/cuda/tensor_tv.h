// The kernels' view (cuda_math.h Tv) of a runtime tensor view: used by the CUDA backend and by the
// host emulations of its kernels (test/unit/backends/cuda_emulation.h). Plain C++.
#pragma once

#include "cuda_math.h"
#include "tensor_view.h"

namespace stowage::cuda {

/// `t`'s data, type id, shape and byte strides as the kernels read them.
inline Tv ToTv(const exec::TensorView& t) {
  Tv v;
  v.data = t.data;
  v.type = static_cast<int>(t.type);
  for (int i = 0; i < 4; ++i) {
    v.ne[i] = t.ne[i];
    v.nb[i] = static_cast<int64_t>(t.nb[i]);
  }
  return v;
}

}  // namespace stowage::cuda
