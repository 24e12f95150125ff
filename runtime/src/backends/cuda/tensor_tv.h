// The kernels' view (cuda_math.h Tv) of a runtime tensor view, and their ROPE arguments of a node's
// parameters: used by the CUDA backend and by the host emulations of its kernels
// (test/unit/backends/cuda_emulation.h, cuda_math_test). Plain C++.
#pragma once

#include "cuda_math.h"
#include "stowage/runtime/ggml_op_params.h"
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

/// The kernels' RopeArgs of ROPE parameters `rp` (ggml_rope_ext's; ROPE, ROPE_SET_ROWS, ROPE_CPY):
/// the rotation's parameters, the YaRN correction dims (RopeCorrDims) and theta_scale
/// (RopeThetaScale), computed on the host.
inline RopeArgs ToRopeArgs(const RopeParams& rp) {
  RopeArgs r;
  r.n_dims = rp.n_dims;
  r.mode = rp.mode;
  r.n_offs = rp.n_offs;
  r.freq_scale = rp.freq_scale;
  r.ext_factor = rp.ext_factor;
  r.attn_factor = rp.attn_factor;
  RopeCorrDims(rp.n_dims, rp.n_ctx_orig, rp.freq_base, rp.beta_fast, rp.beta_slow, r.corr_dims);
  r.theta_scale = RopeThetaScale(rp.freq_base, rp.n_dims);
  return r;
}

}  // namespace stowage::cuda
