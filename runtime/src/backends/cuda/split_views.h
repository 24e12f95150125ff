// The views of a row-split MUL_MAT (CudaBackend::MulMatSplit, -sm row): which weight rows a device
// multiplies, where its result lands in dst, and the 2-D copy that gathers a peer's packed result.
// Plain C++ on cpu::TensorView (no CUDA), so cuda_math_test runs the whole split on the CPU backend
// (row_split.h's ranges, one MUL_MAT per part, the gathers) and compares it with the unsplit MUL_MAT.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops.h"  // cpu::TensorView

namespace stowage::exec {

/// One device's part of dst = MUL_MAT(a, x2): rows [lo, hi) of the 2-D weight a [K, N] against
/// x2 [K, M] (src1 gathered as one contiguous matrix, M = ne11 * ne12 * ne13), into d [N, M...]
/// whose rows are contiguous over dims 1..3 (nb2 = nb1 * ne1, nb3 = nb2 * ne2) with nb0 = 4.
struct SplitPartViews {
  cpu::TensorView w;       ///< [K, hi - lo, 1, 1] at `slice` (the device's copy of the rows, a's nb1)
  cpu::TensorView dst;     ///< [hi - lo, M, 1, 1]: columns [lo, hi) of the M dst rows, in place (nb1 = d's)
  cpu::TensorView packed;  ///< [hi - lo, M, 1, 1] packed at `packed` (a peer's scratch), nb1 = 4 (hi - lo)
  /// The gather packed -> dst: `gather_rows` rows of `gather_width` bytes, source pitch
  /// `packed_pitch`, destination pitch `dst_pitch` (cudaMemcpy3DPeerAsync with depth 1).
  size_t gather_width = 0, gather_rows = 0, dst_pitch = 0, packed_pitch = 0;
};

/// The views of rows [lo, hi) (0 <= lo < hi <= a.ne[1]). `slice` holds those rows at a.nb[1];
/// `packed` may be null for the main device's part (it computes into dst directly).
inline SplitPartViews MakeSplitPartViews(const cpu::TensorView& a, const cpu::TensorView& d, int64_t M,
                                         int64_t lo, int64_t hi, void* slice, void* packed) {
  SplitPartViews v;
  v.w = a;
  v.w.data = slice;
  v.w.ne[1] = hi - lo;
  v.w.ne[2] = v.w.ne[3] = 1;
  v.w.nb[2] = v.w.nb[1] * static_cast<size_t>(v.w.ne[1]);
  v.w.nb[3] = v.w.nb[2];
  v.dst = d;
  v.dst.data = static_cast<uint8_t*>(d.data) + lo * 4;
  v.dst.ne[0] = hi - lo;
  v.dst.ne[1] = M;
  v.dst.ne[2] = v.dst.ne[3] = 1;
  v.dst.nb[2] = v.dst.nb[1] * static_cast<size_t>(M);
  v.dst.nb[3] = v.dst.nb[2];
  v.packed = v.dst;
  v.packed.data = packed;
  v.packed.nb[1] = static_cast<size_t>(hi - lo) * 4;
  v.packed.nb[2] = v.packed.nb[3] = v.packed.nb[1] * static_cast<size_t>(M);
  v.gather_width = v.packed.nb[1];
  v.gather_rows = static_cast<size_t>(M);
  v.dst_pitch = d.nb[1];
  v.packed_pitch = v.packed.nb[1];
  return v;
}

}  // namespace stowage::exec
